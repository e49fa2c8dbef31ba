#!/usr/bin/env bash
# The normal-means route's npmle and scale-mixture fits against R's mixsqp (Kim, Carbonetto, Stephens
# & Anitescu 2020; Debian r-cran-mixsqp) on the same likelihood matrices: the log-likelihoods must agree
# to 1e-6 relative and ours must not be lower (issue 15). Skipped, with a message, when Rscript or the
# mixsqp package is missing.
. "$(dirname "$0")/lib.sh"
if ! command -v Rscript >/dev/null || ! Rscript -e 'library(mixsqp); library(jsonlite)' >/dev/null 2>&1; then
    echo "  skip: R with mixsqp and jsonlite is not installed (apt-get install r-cran-mixsqp r-cran-jsonlite)"
    exit 0
fi
start_daemon --threads 2 || exit 1

# 400 observations from a seeded generator: a null majority and two signals, heteroscedastic s
python3 - "$T/data.json" <<'PY'
import json, random, sys
r = random.Random(1515)
x, s = [], []
for _ in range(400):
    u = r.random()
    th = 0.0 if u < 0.6 else (-2.5 if u < 0.8 else 1.8) + 0.4 * r.gauss(0, 1)
    sj = 0.5 + r.random()
    x.append(th + sj * r.gauss(0, 1)); s.append(sj)
json.dump({"x": x, "s": s}, open(sys.argv[1], "w"))
PY
for fam in npmle normal_scale_mixture; do
    expect_status 201 POST /v1/estimators/normal-means "$(jq -c --arg f $fam '. + {prior_family: $f}' "$T/data.json")"
    printf '%s' "$BODY" >"$T/$fam.json"
    R_LL=$(Rscript -e '
        suppressPackageStartupMessages({library(mixsqp); library(jsonlite)})
        a <- commandArgs(TRUE); d <- fromJSON(a[1]); f <- fromJSON(a[2])
        comp <- f$prior$components
        lp <- outer(seq_along(d$x), seq_len(nrow(comp)), function(j, k)
              dnorm(d$x[j], comp$mean[k], sqrt(d$s[j]^2 + comp$sd[k]^2), log = TRUE))
        m <- apply(lp, 1, max); L <- exp(lp - m)
        fit <- mixsqp(L, control = list(verbose = FALSE))
        cat(sprintf("%.17g", sum(m) + sum(log(drop(L %*% fit$x)))))' "$T/data.json" "$T/$fam.json" 2>/dev/null)
    OURS=$(jq -r .log_likelihood "$T/$fam.json")
    echo "  $fam: ours $OURS, R mixsqp $R_LL"
    check "$fam: log-likelihood equal to R mixsqp's to 1e-6" python3 -c "
a, b = $OURS, float('$R_LL' or 'nan')
assert abs(a - b) <= 1e-6 * abs(b), (a, b)
assert a >= b - 1e-9 * abs(b), (a, b)"
done
finish

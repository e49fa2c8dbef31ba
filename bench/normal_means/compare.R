# compare.R: R's mixsqp (Kim, Carbonetto, Stephens & Anitescu 2020) on the same 10^6 x 20 problem as
# bench_nm's "mixsqp alone", run by run.sh when R and mixsqp are installed.
# Builds the likelihood matrix from DIR/nm.csv (x, s) and the atoms in DIR/ours.txt exactly as ours
# (dnorm(x_j, a_k, s_j), each row divided by its largest entry), times mixsqp() with its default
# control (median of REPS runs of user + system CPU time), and prints its log-likelihood next to ours.
# Usage: Rscript compare.R DIR [REPS]
args <- commandArgs(trailingOnly = TRUE)
dir <- args[1]
reps <- if (length(args) > 1) as.integer(args[2]) else 3
suppressPackageStartupMessages(library(mixsqp))
d <- read.csv(file.path(dir, "nm.csv"))
o <- read.table(file.path(dir, "ours.txt"), col.names = c("k", "v"))
ours <- setNames(o$v, o$k)
atoms <- ours[grep("^atom", names(ours))]
lp <- dnorm(outer(d$x, atoms, "-") / d$s, log = TRUE) - log(d$s)
rowmax <- apply(lp, 1, max)
L <- exp(lp - rowmax)
cpu <- numeric(reps)
for (r in seq_len(reps)) {
    tm <- system.time(fit <- mixsqp(L, control = list(verbose = FALSE)))
    cpu[r] <- tm[["user.self"]] + tm[["sys.self"]]
}
ll <- sum(rowmax) + sum(log(drop(L %*% fit$x)))
cat(sprintf("R mixsqp %s: cpu %.1f ms (median of %d), loglik %.10f, status \"%s\"; ours loglik %.10f, rel diff %.1e\n",
            as.character(packageVersion("mixsqp")), 1000 * median(cpu), reps, ll, fit$status,
            ours[["loglik"]], abs(ll - ours[["loglik"]]) / abs(ll)))

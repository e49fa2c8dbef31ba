#!/usr/bin/env bash
# scripts/svgplot.py (the figures of docs/ESTIMATORS.md, `make figures`): tiny inputs render into
# well-formed SVG (parsed with xml.etree) with the expected series and points where they belong; rows
# of another estimator are left out; bad inputs fail with a message; nm-data is deterministic; the
# committed docs/img/eb-central-mse.csv draws into exactly the committed SVG.
# No daemon; well under a second.
. "$(dirname "$0")/lib.sh"
ROOT=$(pwd)
python3 - "$ROOT/scripts/svgplot.py" "$T" >"$T/report" 2>&1 <<'PY' || fail "the checks crashed: $(tail -5 "$T/report")"
import contextlib, importlib.util, io, json, os, sys
import xml.etree.ElementTree as ET

script, tmp = sys.argv[1], sys.argv[2]
spec = importlib.util.spec_from_file_location("svgplot", script)
svgplot = importlib.util.module_from_spec(spec)
spec.loader.exec_module(svgplot)
NS = "{http://www.w3.org/2000/svg}"


def check(desc, ok):
    print(("PASS" if ok else "FAIL") + "\t" + desc)


class Result:
    def __init__(self, returncode, stderr):
        self.returncode, self.stderr = returncode, stderr


def run(*args):
    """svgplot.py ARGS in this process (one interpreter for the whole test): its exit status and
    message as a subprocess would give them."""
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            svgplot.main(["svgplot.py", *args])
        return Result(0, "")
    except SystemExit as e:
        if e.code is None or e.code == 0:
            return Result(0, "")
        return Result(1, str(e.code))


def series(root):
    return [g for g in root.iter(NS + "g") if g.get("class") == "series"]


def circles(g):
    return [(float(c.get("cx")), float(c.get("cy"))) for c in g.iter(NS + "circle")]


# --- mse: 2 eps x 4 models x 3 m, one point without an error bar, one beta row to ignore
models = ["no_pooling", "eb", "local_dp", "central_dp"]
rows = ["estimator,model,eps,m,reps,mse,se"]
for eps in ("0.5", "2.0"):
    for q, model in enumerate(models):
        for k, m in enumerate((10, 100, 1000)):
            se = 0 if (model == "eb" and m == 10) else 0.01
            rows.append(f"gaussian,{model},{eps},{m},7,{1.0 - 0.1 * q - 0.05 * k:.2f},{se}")
rows.append("beta,two_bit,1.0,100,7,0.9,0.01")
with open(f"{tmp}/t.csv", "w") as f:
    f.write("\n".join(rows) + "\n")
r = run("mse", f"{tmp}/t.csv", f"{tmp}/t.svg")
check("mse renders (exit 0)", r.returncode == 0)
try:
    root = ET.parse(f"{tmp}/t.svg").getroot()
    check("mse: well-formed SVG", root.tag == NS + "svg")
except ET.ParseError as e:
    check(f"mse: well-formed SVG ({e})", False)
    sys.exit(0)
ss = series(root)
check(f"mse: 8 series (4 models x 2 eps), got {len(ss)}", len(ss) == 8)
check("mse: the four models in each panel",
      sorted(g.get("data-name") for g in ss) == sorted(models * 2)
      and sorted({g.get("data-eps") for g in ss}) == ["0.5", "2"])
check("mse: 3 points per series", all(len(circles(g)) == 3 for g in ss))
bars = sum(1 for g in ss for ln in g.iter(NS + "line"))
check(f"mse: an error bar per point with se > 0 (22), got {bars}", bars == 22)
w, h = float(root.get("width")), float(root.get("height"))
check("mse: every point inside the picture",
      all(0 < x < w and 0 < y < h for g in ss for x, y in circles(g)))
g = ss[0]
(x1, y1), (x2, y2), (x3, y3) = circles(g)
check("mse: x is log(m): 10 -> 100 and 100 -> 1000 span the same width",
      x2 > x1 and abs((x2 - x1) - (x3 - x2)) < 0.02)
check("mse: a smaller MSE is drawn lower (larger y)", y3 > y2 > y1)
legend = " ".join(t.text or "" for t in root.iter(NS + "text"))
check("mse: legend names each model", all(s in legend for s in
      ("no pooling", "non-private EB", "local DP", "central DP")))
r = run("mse", f"{tmp}/t.csv", f"{tmp}/b.svg", "--estimator", "beta")
check("mse --estimator beta: only the beta row (1 series, 1 point)", r.returncode == 0 and
      [len(circles(g)) for g in series(ET.parse(f"{tmp}/b.svg").getroot())] == [1])
r = run("mse", f"{tmp}/t.csv", f"{tmp}/x.svg", "--estimator", "mixture")
check("mse: an estimator with no rows fails and says so",
      r.returncode != 0 and "no rows for estimator mixture" in r.stderr)

# --- shrink: 5 observations; prior 0.5 delta_0 + 0.5 N(2, 1): prior mean 1
x = [-1.0, 0.0, 1.0, 2.5, 12.0]
pm = [0.2, 0.5, 1.0, 2.0, 11.9]
with open(f"{tmp}/d.json", "w") as f:
    json.dump({"x": x, "s": [1] * 5}, f)
ans = {"prior": {"components": [{"weight": 0.5, "mean": 0, "sd": 0},
                                {"weight": 0.5, "mean": 2, "sd": 1}]},
       "estimates": [{"posterior_mean": v} for v in pm], "log_likelihood": -7.5}
with open(f"{tmp}/a.json", "w") as f:
    json.dump(ans, f)
r = run("shrink", f"{tmp}/d.json", f"{tmp}/s.svg", f"fit one={tmp}/a.json", f"fit two={tmp}/a.json")
check("shrink renders (exit 0)", r.returncode == 0)
root = ET.parse(f"{tmp}/s.svg").getroot()
ss = series(root)
check("shrink: one series of 5 points per answer",
      [g.get("data-name") for g in ss] == ["fit one", "fit two"]
      and all(len(circles(g)) == 5 for g in ss))
pts = circles(ss[0])
ident = next(g for g in root.iter(NS + "g") if g.get("class") == "ref-identity").find(NS + "line")
ax1, ay1, ax2, ay2 = (float(ident.get(k)) for k in ("x1", "y1", "x2", "y2"))
on_line = lambda px, py: abs((py - ay1) * (ax2 - ax1) - (px - ax1) * (ay2 - ay1)) < 1e-3 * (ax2 - ax1) ** 2
check("shrink: the point with posterior mean = x lies on y = x, the others do not",
      on_line(*pts[2]) and not any(on_line(*p) for i, p in enumerate(pts) if i != 2))
pline = next(g for g in root.iter(NS + "g") if g.get("class") == "ref-prior-mean").find(NS + "line")
check("shrink: the prior-mean line is at the prior mean (1, the height of posterior mean 1)",
      abs(float(pline.get("y1")) - pts[2][1]) < 0.02)
axes = next(g for g in root.iter(NS + "g") if g.get("class") == "axes")
ticks = [(float(t.text), float(t.get("y"))) for t in axes.iter(NS + "text")
         if t.get("text-anchor") == "end"]
dv = {round(b[0] - a[0], 9) for a, b in zip(ticks, ticks[1:])}
dy = [b[1] - a[1] for a, b in zip(ticks, ticks[1:])]
check(f"shrink: y tick labels evenly spaced in value and on the page ({[t[0] for t in ticks]})",
      len(ticks) >= 3 and len(dv) == 1 and max(dy) - min(dy) < 0.02)
with open(f"{tmp}/bad.json", "w") as f:
    json.dump(dict(ans, estimates=ans["estimates"][:4]), f)
r = run("shrink", f"{tmp}/d.json", f"{tmp}/x.svg", f"bad={tmp}/bad.json")
check("shrink: an answer with the wrong number of estimates fails and says so",
      r.returncode != 0 and "4 estimates for 5 observations" in r.stderr)

# --- the committed figure: docs/img/eb-central-mse.csv (eb_central --csv) still draws, with 4 models
# x 3 eps x 8 m, into exactly the committed SVG (the script and the figure have not drifted apart)
root_dir = os.path.dirname(os.path.dirname(os.path.abspath(script)))
r = run("mse", f"{root_dir}/docs/img/eb-central-mse.csv", f"{tmp}/c.svg")
ss = series(ET.parse(f"{tmp}/c.svg").getroot()) if r.returncode == 0 else []
check("committed CSV: 12 series of 8 points (4 models x 3 eps x m = 30..10^5)",
      len(ss) == 12 and all(len(circles(g)) == 8 for g in ss))
check("committed SVG: what svgplot.py draws from the committed CSV (else run make figures)",
      r.returncode == 0 and open(f"{tmp}/c.svg", "rb").read()
      == open(f"{root_dir}/docs/img/eb-central-mse.svg", "rb").read())

# --- nm-data: seeded, the same file twice
for name, seed in (("n1", 15), ("n2", 15), ("n3", 16)):
    run("nm-data", "--n", "50", "--seed", str(seed), f"{tmp}/{name}.json")
b1, b2, b3 = (open(f"{tmp}/{n}.json", "rb").read() for n in ("n1", "n2", "n3"))
d = json.loads(b1)
check("nm-data: 50 observations, s in [0.5, 1.5]",
      len(d["x"]) == 50 and len(d["s"]) == 50 and all(0.5 <= s <= 1.5 for s in d["s"]))
check("nm-data: the same seed gives the same bytes, another seed others", b1 == b2 and b1 != b3)
PY
while IFS=$'\t' read -r res desc; do
    case "$res" in PASS) pass "$desc" ;; FAIL) fail "$desc" ;; *) fail "unexpected output: $res $desc" ;; esac
done <"$T/report"
finish

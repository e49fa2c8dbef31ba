#!/usr/bin/env python3
"""svgplot.py: the figures of docs/ESTIMATORS.md as SVG, with the standard library only.

`make figures` (scripts/figures.sh) drives it; each subcommand is deterministic for its input.

  svgplot.py mse CSV OUT.svg [--estimator gaussian]
      The MSE / s^2 of each model against the number of clients m (log scale), one panel per
      epsilon, from the CSV of `eb_central --csv` (columns estimator, model, eps, m, reps, mse, se).
      Error bars: +-2 standard errors over the repetitions. Dashed: 1 (no pooling's expected MSE);
      dotted: 0.95 (pooling pays 5 %, the EB_NO_POOLING_GAIN threshold).

  svgplot.py nm-data --n N --seed S OUT.json
      A seeded normal-means data set {"x": [...], "s": [...]} (the request body's x and s):
      s_j uniform on [0.5, 1.5], theta_j = 1 with probability 0.6 and 1 + N(0, 2^2) otherwise,
      x_j = theta_j + N(0, s_j^2). Python's Mersenne Twister with an integer seed and Box-Muller
      normals: the same file on every machine.

  svgplot.py shrink DATA.json OUT.svg TITLE=ANSWER.json [TITLE=ANSWER.json ...]
      Raw x_j against the posterior mean, one panel per answer of POST /v1/estimators/normal-means
      on DATA.json, with the line y = x (no shrinkage) and the fitted prior's mean (the mean of the
      answer's prior components).

Every series is a <g class="series" data-name=...> holding one <circle> per point, so that the test
(tests/integration/test_svgplot.sh) and a reader can count them.
"""
import csv
import json
import math
import random
import sys
from xml.sax.saxutils import escape

FONT = 'font-family="DejaVu Sans, Helvetica, Arial, sans-serif"'
MODELS = [  # key in the CSV, legend label, colour
    ("no_pooling", "no pooling", "#7f7f7f"),
    ("eb", "non-private EB", "#000000"),
    ("local_dp", "local DP", "#d95f02"),
    ("central_dp", "central DP", "#1b62a5"),
]
OTHER_COLOURS = ["#1b9e77", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d"]
SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")


def fmt(v):
    """A coordinate with two decimals (the SVG stays small and diffs stay readable)."""
    return f"{v:.2f}"


def nice_ticks(lo, hi, n=5):
    """About n round tick values covering [lo, hi]."""
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(k * mag for k in (1, 2, 5, 10) if k * mag >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    ticks = []
    t = first
    while t <= hi + 1e-9 * step:
        ticks.append(round(t, 10))
        t += step
    return ticks, step


def tick_label(v, step):
    """v with as many decimals as the step needs (step is 1, 2 or 5 times a power of 10)."""
    digits = max(0, -math.floor(math.log10(step) + 1e-9))
    text = f"{v:.{digits}f}"
    return "0" if float(text) == 0 else text


class Panel:
    """One plotting area: data coordinates mapped to a pixel box, with axes drawn around it."""

    def __init__(self, x0, y0, w, h, xlim, ylim, xlog=False):
        self.x0, self.y0, self.w, self.h = x0, y0, w, h
        self.xlim, self.ylim, self.xlog = xlim, ylim, xlog

    def px(self, x):
        lo, hi = self.xlim
        if self.xlog:
            x, lo, hi = math.log10(x), math.log10(lo), math.log10(hi)
        return self.x0 + (x - lo) / (hi - lo) * self.w

    def py(self, y):
        lo, hi = self.ylim
        return self.y0 + self.h - (y - lo) / (hi - lo) * self.h

    def frame(self, out, title, xlabel, ylabel, xticks, yticks):
        """Axes box, ticks with labels, grid lines, title and axis labels."""
        x0, y0, w, h = self.x0, self.y0, self.w, self.h
        out.append(f'<g class="axes">')
        for value, label in yticks:
            y = self.py(value)
            out.append(f'<line x1="{fmt(x0)}" y1="{fmt(y)}" x2="{fmt(x0 + w)}" y2="{fmt(y)}" '
                       'stroke="#e6e6e6" stroke-width="1"/>')
            out.append(f'<text x="{fmt(x0 - 6)}" y="{fmt(y + 4)}" text-anchor="end" '
                       f'font-size="11" {FONT}>{escape(label)}</text>')
        for value, label in xticks:
            x = self.px(value)
            out.append(f'<line x1="{fmt(x)}" y1="{fmt(y0)}" x2="{fmt(x)}" y2="{fmt(y0 + h)}" '
                       'stroke="#e6e6e6" stroke-width="1"/>')
            out.append(f'<text x="{fmt(x)}" y="{fmt(y0 + h + 16)}" text-anchor="middle" '
                       f'font-size="11" {FONT}>{escape(label)}</text>')
        out.append(f'<rect x="{fmt(x0)}" y="{fmt(y0)}" width="{fmt(w)}" height="{fmt(h)}" '
                   'fill="none" stroke="#333333" stroke-width="1"/>')
        out.append(f'<text x="{fmt(x0 + w / 2)}" y="{fmt(y0 - 8)}" text-anchor="middle" '
                   f'font-size="13" font-weight="bold" {FONT}>{escape(title)}</text>')
        out.append(f'<text x="{fmt(x0 + w / 2)}" y="{fmt(y0 + h + 34)}" text-anchor="middle" '
                   f'font-size="12" {FONT}>{escape(xlabel)}</text>')
        if ylabel:
            cx, cy = x0 - 44, y0 + h / 2
            out.append(f'<text x="{fmt(cx)}" y="{fmt(cy)}" text-anchor="middle" font-size="12" '
                       f'transform="rotate(-90 {fmt(cx)} {fmt(cy)})" {FONT}>{escape(ylabel)}</text>')
        out.append('</g>')

    def hline(self, out, y, dash, label, cls):
        out.append(f'<g class="{cls}"><line x1="{fmt(self.x0)}" y1="{fmt(self.py(y))}" '
                   f'x2="{fmt(self.x0 + self.w)}" y2="{fmt(self.py(y))}" stroke="#555555" '
                   f'stroke-width="1" stroke-dasharray="{dash}"/>')
        if label:
            out.append(f'<text x="{fmt(self.x0 + self.w - 4)}" y="{fmt(self.py(y) - 4)}" '
                       f'text-anchor="end" font-size="10" fill="#555555" {FONT}>'
                       f'{escape(label)}</text>')
        out.append('</g>')


def svg_document(width, height, body, title):
    head = (f'<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}">\n<title>{escape(title)}</title>\n'
            f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>\n')
    return head + "\n".join(body) + "\n</svg>\n"


def legend(out, x, y, entries):
    """A horizontal legend: per (label, colour[, dash]) a line (dashed when dash is given, else
    solid with a marker; dash "dot": a dot alone, for a scatter) and the label."""
    out.append('<g class="legend">')
    for label, colour, *dash in entries:
        if dash == ["dot"]:
            out.append(f'<circle cx="{fmt(x + 11)}" cy="{fmt(y)}" r="3" fill="{colour}"/>')
            out.append(f'<text x="{fmt(x + 28)}" y="{fmt(y + 4)}" font-size="12" {FONT}>'
                       f'{escape(label)}</text>')
            x += 36 + 7.2 * len(label)
            continue
        style = f' stroke-dasharray="{dash[0]}"' if dash else ""
        out.append(f'<line x1="{fmt(x)}" y1="{fmt(y)}" x2="{fmt(x + 22)}" y2="{fmt(y)}" '
                   f'stroke="{colour}" stroke-width="{1 if dash else 2}"{style}/>')
        if not dash:
            out.append(f'<rect x="{fmt(x + 8)}" y="{fmt(y - 3)}" width="6" height="6" '
                       f'fill="{colour}"/>')
        out.append(f'<text x="{fmt(x + 28)}" y="{fmt(y + 4)}" font-size="12" {FONT}>'
                   f'{escape(label)}</text>')
        x += 36 + 7.2 * len(label)
    out.append('</g>')


def read_mse(path, estimator):
    """{eps: {model: [(m, mse, se, reps), ...]}} for one estimator, m increasing."""
    table = {}
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise SystemExit(f"svgplot: {path}: no rows")
    for r in rows:
        if r["estimator"] != estimator:
            continue
        eps = float(r["eps"])
        table.setdefault(eps, {}).setdefault(r["model"], []).append(
            (float(r["m"]), float(r["mse"]), float(r["se"]), int(r["reps"])))
    if not table:
        raise SystemExit(f"svgplot: {path}: no rows for estimator {estimator}")
    for per_model in table.values():
        for pts in per_model.values():
            pts.sort()
    return table


def plot_mse(csv_path, out_path, estimator="gaussian"):
    table = read_mse(csv_path, estimator)
    all_pts = [p for pm in table.values() for pts in pm.values() for p in pts]
    ms = [p[0] for p in all_pts]
    xlim = (min(ms) / 1.3, max(ms) * 1.3)
    ylo = min(min(p[1] - 2 * p[2] for p in all_pts), 0.95)
    yhi = max(max(p[1] + 2 * p[2] for p in all_pts), 1.0)
    pad = 0.05 * (yhi - ylo)
    yticks, ystep = nice_ticks(ylo - pad, yhi + pad, 7)
    ylim = (min(ylo - pad, yticks[0]), max(yhi + pad, yticks[-1]))
    xticks = [(10.0 ** k, "10" + str(k).translate(SUPERSCRIPT))
              for k in range(math.ceil(math.log10(xlim[0])), math.floor(math.log10(xlim[1])) + 1)]
    pw, ph, left, top, gap = 260, 240, 70, 60, 40
    width = left + len(table) * pw + (len(table) - 1) * gap + 20
    height = top + ph + 66
    body = []
    known = [m for m in MODELS if any(m[0] in pm for pm in table.values())]
    others = sorted({k for pm in table.values() for k in pm} - {m[0] for m in MODELS})
    known += [(k, k.replace("_", " "), OTHER_COLOURS[i % len(OTHER_COLOURS)])
              for i, k in enumerate(others)]  # models this script does not name: drawn all the same
    legend(body, left, 20, [(label, colour) for _, label, colour in known] +
           [("1: no gain", "#555555", "5,3"), ("0.95: pooling pays 5 %", "#555555", "1,3")])
    for i, eps in enumerate(sorted(table)):
        panel = Panel(left + i * (pw + gap), top, pw, ph, xlim, ylim, xlog=True)
        panel.frame(body, f"ε = {eps:g}", "clients m (log scale)",
                    "MSE / s²  (1 = no pooling)" if i == 0 else "",
                    xticks, [(t, tick_label(t, ystep)) for t in yticks])
        panel.hline(body, 1.0, "5,3", "", "ref-no-gain")
        panel.hline(body, 0.95, "1,3", "", "ref-gain")
        for key, label, colour in known:
            pts = table[eps].get(key, [])
            body.append(f'<g class="series" data-name="{key}" data-eps="{eps:g}">')
            line = " ".join(f"{fmt(panel.px(m))},{fmt(panel.py(v))}" for m, v, _, _ in pts)
            body.append(f'<polyline points="{line}" fill="none" stroke="{colour}" '
                        'stroke-width="1.5"/>')
            for m, v, se, reps in pts:
                x = panel.px(m)
                if se > 0:
                    body.append(f'<line x1="{fmt(x)}" y1="{fmt(panel.py(v - 2 * se))}" '
                                f'x2="{fmt(x)}" y2="{fmt(panel.py(v + 2 * se))}" '
                                f'stroke="{colour}" stroke-width="1"/>')
                body.append(f'<circle cx="{fmt(x)}" cy="{fmt(panel.py(v))}" r="2.5" '
                            f'fill="{colour}"><title>{escape(label)}, m = {m:g}, '
                            f'ε = {eps:g}: {v:.3f} ± {2 * se:.3f} ({reps} reps)</title>'
                            '</circle>')
            body.append('</g>')
    reps = [p[3] for p in all_pts]
    body.append(f'<text x="{left}" y="{height - 8}" font-size="10" fill="#555555" {FONT}>'
                f'bars: ±2 standard errors of the mean over {min(reps)} to {max(reps)} '
                'repetitions per point</text>')
    title = f"MSE of the {estimator} estimator by model as the number of clients grows"
    with open(out_path, "w") as f:
        f.write(svg_document(width, height, body, title))


def normal_pair(rng):
    """Two independent N(0, 1) draws (Box-Muller on the generator's uniforms)."""
    u1 = 1.0 - rng.random()  # (0, 1]
    u2 = rng.random()
    r = math.sqrt(-2.0 * math.log(u1))
    return r * math.cos(2 * math.pi * u2), r * math.sin(2 * math.pi * u2)


def nm_data(n, seed, out_path):
    rng = random.Random(seed)
    x, s = [], []
    for _ in range(n):
        sj = 0.5 + rng.random()
        z1, z2 = normal_pair(rng)
        theta = 1.0 if rng.random() < 0.6 else 1.0 + 2.0 * z1
        x.append(round(theta + sj * z2, 4))
        s.append(round(sj, 4))
    with open(out_path, "w") as f:
        json.dump({"x": x, "s": s}, f)
        f.write("\n")


def plot_shrink(data_path, out_path, fits):
    with open(data_path) as f:
        data = json.load(f)
    x = data["x"]
    panels = []
    for spec in fits:
        title, _, path = spec.partition("=")
        if not path:
            raise SystemExit(f"svgplot: shrink: '{spec}' is not TITLE=ANSWER.json")
        with open(path) as f:
            ans = json.load(f)
        pm = [e["posterior_mean"] for e in ans["estimates"]]
        if len(pm) != len(x):
            raise SystemExit(f"svgplot: {path}: {len(pm)} estimates for {len(x)} observations")
        comps = ans["prior"]["components"]
        prior_mean = sum(c["weight"] * c["mean"] for c in comps) / sum(c["weight"] for c in comps)
        panels.append((title, pm, prior_mean, ans))
    lo = min(min(x), min(min(p[1]) for p in panels))
    hi = max(max(x), max(max(p[1]) for p in panels))
    ticks, step = nice_ticks(lo, hi, 8)
    lim = (min(lo, ticks[0]) - 0.03 * (hi - lo), max(hi, ticks[-1]) + 0.03 * (hi - lo))
    lab = [(t, tick_label(t, step)) for t in ticks]
    pw, left, top, gap = 300, 70, 60, 50
    width = left + len(panels) * pw + (len(panels) - 1) * gap + 20
    height = top + pw + 56
    body = []
    legend(body, left, 20, [("observation (x, posterior mean)", "#1b62a5", "dot"),
                            ("y = x (no shrinkage)", "#999999", "none"),
                            ("fitted prior mean", "#d95f02", "5,3")])
    for i, (title, pm, prior_mean, ans) in enumerate(panels):
        panel = Panel(left + i * (pw + gap), top, pw, pw, lim, lim)
        panel.frame(body, title, "observation x", "posterior mean" if i == 0 else "", lab, lab)
        body.append(f'<g class="ref-identity"><line x1="{fmt(panel.px(lim[0]))}" '
                    f'y1="{fmt(panel.py(lim[0]))}" x2="{fmt(panel.px(lim[1]))}" '
                    f'y2="{fmt(panel.py(lim[1]))}" stroke="#999999" stroke-width="1"/></g>')
        body.append(f'<g class="ref-prior-mean"><line x1="{fmt(panel.x0)}" '
                    f'y1="{fmt(panel.py(prior_mean))}" x2="{fmt(panel.x0 + panel.w)}" '
                    f'y2="{fmt(panel.py(prior_mean))}" stroke="#d95f02" stroke-width="1" '
                    'stroke-dasharray="5,3"/>'
                    f'<text x="{fmt(panel.x0 + 4)}" y="{fmt(panel.py(prior_mean) - 4)}" '
                    f'font-size="10" fill="#d95f02" {FONT}>prior mean {prior_mean:.3f}</text></g>')
        body.append(f'<g class="series" data-name="{escape(title)}">')
        for xj, mj in zip(x, pm):
            body.append(f'<circle cx="{fmt(panel.px(xj))}" cy="{fmt(panel.py(mj))}" r="2.5" '
                        'fill="#1b62a5" fill-opacity="0.6"/>')
        body.append('</g>')
        notes = []  # the fitted prior's parameters and the log-likelihood, bottom right
        prior = ans["prior"]
        for key, name in (("mode", "mode"), ("scale", "scale"), ("pi0", "π₀")):
            if isinstance(prior.get(key), (int, float)):
                notes.append(f"{name} {prior[key]:.3f}")
        if isinstance(ans.get("log_likelihood"), (int, float)):
            notes.append(f"log-likelihood {ans['log_likelihood']:.2f}")
        for k, line in enumerate(reversed([", ".join(notes[:-1]), notes[-1]] if notes else [])):
            body.append(f'<text x="{fmt(panel.x0 + panel.w - 6)}" '
                        f'y="{fmt(panel.y0 + panel.h - 8 - 13 * k)}" text-anchor="end" '
                        f'font-size="10" fill="#333333" {FONT}>{escape(line)}</text>')
    with open(out_path, "w") as f:
        f.write(svg_document(width, height, body, "Raw observations against posterior means"))


def main(argv):
    usage = ("usage: svgplot.py mse CSV OUT.svg [--estimator NAME]\n"
             "       svgplot.py nm-data --n N --seed S OUT.json\n"
             "       svgplot.py shrink DATA.json OUT.svg TITLE=ANSWER.json ...")
    if len(argv) < 2:
        raise SystemExit(usage)
    cmd, args = argv[1], argv[2:]
    if cmd == "mse" and len(args) in (2, 4):
        est = "gaussian"
        if len(args) == 4:
            if args[2] != "--estimator":
                raise SystemExit(usage)
            est = args[3]
        plot_mse(args[0], args[1], est)
    elif cmd == "nm-data" and len(args) == 5 and args[0] == "--n" and args[2] == "--seed":
        nm_data(int(args[1]), int(args[3]), args[4])
    elif cmd == "shrink" and len(args) >= 3:
        plot_shrink(args[0], args[1], args[2:])
    else:
        raise SystemExit(usage)


if __name__ == "__main__":
    main(sys.argv)

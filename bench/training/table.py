#!/usr/bin/env python3
"""bench/training/table.py: prints the training benchmark's rows side by side.

Reads JSON lines from the files named on the command line (or stdin): the rows of
bench/training/torch_anchor.py and of any other implementation that prints the same fields
(model, batch, threads, mode, samples_per_s, test_accuracy, optionally samples_per_cpu_s; "impl"
names the implementation, default "torch").
Rows are grouped by (model, batch, threads) in input order; within a group each row also shows its
speed relative to the group's "dpsilo" DP-SGD row when there is one. Lines that are not JSON
objects are copied through unchanged, so a driver's own messages survive. Standard library only.
"""

import json
import sys


def fmt_rate(v):
    return "-" if v is None else "%.0f" % v


def main(paths):
    rows, order = {}, []
    streams = [open(p) for p in paths] if paths else [sys.stdin]
    for s in streams:
        for line in s:
            line = line.rstrip("\n")
            try:
                r = json.loads(line)
            except ValueError:
                r = None
            if not isinstance(r, dict) or "samples_per_s" not in r:
                if line:
                    print(line)
                continue
            key = (r.get("model"), r.get("batch"), r.get("threads"))
            if key not in rows:
                rows[key] = []
                order.append(key)
            rows[key].append(r)
    if not order:
        return 0
    hdr = "%-16s %5s %3s  %-25s %10s %10s %8s %9s  %s" % (
        "model", "batch", "thr", "implementation", "samples/s", "per_cpu_s", "test_acc", "vs_dpsilo",
        "notes",
    )
    print(hdr)
    print("-" * len(hdr))
    for key in order:
        group = rows[key]
        ref = next(
            (g["samples_per_s"] for g in group if g.get("impl") == "dpsilo" and g["samples_per_s"]),
            None,
        )
        for g in group:
            impl = "%s/%s" % (g.get("impl", "torch"), g.get("mode", "?"))
            acc = g.get("test_accuracy")
            rel = "-" if not ref or not g["samples_per_s"] else "%.3gx" % (g["samples_per_s"] / ref)
            notes = " ".join(
                "%s=%s" % (k, g[k]) for k in ("blas", "malloc", "epsilon", "data") if g.get(k) is not None
            )
            print(
                "%-16s %5s %3s  %-25s %10s %10s %8s %9s  %s"
                % (
                    key[0],
                    key[1],
                    key[2],
                    impl,
                    fmt_rate(g["samples_per_s"]),
                    fmt_rate(g.get("samples_per_cpu_s")),
                    "-" if acc is None else "%.4f" % acc,
                    rel,
                    notes,
                )
            )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

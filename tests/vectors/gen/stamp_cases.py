#!/usr/bin/python3
"""stamp_cases.py: writes into each vector file's provenance the schema it follows and, for the
accounting schema, how many cases of each kind the C reader must check.

    /usr/bin/python3 tests/vectors/gen/stamp_cases.py          # after any generator has run

tests/unit/test_accounting_vectors.c fails when its own tally of a file differs from
"expected_cases" (a renamed key once made it skip all 2,312 cases of ref_exact_rdp.json and pass).
The classification below is written independently of the C reader, from the case schema in
tests/vectors/README.md, so the two cross-check each other:
  rdp          "order" and "rdp"
  epsilon      "delta", "conversion" and "epsilon"
  calibration  "delta", "conversion", numeric "target_epsilon" and "noise_multiplier"
  known_wrong  any of the above carrying "known_wrong" (counted, not compared)
A case with no "event" or no numeric "rtol", or of none of the kinds, is an error here.
Files of another schema are only labelled: ref_tuning.json ("tuning", read by
tests/unit/test_accounting_tuning.c) and ref_dp_accounting_pld.json ("pld", read by
tests/unit/test_accounting_pld.c).

The provenance object is edited as text (its first line), so number formatting and the rest of the
file stay byte-for-byte as the generators wrote them. Running it twice changes nothing.
"""
import glob
import json
import os
import re
import sys

OTHER_SCHEMAS = {"ref_tuning.json": "tuning", "ref_dp_accounting_pld.json": "pld"}
STAMP_RE = re.compile(r'"schema":"[a-z_]+",("expected_cases":\{[^}]*\},)?')


def is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def classify(c, where):
    if not isinstance(c, dict) or "event" not in c or not is_num(c.get("rtol")):
        sys.exit(f"{where}: not an accounting case (no event or no numeric rtol)")
    if "order" in c and "rdp" in c:
        kind = "rdp"
    elif "delta" in c and "conversion" in c and "epsilon" in c:
        kind = "epsilon"
    elif ("delta" in c and "conversion" in c and is_num(c.get("target_epsilon"))
          and is_num(c.get("noise_multiplier"))):
        kind = "calibration"
    else:
        sys.exit(f"{where}: case of no known kind")
    return "known_wrong" if "known_wrong" in c else kind


def stamp(path):
    name = os.path.basename(path)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    doc = json.loads(text)
    if name in OTHER_SCHEMAS:
        fields = f'"schema":"{OTHER_SCHEMAS[name]}",'
    else:
        counts = {"rdp": 0, "epsilon": 0, "calibration": 0, "known_wrong": 0}
        for i, c in enumerate(doc["cases"]):
            counts[classify(c, f"{name}: case {i}")] += 1
        fields = '"schema":"accounting","expected_cases":' + json.dumps(
            counts, separators=(",", ":")) + ","
    head = '"provenance": {'
    at = text.index(head) + len(head)
    rest = STAMP_RE.sub("", text[at:], count=1) if STAMP_RE.match(text[at:].lstrip()) else text[at:]
    rest = rest.lstrip(" ") if rest.startswith(" ") else rest
    new = text[:at] + fields + rest
    json.loads(new)  # still valid JSON
    if new != text:
        with open(path, "w", encoding="utf-8") as f:
            f.write(new)
    print(f"{name}: {fields.rstrip(',')}")


if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    for p in sorted(glob.glob(os.path.join(here, "..", "*.json"))):
        stamp(p)

#!/usr/bin/env python3
"""fuzz_driver.py: bounded, deterministic robustness fuzzer for dpsilod's POST and PATCH routes.

Run by tests/integration/test_fuzz.sh against a daemon started with --auth off on loopback:

    fuzz_driver.py --url http://127.0.0.1:PORT --routes service/api/routes.c [--seed N]
                   [--per-route N] [--budget-s S]

For every POST and PATCH row of the route table (parsed from service/api/routes.c, so a new route is
fuzzed the day it is added; a route without a seed body below fails the run) it sends --per-route
requests: valid seed bodies mutated one step at a time (a value of the wrong type, a non-finite or
extreme number, a missing or unknown field, an array where an object is expected, event trees nested
past the 64-level limit, long strings) plus raw byte-level damage (NaN/Infinity literals, 1e400,
integers past 2^63, truncation, invalid UTF-8, empty and non-object bodies, deep [[[...]]] nesting,
bodies over the route's cap). Path parameters ({id}) are mostly real ids, sometimes hostile strings.

Every answer must satisfy:
  - the daemon answers (never crashes, never resets a connection on a body under the cap, never
    takes longer than --timeout-s);
  - no 5xx;
  - the body is strict JSON (no NaN/Infinity tokens) and an object;
  - 4xx: the error shape of docs/API.md {"error": {"code": non-empty, "message": non-empty, ...}};
    a 400 for a body that is well-formed JSON object carries a non-empty "field"; a 400 for a body
    that is not well-formed JSON carries "line" and "column"; the status of an over-cap body is 413.

The random stream is seeded (--seed), so a failure is reproducible: the report prints the route, the
mutation and the body. --budget-s bounds the wall time (each route gets an equal share; unfinished
iterations are counted and printed, never failed). Python 3 standard library only.
"""
import argparse
import http.client
import json
import random
import re
import socket
import sys
import time
import urllib.parse

# ---- seed bodies (valid requests) ------------------------------------------------------------------

SGM = {"type": "self_composed", "count": 1000,
       "event": {"type": "poisson_sampled", "sampling_rate": 0.01,
                 "event": {"type": "gaussian", "noise_multiplier": 1.1}}}
MIXED = {"type": "composed", "events": [
    {"type": "laplace", "noise_multiplier": 3},
    {"type": "zcdp", "rho": 0.01},
    {"type": "pure", "epsilon": 0.1},
    {"type": "sampled_without_replacement", "source_size": 1000, "sample_size": 10,
     "event": {"type": "gaussian", "noise_multiplier": 2}},
    {"type": "repeat_and_select", "distribution": {"poisson": {"mean": 3}},
     "event": {"type": "gaussian", "noise_multiplier": 4}}]}
G5 = {"type": "gaussian", "noise_multiplier": 5}
GCLIENTS = [{"id": "a", "mean": 0.31, "n": 15}, {"id": "b", "mean": 0.12, "n": 8},
            {"id": "c", "mean": 0.55, "n": 30}, {"id": "d", "mean": -0.05, "n": 4}]
BCLIENTS = [{"id": "a", "successes": 3, "trials": 10}, {"id": "b", "successes": 7, "trials": 12},
            {"id": "c", "successes": 1, "trials": 8}, {"id": "d", "successes": 5, "trials": 10}]
MCLIENTS = [{"id": "a", "mean": -1.1, "n": 10}, {"id": "b", "mean": -0.9, "n": 10},
            {"id": "c", "mean": 1.0, "n": 10}, {"id": "d", "mean": 1.2, "n": 10}]


def with_null(ev, key):
    """A copy of the SGM-shaped tree with `key` left open (null) for /calibrate."""
    e = json.loads(json.dumps(ev))
    node = e
    while True:
        if key in node:
            node[key] = None
            return e
        node = node["event"]


SEEDS = {
    "POST /v1/echo": [{"message": "hi", "count": 2}],
    "POST /v1/accounting/epsilon": [
        {"event": SGM, "delta": 1e-5},
        {"event": {"type": "self_composed", "count": 100, "event": G5}, "delta": 1e-5,
         "accountant": "zcdp"},
        {"event": SGM, "delta": 1e-5, "accountant": "pld"},
        {"event": MIXED, "delta": 1e-6, "orders": [1.5, 2, 8, 64], "conversion": "mironov2017",
         "neighboring": "replace_one"},
    ],
    "POST /v1/accounting/delta": [
        {"event": SGM, "epsilon": 1.0},
        {"event": MIXED, "epsilon": 2.0, "accountant": "rdp", "orders": [2, 4.5],
         "neighboring": "replace_one"},
    ],
    "POST /v1/accounting/rdp": [
        {"event": SGM, "orders": [2, 4.5, 32]},
        {"event": MIXED, "delta": 1e-5, "conversion": "balle2020", "neighboring": "replace_one"},
    ],
    "POST /v1/accounting/calibrate": [
        {"event": with_null(SGM, "noise_multiplier"), "target_epsilon": 1, "delta": 1e-5},
        {"event": with_null(SGM, "count"), "target_epsilon": 2, "delta": 1e-5},
        {"event": with_null(SGM, "sampling_rate"), "target_epsilon": 2, "delta": 1e-5,
         "conversion": "mironov2017"},
        {"event": with_null(SGM, "noise_multiplier"), "target_epsilon": 1, "delta": 1e-5,
         "accountant": "pld", "value_discretization": 0.01},
    ],
    "POST /v1/estimators/gaussian": [
        {"clients": GCLIENTS, "noise_variance": 0.25},
        {"clients": GCLIENTS, "noise_variance": 0.25, "method": "moments", "seed": 7,
         "privacy": {"epsilon0": 0.5, "delta": 1e-5, "r": 1, "sigma_theta_bound": 0.1}},
        {"clients": [{"id": "a", "samples": [0.1, 0.3, 0.2]}, {"id": "b", "samples": [0.5, 0.7]}]},
        {"clients": [{"mean": [1, 12], "n": 4}, {"mean": [2, 14], "n": 4}], "noise_variance": 2,
         "prior": {"mean": [0, 10], "variance": [1, 4]}},
        {"clients": GCLIENTS, "noise_variance": 0.25, "seed": 3,
         "privacy": {"model": "central", "epsilon": 1, "delta": 1e-5, "r": 1,
                     "sigma_theta_bound": 0.5}},
        {"clients": [{"mean": 0.31, "se": 0.13}, {"mean": 0.12, "se": 0.18}, {"mean": 0.5, "se": 0.09}],
         "seed": 3, "privacy": {"epsilon0": 1, "delta": 1e-5, "r": 1, "sigma_theta_bound": 0.2}},
        {"clients": GCLIENTS, "noise_variance": 0.25, "results": "summary"},
        {"clients": GCLIENTS, "noise_variance": 0.25, "results": "full", "keep_data": True},
    ],
    "POST /v1/estimators/beta": [
        {"clients": BCLIENTS},
        {"clients": BCLIENTS, "method": "moments", "variant": "unbiased",
         "privacy": {"epsilon0": 2}},
        {"clients": [{"samples": [1, 0, 0, 1]}, {"samples": [True, False]}],
         "prior": {"alpha": 2, "beta": 5}},
        {"clients": BCLIENTS, "seed": 3,
         "privacy": {"model": "central", "epsilon": 1, "delta": 1e-5}},
        {"clients": BCLIENTS, "method": "moments", "variant": "unbiased", "leave_one_out": False,
         "privacy": {"model": "central", "noise_multiplier": 2, "delta": 1e-5}},
        {"clients": BCLIENTS, "results": "summary"},
    ],
    "POST /v1/estimators/mixture": [
        {"clients": MCLIENTS, "noise_variance": 0.25, "components": 2, "seed": 3},
        {"clients": MCLIENTS, "noise_variance": 1, "prior": {"components": [
            {"weight": 0.3, "mean": -1, "variance": 0.5},
            {"weight": 0.7, "mean": 1, "variance": 0.25}]}},
        {"clients": MCLIENTS, "noise_variance": 0.25, "components": 2, "method": "altmin",
         "privacy": {"epsilon0": 2, "delta": 1e-5, "r": 1.5}},
    ],
    "POST /v1/estimators/normal-means": [
        {"x": [1.2, -0.4, 0.1, 2.5, -1.8, 0.3], "s": [1, 0.8, 1.1, 0.9, 1.2, 1],
         "prior_family": "point_normal", "draws": 2, "seed": 3},
        {"x": [1.2, -0.4, 0.1, 2.5], "s": 0.5, "prior_family": "normal", "mode": "estimate"},
        {"x": [1.2, -0.4, 0.1, 2.5, 4], "s": 1, "prior_family": "npmle", "grid_size": 20},
        {"x": [0.3, -0.2, 0.9], "s": [1, 1, 2], "prior_family": "point_laplace", "mode": 0},
        {"x": [1.2, -0.4, 0.1, 2.5], "s": 1, "prior_family": "normal", "results": "summary"},
        {"x": [1.2, -0.4, 0.1, 2.5], "s": 1, "prior_family": "npmle", "draws": 1,
         "results": "full"},
    ],
    "POST /v1/tuning/cost": [
        {"event": {"type": "laplace", "noise_multiplier": 4},
         "distribution": {"geometric": {"mean": 10}}, "delta": 1e-6, "grid_size": 10},
        {"event": SGM, "distribution": {"truncated_negative_binomial": {"eta": 0.5, "gamma": 0.1}},
         "delta": 1e-5},
        {"event": G5, "distribution": {"poisson": {"mean": 5}}, "delta": 1e-5,
         "neighboring": "add_remove"},
    ],
    "POST /v1/calculators/mrmtl": [
        {"silos": 20, "n": 200, "sigma": 0.4, "tau": 0.08, "noise_multiplier": 14.5, "clip": 1,
         "lambda": 1},
        {"silos": 3, "n": 10, "sigma": 1, "tau": 0, "sigma_dp": 2},
        {"tau": 0.05, "silos": [{"n": 18, "sigma": 0.4, "noise_multiplier": 9.2, "clip": 1},
                                {"n": 88, "sigma": 0.4, "sigma_dp": 4.8}, {"n": 5, "sigma": 1}]},
    ],
    "POST /v1/calculators/fedhdp": [
        {"alpha2": 1, "tau2": 0.25, "groups": [{"name": "out", "clients": 5, "per_client_noise": 0},
                                               {"clients": 95, "gamma2": 0.05}]},
        {"alpha2": 1, "tau2": 0.2, "groups": [{"clients": 30, "gamma2": 0.01},
                                              {"clients": 70, "gamma2": 0.05}],
         "r": [1, 0.3], "lambda": [4.8, 4.5]},
    ],
    "POST /v1/calculators/ppsgd": [
        {"users": 1000, "sigma": 1, "epsilon": 1, "delta": 1e-4, "dim_w": 100, "grad_bound": 10},
        {"users": 1000, "sigma": 1, "epsilon": 10, "delta": 1e-4, "dim_w": 100, "grad_bound": 10,
         "c": 1, "n": 100, "smoothness": 2, "v_norm2": 1},
    ],
    "POST /v1/tuning/plan": [
        {"epsilon": 1, "delta": 1e-5, "training": {"sampling_rate": 0.01, "steps": 1000},
         "distribution": {"geometric": {}}, "grid_size": 10},
        {"epsilon": 2, "delta": 1e-5, "training": {"sampling_rate": 0.02, "steps": 500},
         "distribution": {"poisson": {"mean": 8}}},
    ],
    "POST /v1/tuning/draw": [
        {"distribution": {"geometric": {"mean": 10}}, "grid_size": 10, "label": "lr search"},
        {"distribution": {"fixed": 3}},
    ],
    "POST /v1/silos": [
        {"name": "fz", "budget": {"epsilon": 1e6, "delta": 1e-5}},
        {"name": "fz-rho", "budget": {"rho": 5}},
        {"name": "fz-pld", "budget": {"epsilon": 100, "delta": 1e-5, "accountant": "pld"}},
        {"name": "fz-off", "budget": {"private": False}},
    ],
    "POST /v1/silos/{id}/charges": [
        {"event": G5, "reason": "fuzz", "job_id": 7},
        {"event": SGM, "idempotency_key": "k1", "dry_run": True},
        {"event": {"type": "zcdp", "rho": 0.001}, "neighboring": "replace_one"},
    ],
    "POST /v1/charges": [
        {"idempotency_key": "b1", "charges": [{"silo_id": "$SILO", "event": G5},
                                              {"silo_id": "$SILO2", "event": G5, "reason": "r"}]},
        {"dry_run": True, "charges": [{"silo_id": "$SILO", "event": SGM}]},
    ],
    "POST /v1/silos/{id}/claims": [
        {"event": {"type": "zcdp", "rho": 0.0001}, "timeout_ms": 60000},
        {"event": G5, "reason": "fuzz", "idempotency_key": "c1"},
    ],
    "POST /v1/claims/{id}/commit": [{}],
    "POST /v1/claims/{id}/abort": [{}],
    "POST /v1/jobs/{id}/cancel": [{}],
    # a job on a generator (no upload needed); a fuzzed spec is checked whole before anything runs
    "POST /v1/jobs": [
        {"algorithm": "fedavg", "dataset": {"generator": "synthetic-linreg", "silos": 2, "dim": 2,
                                            "n_min": 10, "n_max": 10},
         "model": {"type": "linear"}, "rounds": 1, "batch_size": 4, "lr": 0.1},
        {"algorithm": "mrmtl", "lambda": 1, "dataset": {"generator": "synthetic-classification",
                                                        "silos": 2, "dim": 3, "n_min": 20,
                                                        "n_max": 20},
         "model": {"type": "logistic"}, "rounds": 1, "batch_size": 4, "lr": 0.1,
         "privacy": {"target_epsilon": 2, "delta": 1e-5, "clip": 1}},
        {"algorithm": "ppsgd", "ratio": 0.5, "dataset": {"generator": "synthetic-linreg",
                                                         "silos": 3, "dim": 2, "n_min": 10,
                                                         "n_max": 10},
         "model": {"type": "linear"}, "rounds": 1, "batch_size": 4, "lr": 0.1,
         "privacy": {"noise_multiplier": 1, "delta": 1e-5, "clip": 1, "client_rate": 0.5}},
        {"algorithm": "fedhdp", "lambda": 0.1, "dataset": {"generator": "synthetic-linreg",
                                                           "silos": 3, "dim": 2, "n_min": 10,
                                                           "n_max": 10},
         "model": {"type": "linear"}, "rounds": 1, "batch_size": 4, "lr": 0.1,
         "privacy": {"target_epsilon": 2, "delta": 1e-5, "clip": 1, "client_rate": 0.5},
         "fedhdp": {"groups": [{"silos": ["0"], "private": False, "lambda": 0.5},
                               {"r": 0.1}]}},
        {"algorithm": "altmin", "altmin": {"rank": 2, "init": "spectral"},
         "dataset": {"generator": "synthetic-lowrank", "silos": 4, "dim": 3, "n_min": 6,
                     "rank": 2},
         "rounds": 1, "privacy": {"noise_multiplier": 1, "delta": 1e-5, "clip": 1}},
        {"algorithm": "dp_adaped", "dataset": {"generator": "synthetic-classification",
                                               "silos": 3, "dim": 3, "n_min": 12, "n_max": 12},
         "model": {"type": "softmax"}, "rounds": 1, "batch_size": 4, "lr": 0.1,
         "privacy": {"target_epsilon": 2, "delta": 1e-5, "clip": 1, "client_rate": 0.5},
         "adaped": {"tau": 2, "psi_init": 2, "lr_psi": 0.1, "clip_psi": 0.5}},
        {"algorithm": "ifca", "lambda": 0.5, "dataset": {"generator": "synthetic-linreg",
                                                         "silos": 3, "dim": 2, "n_min": 10,
                                                         "n_max": 10},
         "model": {"type": "linear"}, "rounds": 2, "batch_size": 4, "lr": 0.1,
         "privacy": {"target_epsilon": 2, "delta": 1e-5, "clip": 1},
         "ifca": {"clusters": 2, "select_rounds": 1, "warm_rounds": 1, "selection_epsilon": 0.1,
                  "loss_bound": 2}},
        {"algorithm": "adamix", "dataset": {"generator": "synthetic-linreg", "silos": 3, "dim": 2,
                                            "n_min": 10, "n_max": 10},
         "model": {"type": "linear"}, "rounds": 1, "batch_size": 4, "lr": 1,
         "adamix": {"components": 2, "steps": 3, "em_iters": 2, "noise_var": 0.1}},
        {"algorithm": "fedavg", "dataset": {"generator": "synthetic-classification", "dim": 2,
                                            "silos": 1, "n_min": 40, "n_max": 40},
         "partition": {"kind": "classes", "silos": 4, "classes_per_silo": 1,
                       "rows_per_silo": 6},
         "model": {"type": "logistic"}, "rounds": 1, "batch_size": 4, "lr": 0.1},
        {"algorithm": "gaussian_prior", "dataset": {"generator": "synthetic-linreg", "silos": 3,
                                                    "dim": 2, "n_min": 10, "n_max": 10},
         "model": {"type": "linear"}, "rounds": 1, "batch_size": 4, "lr": 1,
         "gaussian_prior": {"variant": "em", "sigma_theta2": 0.5, "sigma_x2": 0.5}},
    ],
    "POST /v1/silos/{id}/token": [{}],
    "PATCH /v1/silos/{id}": [
        {"budget": {"epsilon": 2e9}},
        {"name": "renamed", "budget": {"epsilon": 3e9, "delta": 1e-5}},
        {"budget": {"rho": 2e6}},
    ],
}
# the dry run of a job takes what a submission takes (and stores nothing)
SEEDS["POST /v1/jobs/plan"] = SEEDS["POST /v1/jobs"]

# ---- mutation vocabulary ----------------------------------------------------------------------------


class Raw:
    """A literal to splice into the serialized body verbatim (not representable as valid JSON)."""

    def __init__(self, text):
        self.text = text


# Values jansson parses: the body stays a well-formed JSON object, so a 400 must name a field.
NASTY = [None, True, False, 0, -0.0, -1, 1, 2, 0.5, -0.5, 1e308, -1e308, 5e-324, 1e-300,
         2 ** 31, 2 ** 53 + 1, 2 ** 63 - 1, -(2 ** 63), 1e20, 1.0000000000000002, 1e-7, 0.999999999,
         "", "x", "1", "NaN", "Infinity", "\u00e9\u6f22", "x" * 5000, [], {}, [1, 2, 3], [[]],
         {"a": 1}, [None], [{}], {"type": "gaussian"}]
# Literals jansson refuses: the answer is a malformed-JSON 400 with line and column.
RAW_BAD = ["NaN", "Infinity", "-Infinity", "nan", "inf", "1e400", "-1e400", "9223372036854775808",
           "-9223372036854775809", "123456789012345678901234567890", "01", "+1", ".5", "1.",
           "0x10", "\"\\u0000\"", "\"\\ud800\"", "undefined", "'s'", "\"a\nb\""]
# Path ids that are not positive integers: 400 (or 404 for the largest int64, a valid id that does
# not exist). ("+1", " 1" and "01" are not here: see the QA report on lenient id parsing.)
HOSTILE_IDS = ["0", "-1", "abc", "99999999999999999999", "1e3", "1.5", "%00", "9223372036854775807",
               "%2e%2e", "-0", "0x1", "1%00"]


def paths(v, prefix=()):
    """All (path, value) pairs of a JSON value, the root included."""
    out = [(prefix, v)]
    if isinstance(v, dict):
        for k, x in v.items():
            out += paths(x, prefix + (k,))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            out += paths(x, prefix + (i,))
    return out


def get_parent(root, path):
    node = root
    for p in path[:-1]:
        node = node[p]
    return node


def copy(v):
    return json.loads(json.dumps(v))


def nest_event(depth):
    """Raw JSON text of an event tree `depth` levels deep (alternating composed / self_composed
    wrappers around a gaussian), built as text: Python's own encoder recurses."""
    head, tail = [], []
    for i in range(depth - 1):
        if i % 2:
            head.append('{"type":"self_composed","count":1,"event":')
            tail.append("}")
        else:
            head.append('{"type":"composed","events":[')
            tail.append("]}")
    return Raw("".join(head) + '{"type":"gaussian","noise_multiplier":3}' + "".join(reversed(tail)))


def json_depth(b):
    """Deepest [ / { nesting of JSON text b (strings skipped)."""
    d = best = 0
    in_str = esc = False
    for c in b:
        if in_str:
            if esc:
                esc = False
            elif c == 0x5C:
                esc = True
            elif c == 0x22:
                in_str = False
        elif c == 0x22:
            in_str = True
        elif c in (0x5B, 0x7B):
            d += 1
            best = max(best, d)
        elif c in (0x5D, 0x7D):
            d -= 1
    return best


# jansson refuses nesting deeper than this (JSON_PARSER_MAX_DEPTH) as malformed JSON.
JANSSON_MAX_DEPTH = 2048


def serialize(v):
    """json.dumps, with Raw values spliced in verbatim."""
    raws = []

    def walk(x):
        if isinstance(x, Raw):
            raws.append(x.text)
            return "\x01RAW%d\x01" % (len(raws) - 1)
        if isinstance(x, dict):
            return {k: walk(y) for k, y in x.items()}
        if isinstance(x, list):
            return [walk(y) for y in x]
        return x

    s = json.dumps(walk(v), ensure_ascii=False)
    for i, t in enumerate(raws):
        s = s.replace('"\\u0001RAW%d\\u0001"' % i, t)
    return s.encode("utf-8", "surrogatepass")


class Case:
    def __init__(self, kind, desc, body, well_formed, over_cap=False, path_override=None):
        self.kind = kind              # short mutation name
        self.desc = desc              # what was done, for the report
        self.body = body              # bytes or None (no body)
        self.well_formed = well_formed  # body is a JSON object jansson accepts
        self.over_cap = over_cap
        self.path_override = path_override


def mutate(rng, seed, cap):
    """One mutated request body derived from `seed` (a dict)."""
    body = copy(seed)
    r = rng.random()
    if not body and r >= 0.72:  # an empty seed ({}): give it one field to mutate
        body = {rng.choice(["event", "reason", "x"]): copy(rng.choice(NASTY))}
        r = rng.random()
    ps = paths(body)
    if len(ps) == 1 and 0.40 <= r < 0.90:
        r = rng.choice([0.1, 0.55, 0.8, 0.92])  # mutations that need no inner value
    if r < 0.40:  # replace one value with a nasty one
        path, _ = rng.choice(ps)
        val = copy(rng.choice(NASTY))
        if not path:
            return Case("root", "root replaced by %.60r" % (val,), serialize(val),
                        isinstance(val, dict))
        get_parent(body, path)[path[-1]] = val
        return Case("value", "%s = %.60r" % (fmt(path), val), serialize(body), True)
    if r < 0.50:  # delete a key
        keyed = [p for p, _ in ps if p and isinstance(p[-1], str)]
        if keyed:
            path = rng.choice(keyed)
            del get_parent(body, path)[path[-1]]
            return Case("delete", "deleted %s" % fmt(path), serialize(body), True)
    if r < 0.58:  # unknown key in some object
        objs = [p for p, v in ps if isinstance(v, dict)]
        path = rng.choice(objs)
        node = get_parent(body, path + ("",)) if path else body
        key = rng.choice(["colour", "Event", "type ", "__proto__", "", "\u00e9"])
        node[key] = 1
        # an empty key cannot be named by a non-empty field: the message names it instead
        return Case("unknown", "unknown key %r in %s" % (key, fmt(path)), serialize(body),
                    key != "")
    if r < 0.64:  # wrap an object or value in an array (array where an object is expected)
        path, v = rng.choice([(p, v) for p, v in ps if p])
        get_parent(body, path)[path[-1]] = [v]
        return Case("wrap", "%s wrapped in []" % fmt(path), serialize(body), True)
    if r < 0.72:  # raw literal jansson refuses
        path, _ = rng.choice([(p, v) for p, v in ps if p] or [((), None)])
        lit = rng.choice(RAW_BAD)
        if path:
            get_parent(body, path)[path[-1]] = Raw(lit)
        return Case("raw", "%s = %s (raw)" % (fmt(path), lit), serialize(body), False)
    if r < 0.78:  # deep event nesting around the 64-level limit
        depth = rng.choice([63, 64, 65, 66, 100, 300, 3000])
        evs = [p for p, v in ps if p and p[-1] == "event" and isinstance(v, dict)]
        if evs:
            path = rng.choice(evs)
            get_parent(body, path)[path[-1]] = nest_event(depth)
            s = serialize(body)
            return Case("deep", "%s nested %d levels" % (fmt(path), depth), s,
                        json_depth(s) <= JANSSON_MAX_DEPTH, over_cap=len(s) > cap)
        depth = rng.choice([63, 64, 65, 500, 2047, 2049, 5000])
        path, _ = rng.choice([(p, v) for p, v in ps if p])
        get_parent(body, path)[path[-1]] = Raw("[" * depth + "]" * depth)
        s = serialize(body)
        return Case("deeparr", "%s = [[..]] x%d" % (fmt(path), depth), s,
                    json_depth(s) <= JANSSON_MAX_DEPTH, over_cap=len(s) > cap)
    if r < 0.84:  # byte-level damage to the serialized body
        s = bytearray(serialize(body))
        how = rng.choice(["truncate", "flip", "badutf8", "nul", "bom", "trail"])
        if how == "truncate":
            s = s[:rng.randrange(len(s))]
        elif how == "flip":
            i = rng.randrange(len(s))
            s[i] = rng.choice(b"{}[],:\"\\ 0e-")
        elif how == "badutf8":
            i = s.find(b'"')
            s[i + 1:i + 1] = rng.choice([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf8\x88\x80\x80"])
        elif how == "nul":
            s[rng.randrange(len(s)):0] = b"\x00"
        elif how == "bom":
            s = bytearray(b"\xef\xbb\xbf") + s
        else:
            s += rng.choice([b" {}", b"x", b",", b"]"])
        return Case("bytes", how, bytes(s), strict_object(bytes(s)))
    if r < 0.90:  # long strings / long arrays
        path, v = rng.choice([(p, v) for p, v in ps if p])
        n = rng.choice([1000, 65536, 200000])
        if isinstance(v, list) and v:
            get_parent(body, path)[path[-1]] = v * (n // 100 // len(v) + 1)
            what = "%s repeated to %d items" % (fmt(path), len(get_parent(body, path)[path[-1]]))
        else:
            get_parent(body, path)[path[-1]] = rng.choice("ab\u00e9\"\\") * n
            what = "%s = %d-char string" % (fmt(path), n)
        s = serialize(body)
        return Case("long", what, s, True, over_cap=len(s) > cap)
    if r < 0.95:  # whole-body specials
        special = rng.choice([None, b"", b" ", b"null", b"[]", b"[{}]", b'"s"', b"1", b"{}",
                              b"{", b"}", b"\xff\xfe", b"{\"a\":1}{}", b"[" * 3000 + b"]" * 3000])
        return Case("special", "body %.40r" % (special,), special,
                    special is not None and strict_object(special))
    # several mutations of several fields at once (numbers to extremes)
    for path, v in ps:
        if path and isinstance(v, (int, float)) and not isinstance(v, bool) and rng.random() < 0.5:
            get_parent(body, path)[path[-1]] = rng.choice([0, -1, 1e308, 5e-324, 2 ** 62, 1e-12])
    return Case("numbers", "numbers pushed to extremes", serialize(body), True)


def strict_object(b):
    try:
        v = json.loads(b.decode("utf-8"), parse_constant=reject_constant)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return False
    return isinstance(v, dict) and b"\\u0000" not in b and not b.startswith(b"\xef\xbb\xbf")


def reject_constant(name):
    raise ValueError("non-finite literal %s" % name)


def fmt(path):
    return "/" + "/".join(str(p) for p in path)


# ---- HTTP ---------------------------------------------------------------------------------------------


class Client:
    def __init__(self, url, timeout):
        u = urllib.parse.urlparse(url)
        assert u.hostname in ("127.0.0.1", "localhost", "::1"), "loopback only"
        self.host, self.port, self.timeout = u.hostname, u.port, timeout
        self.conn = None

    def request(self, method, path, body):
        """(status, headers dict, body bytes); raises OSError/HTTPException on transport failure."""
        for attempt in range(2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            try:
                hdrs = {"Content-Type": "application/json"} if body is not None else {}
                self.conn.request(method, path, body=body, headers=hdrs)
                r = self.conn.getresponse()
                data = r.read()
                h = {k.lower(): v for k, v in r.getheaders()}
                if h.get("connection", "").lower() == "close":
                    self.close()
                return r.status, h, data
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as e:
                # a keep-alive connection the server closed: retry once on a fresh one
                self.close()
                if attempt == 1:
                    raise e
        raise AssertionError("unreachable")

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def route_table(path):
    """[(method, pattern, max_body_bytes)] from service/api/routes.c. Upload routes (a raw text/csv
    body capped by --max-upload, ROUTE_BODY_UPLOAD) are left out: this fuzzer speaks JSON, and the
    CSV reader has its own tests (tests/unit/federated/test_fl_data.c, test_jobs.sh)."""
    src = open(path, encoding="utf-8").read()
    rows = []
    for m in re.finditer(r'\{"(GET|POST|PUT|PATCH|DELETE)",\s*"([^"]+)",\s*\w+,\s*([^,}]*)[,}]', src):
        if m.group(3).strip() == "ROUTE_BODY_UPLOAD":
            continue
        cap_expr = m.group(3).replace("MIB", "1048576").replace("KIB", "1024").replace(" ", "")
        if not re.fullmatch(r"[0-9*]+", cap_expr):
            raise SystemExit("cannot read the body cap of %s: %r" % (m.group(2), m.group(3)))
        cap = 1
        for f in cap_expr.split("*"):
            cap *= int(f)
        rows.append((m.group(1), m.group(2), cap))
    if not rows:
        raise SystemExit("no routes found in " + path)
    return rows


# ---- checks -------------------------------------------------------------------------------------------


class Report:
    def __init__(self):
        self.failures = []
        self.statuses = {}
        self.sent = 0

    def fail(self, route, case, status, why, data):
        body = case.body if case.body is None or len(case.body) < 300 else \
            case.body[:300] + b"...(%d bytes)" % len(case.body)
        self.failures.append("%s [%s: %.120s] -> %s: %s\n      request body: %r\n      response: %.400r"
                             % (route, case.kind, case.desc, status, why, body, data))


def check_response(rep, route, case, status, headers, data, cap):
    rep.statuses[status] = rep.statuses.get(status, 0) + 1
    if status >= 500:
        rep.fail(route, case, status, "5xx", data)
        return
    try:
        v = json.loads(data.decode("utf-8"), parse_constant=reject_constant)
    except (ValueError, UnicodeDecodeError) as e:
        rep.fail(route, case, status, "response is not strict JSON (%s)" % e, data)
        return
    if not isinstance(v, dict):
        rep.fail(route, case, status, "response is not a JSON object", data)
        return
    if "json" not in headers.get("content-type", ""):
        rep.fail(route, case, status, "Content-Type %r" % headers.get("content-type"), data)
    if case.over_cap and status != 413:
        rep.fail(route, case, status, "body of %d bytes over the %d-byte cap, want 413"
                 % (len(case.body), cap), data)
    if status < 400:
        return
    err = v.get("error")
    if not isinstance(err, dict):
        rep.fail(route, case, status, "4xx without an error object", data)
        return
    for k in ("code", "message"):
        if not isinstance(err.get(k), str) or not err.get(k):
            rep.fail(route, case, status, "error.%s missing or empty" % k, data)
    if status in (401, 403, 405):
        rep.fail(route, case, status, "unexpected %d with --auth off on a route with a body" % status, data)
    if status != 400 or case.over_cap:
        return
    if case.well_formed:
        f = err.get("field")
        if not isinstance(f, str) or not f:
            rep.fail(route, case, status, "400 for a well-formed JSON object without a field", data)
    elif case.body and not strict_object(case.body) and is_syntax_error(case.body):
        if not isinstance(err.get("line"), int) or not isinstance(err.get("column"), int):
            rep.fail(route, case, status, "malformed JSON 400 without line and column", data)


def is_syntax_error(b):
    """True when python's strict parser also refuses b as JSON text (so jansson's error is a syntax
    error, not a 'must be an object' one)."""
    try:
        json.loads(b.decode("utf-8"), parse_constant=reject_constant)
        return False
    except (ValueError, UnicodeDecodeError, RecursionError):
        return True


# ---- main ---------------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--routes", required=True)
    ap.add_argument("--seed", type=int, default=20261122)
    ap.add_argument("--per-route", type=int, default=300)
    ap.add_argument("--budget-s", type=float, default=20.0)
    ap.add_argument("--timeout-s", type=float, default=30.0)
    ap.add_argument("--max-body", type=int, default=1048576, help="the daemon's --max-body")
    a = ap.parse_args()

    rng = random.Random(a.seed)
    cli = Client(a.url, a.timeout_s)
    rep = Report()
    # every route that takes a body: POST and PATCH
    posts = [(m, p, min(c, a.max_body)) for m, p, c in route_table(a.routes)
             if m in ("POST", "PATCH")]
    missing = ["%s %s" % (m, p) for m, p, _ in posts if (m + " " + p) not in SEEDS]
    if missing:
        print("FAIL: routes without fuzz seeds (add them to SEEDS): %s" % ", ".join(missing))
        return 1

    # Fixtures for path parameters: silos and claims to act on.
    ids = {}

    def post(path, obj):
        st, _, d = cli.request("POST", path, json.dumps(obj).encode())
        if st != 201:
            raise SystemExit("fixture %s -> %d %r" % (path, st, d))
        return json.loads(d)["id"]

    ids["silo"] = [post("/v1/silos", {"name": "fz-a", "budget": {"epsilon": 1e9, "delta": 1e-5}}),
                   post("/v1/silos", {"name": "fz-b", "budget": {"rho": 1e6}})]
    claims = [post("/v1/silos/%d/claims" % ids["silo"][0],
                   {"event": {"type": "zcdp", "rho": 1e-4}, "timeout_ms": 600000})
              for _ in range(4)]

    def concrete(pattern):
        if "{id}" in pattern and rng.random() < 0.1:
            hostile = urllib.parse.quote(rng.choice(HOSTILE_IDS), safe="%")
            return pattern.replace("{id}", hostile), True
        if "/claims/{id}" in pattern:
            if rng.random() < 0.5:  # a fresh, active claim (the others are soon closed)
                try:
                    claims.append(post("/v1/silos/%d/claims" % ids["silo"][0],
                                       {"event": {"type": "zcdp", "rho": 1e-4}}))
                except SystemExit:
                    pass
            return pattern.replace("{id}", str(rng.choice(claims))), False
        return pattern.replace("{id}", str(rng.choice(ids["silo"]))), False

    def fill(obj):
        s = json.dumps(obj).replace('"$SILO2"', str(ids["silo"][1]))
        return json.loads(s.replace('"$SILO"', str(ids["silo"][0])))

    t_start = time.monotonic()
    skipped = {}
    slow = []
    for ri, (method, pattern, cap) in enumerate(posts):
        share = (a.budget_s - (time.monotonic() - t_start)) / (len(posts) - ri)
        t_route = time.monotonic()
        seeds = [fill(s) for s in SEEDS[method + " " + pattern]]
        for i in range(a.per_route):
            if time.monotonic() - t_route > share:
                skipped[pattern] = a.per_route - i
                break
            case = mutate(rng, rng.choice(seeds), cap)
            case.over_cap = case.body is not None and len(case.body) > cap
            path, hostile_path = concrete(pattern)
            t0 = time.monotonic()
            try:
                status, headers, data = cli.request(method, path, case.body)
            except socket.timeout:
                rep.fail(pattern, case, "timeout", "no answer in %g s" % a.timeout_s, b"")
                cli.close()
                continue
            except (OSError, http.client.HTTPException) as e:
                cli.close()
                if case.over_cap and isinstance(e, (BrokenPipeError, ConnectionResetError)):
                    continue  # the server answered 413 and closed while we were still sending
                rep.fail(pattern, case, "no answer", repr(e), b"")
                try:
                    cli.request("GET", "/healthz", None)
                except (OSError, http.client.HTTPException):
                    print("FAIL: the daemon stopped answering (crash?) after:")
                    print("  " + rep.failures[-1])
                    return 1
                continue
            dt = time.monotonic() - t0
            if dt > 2.0:
                slow.append("%.1f s %s [%s: %s]" % (dt, pattern, case.kind, case.desc))
            rep.sent += 1
            if hostile_path:
                if status not in (400, 404) and not (case.over_cap and status == 413):
                    rep.fail(pattern, case, status, "hostile id %s, want 400 or 404" % path, data)
                check_response(rep, pattern, Case(case.kind, case.desc, case.body, False,
                                                  case.over_cap), status, headers, data, cap)
            else:
                check_response(rep, pattern, case, status, headers, data, cap)

    st, _, _ = cli.request("GET", "/healthz", None)
    if st != 200:
        rep.failures.append("GET /healthz after the fuzz -> %d" % st)
    elapsed = time.monotonic() - t_start
    print("fuzz: seed %d, %d POST/PATCH routes, %d requests in %.1f s; statuses %s"
          % (a.seed, len(posts), rep.sent, elapsed,
             " ".join("%s:%d" % kv for kv in sorted(rep.statuses.items()))))
    if skipped:
        print("fuzz: time share used up, iterations not run: %s"
              % ", ".join("%s %d" % kv for kv in skipped.items()))
    for s in slow:
        print("fuzz: slow request: " + s)
    for f in rep.failures[:40]:
        print("FAIL: " + f)
    if len(rep.failures) > 40:
        print("... and %d more failures" % (len(rep.failures) - 40))
    return 1 if rep.failures else 0


if __name__ == "__main__":
    sys.exit(main())

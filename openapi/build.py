#!/usr/bin/env python3
"""build.py: writes openapi/openapi.json, the OpenAPI 3.1 description of dpsilod's HTTP API.

    python3 openapi/build.py            rewrites openapi/openapi.json
    python3 openapi/build.py --check    exit 1 when openapi/openapi.json is not what this script writes

This script is the source; openapi.json is its output, kept in the repository (the daemon compiles it
in and serves it at GET /v1/openapi.json, and clients read it without running anything). Edit the
tables below, run the script, commit both. tests/integration/test_openapi.sh checks that the two agree,
that every row of the route table (service/api/routes.c) is an operation here and every operation a
row, and that every curl example of README.md and docs/*.md is a documented operation whose body and
shown answer fit the schemas (docs/API.md "The OpenAPI document").

Conventions of the schemas:
- request bodies are closed (additionalProperties false), as the daemon refuses unknown fields;
- answers list their members with types; an answer object is closed where every member is listed,
  and left open (more members may come) where it depends on options (the accounting calculators'
  "how it was computed" members, the estimators' fits);
- a number that may be infinite is "number or null", with a "<name>_reason" string beside it;
- times are RFC 3339 strings in UTC, ids positive integers.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "openapi.json")


# ---- schema helpers -----------------------------------------------------------------------------------


def ref(name):
    return {"$ref": "#/components/schemas/" + name}


def t(name, **kw):
    d = {"type": name}
    d.update(kw)
    return d


def num(**kw):
    return t("number", **kw)


def integer(**kw):
    return t("integer", **kw)


def string(**kw):
    return t("string", **kw)


def boolean(**kw):
    return t("boolean", **kw)


def null_or(s):
    """s or JSON null."""
    if "type" in s and isinstance(s["type"], str) and "$ref" not in s:
        d = dict(s)
        d["type"] = [s["type"], "null"]
        return d
    return {"oneOf": [s, {"type": "null"}]}


def arr(items, **kw):
    return t("array", items=items, **kw)


def obj(props, required=(), closed=True, **kw):
    d = {"type": "object", "properties": props}
    if required:
        d["required"] = list(required)
    if closed:
        d["additionalProperties"] = False
    d.update(kw)
    return d


def named(name, schema):
    """Registers schema as components/schemas/name; returns its $ref."""
    assert name not in SCHEMAS, name
    SCHEMAS[name] = schema
    return ref(name)


def enum(*values, **kw):
    d = {"enum": list(values)}
    d.update(kw)
    return d


ID = integer(minimum=1)
TIME = string(format="date-time")
NUMN = null_or(num())
INTN = null_or(integer())
STRN = null_or(string())

# ---- shared objects -------------------------------------------------------------------------------------

SCHEMAS = {}

SCHEMAS["Error"] = obj(
    {
        "error": obj(
            {
                "code": enum(
                    "invalid_argument", "unauthenticated", "forbidden", "not_found",
                    "method_not_allowed", "budget_exhausted", "conflict", "payload_too_large",
                    "numerical_failure", "request_timeout", "uri_too_long",
                    "header_fields_too_large", "internal", "not_implemented", "busy",
                    "out_of_memory", "unavailable", "shutting_down",
                    "http_version_not_supported"),
                "message": string(description="one sentence for people; never parse it"),
                "field": null_or(string(description="the offending input: a body path "
                                        "(\"event.events[2].sampling_rate\"), a query or path "
                                        "parameter, or a header name")),
                "request_id": STRN,
                "line": integer(minimum=1, description="malformed JSON or CSV: where"),
                "column": integer(minimum=0),
                "details": obj({
                    "silo_id": ID, "silo": string(description="a job's: the data set's silo"),
                    "index": integer(minimum=0, description="a batch's: the refused charge"),
                    "unit": enum("epsilon", "rho"), "spent": NUMN, "reserved": NUMN,
                    "requested": NUMN, "would_be": NUMN, "budget": NUMN},
                    ["silo_id", "requested", "would_be", "budget"], closed=False,
                    description="409 budget_exhausted: the refused silo's figures in its "
                                "budget's unit (infinite ones null with <name>_reason)"),
            },
            ["code", "message", "field", "request_id"]),
    },
    ["error"],
    description="Every error answer (docs/API.md \"Conventions\").")

# Events (docs/ACCOUNTING.md "The event tree"; service/codec/event_json.c). noise_multiplier,
# sampling_rate and count may be null in /v1/accounting/calibrate (the unknowns).
_EV = {
    "GaussianEvent": ("gaussian", {"noise_multiplier": null_or(num(exclusiveMinimum=0))},
                      ["noise_multiplier"]),
    "LaplaceEvent": ("laplace", {"noise_multiplier": null_or(num(exclusiveMinimum=0))},
                     ["noise_multiplier"]),
    "ZcdpEvent": ("zcdp", {"rho": num(minimum=0)}, ["rho"]),
    "PureEvent": ("pure", {"epsilon": num(minimum=0)}, ["epsilon"]),
    "PoissonSampledEvent": ("poisson_sampled",
                            {"sampling_rate": null_or(num(minimum=0, maximum=1)),
                             "event": ref("Event")}, ["sampling_rate", "event"]),
    "SampledWithoutReplacementEvent": ("sampled_without_replacement",
                                       {"source_size": integer(minimum=1),
                                        "sample_size": integer(minimum=1),
                                        "event": ref("Event")},
                                       ["source_size", "sample_size", "event"]),
    "SelfComposedEvent": ("self_composed",
                          {"count": null_or(integer(minimum=1, maximum=10**12)),
                           "event": ref("Event")}, ["count", "event"]),
    "ComposedEvent": ("composed", {"events": arr(ref("Event"))}, ["events"]),
    "RepeatAndSelectEvent": ("repeat_and_select",
                             {"event": ref("Event"), "distribution": ref("RunsDistribution")},
                             ["event", "distribution"]),
}
for name, (tag, props, req) in _EV.items():
    p = {"type": {"const": tag}}
    p.update(props)
    SCHEMAS[name] = obj(p, ["type"] + req)
SCHEMAS["Event"] = {
    "description": "A privacy event: a mechanism, or a sampling, repetition or composition of "
                   "events (docs/ACCOUNTING.md \"The event tree\"); at most 64 levels and "
                   "100,000 nodes.",
    "oneOf": [ref(n) for n in _EV],
}

_dist_tnb = obj({"eta": num(exclusiveMinimum=-1), "gamma": num(exclusiveMinimum=0, maximum=1),
                 "mean": num(minimum=1)}, ["eta"])
_dist_alias = obj({"gamma": num(exclusiveMinimum=0, maximum=1), "mean": num(minimum=1)})
SCHEMAS["RunsDistribution"] = {
    "description": "The distribution of the number of runs K (docs/TUNING.md): exactly one "
                   "member. In /v1/tuning/plan the mean may be left out.",
    "oneOf": [
        obj({"fixed": integer(minimum=1)}, ["fixed"]),
        obj({"poisson": obj({"mean": num(minimum=1)})}, ["poisson"]),
        obj({"truncated_negative_binomial": _dist_tnb}, ["truncated_negative_binomial"]),
        obj({"geometric": _dist_alias}, ["geometric"]),
        obj({"logarithmic": _dist_alias}, ["logarithmic"]),
    ],
}

NEIGHBORING = enum("add_remove", "replace_one")
ACCOUNTANT = enum("rdp", "zcdp", "pld")
ACC_OPTIONS = {
    "accountant": ACCOUNTANT,
    "neighboring": NEIGHBORING,
    "orders": arr(num(exclusiveMinimum=1, maximum=1e5), minItems=1, maxItems=4096),
    "order_search": enum("grid", "continuous"),
    "conversion": enum("optimal", "balle2020", "mironov2017", "cks2020", "bun_steinke2016"),
    "value_discretization": num(exclusiveMinimum=0),
    "tail_mass_truncation": num(exclusiveMinimum=0),
}


def acc_request(extra, required):
    p = {"event": ref("Event")}
    p.update(extra)
    p.update(ACC_OPTIONS)
    return obj(p, ["event"] + required)


_HOW = {
    "accountant": ACCOUNTANT, "neighboring": NEIGHBORING, "conversion": string(),
    "order_search": enum("grid", "continuous"), "optimal_order": NUMN, "orders": arr(num()),
    "basic_composition": boolean(description="rdp: the sum of pure epsilons was the tighter "
                                 "bound"),
    "rho": NUMN, "reason": string(description="why a figure is null (infinite)"),
    "epsilon_lower": NUMN, "delta_lower": NUMN,
    "grid_points": integer(description="pld: the composed grid's points"),
    "direction": string(), "infinity_mass": NUMN, "truncated_mass": NUMN,
    "value_discretization": num(), "tail_mass_truncation": num(),
}
SCHEMAS["EpsilonAnswer"] = obj(dict(epsilon=NUMN, delta=num(), **_HOW), ["epsilon", "delta",
                               "accountant"], closed=False,
                               description="How it was computed is in the other members: "
                               "accountant, neighboring, and per accountant its own figures.")
SCHEMAS["DeltaAnswer"] = obj(dict(delta=num(minimum=0, maximum=1), epsilon=num(), **_HOW),
                             ["delta", "epsilon", "accountant"], closed=False)
SCHEMAS["RdpAnswer"] = obj(dict(rdp=arr(NUMN), epsilon=NUMN, delta=num(), **_HOW),
                           ["rdp", "orders"], closed=False)
SCHEMAS["CalibrateAnswer"] = obj(dict(noise_multiplier=num(), sampling_rate=num(),
                                      count=integer(), epsilon=num(), target_epsilon=num(),
                                      delta=num(), evaluations=integer(), **_HOW),
                                 ["epsilon", "evaluations"], closed=False)

# Budgets (docs/BUDGETS.md)
SCHEMAS["Budget"] = obj({
    "epsilon": NUMN, "delta": num(exclusiveMinimum=0, exclusiveMaximum=1), "rho": NUMN,
    "accountant": enum("rdp", "zcdp", "pld"), "conversion": string(),
    "private": boolean(description="false: the silo opted out of differential privacy (then "
                       "the only member); spends are recorded, never refused"),
}, description="epsilon (with delta) or rho, the accountant and its conversion; or "
               "{\"private\": false}")
SCHEMAS["Silo"] = obj({
    "id": ID, "name": string(), "created_at": TIME, "archived": boolean(),
    "archived_at": null_or(TIME), "budget": ref("Budget"),
    "spent": obj({"epsilon": NUMN, "epsilon_reason": string(), "delta": num(), "rho": NUMN,
                  "rho_reason": string(), "optimal_order": NUMN}, closed=False),
    "reserved": obj({"epsilon": NUMN, "rho": NUMN, "active_claims": integer(minimum=0)},
                    closed=False),
    "remaining": null_or(obj({"epsilon": NUMN, "epsilon_reason": string(), "rho": NUMN,
                              "rho_reason": string()})),
    "remaining_reason": string(description="why remaining is null (a silo without a privacy "
                               "budget)"),
    "n_charges": integer(minimum=0),
    "accounting": obj({"accountant": enum("rdp", "zcdp", "pld", "none",
                                          description="none: the silo opted out of "
                                                      "differential privacy"),
                       "conversion": string(),
                       "orders": integer(description="RDP orders on the grid"),
                       "method": string(), "neighboring": string()},
                      ["accountant", "method"], closed=False,
                      description="how the totals are computed"),
    "verification": obj({"consistent": boolean()}, ["consistent"], closed=False,
                        description="with ?verify=true: the totals recomputed from the log"),
    "token": string(description="POST /v1/silos only: the silo's first token, shown once"),
    "token_note": string(),
}, ["id", "name", "created_at", "archived", "budget", "spent", "n_charges"],
    description="A silo and its budget, spent, reserved and remaining privacy loss.")
SCHEMAS["SiloList"] = obj({"silos": arr(ref("Silo")), "next_after": INTN},
                          ["silos", "next_after"])
SCHEMAS["Cost"] = obj({"epsilon": NUMN, "epsilon_reason": string(), "rho": NUMN,
                       "rho_reason": string()}, closed=False)
SCHEMAS["Charge"] = obj({
    "id": null_or(ID), "silo_id": ID, "seq": INTN, "created_at": TIME,
    "idempotency_key": STRN, "job_id": INTN, "dry_run": boolean(), "replayed": boolean(),
    "cost": ref("Cost"),
    "totals_after": obj({"spent_epsilon": NUMN, "spent_epsilon_reason": string(),
                         "spent_rho": NUMN, "spent_rho_reason": string(),
                         "remaining_epsilon": NUMN, "remaining_rho": NUMN}, closed=False),
}, ["silo_id", "cost"], description="The answer to a charge (POST /v1/silos/{id}/charges).")
SCHEMAS["ChargeRecord"] = obj({
    "id": ID, "seq": integer(), "time": TIME, "actor_token_id": INTN, "job_id": INTN,
    "claim_id": INTN, "idempotency_key": STRN, "reason": STRN, "event": ref("Event"),
    "neighboring": NEIGHBORING, "cost": ref("Cost"), "cumulative_after": ref("Cost"),
}, ["id", "seq", "time", "event", "cost"], description="One row of a silo's charge log.")
SCHEMAS["ChargeList"] = obj({"charges": arr(ref("ChargeRecord")), "next_after": INTN},
                            ["charges", "next_after"])
SCHEMAS["ChargeRequest"] = obj({
    "event": ref("Event"), "neighboring": NEIGHBORING, "idempotency_key": string(minLength=1),
    "dry_run": boolean(), "reason": string(), "job_id": integer(minimum=1)}, ["event"])
SCHEMAS["Claim"] = obj({
    "id": ID, "silo_id": ID, "state": enum("active", "committed", "aborted", "expired"),
    "created_at": TIME, "expires_at": TIME, "closed_at": null_or(TIME), "charge_id": INTN,
    "job_id": INTN, "replayed": boolean(), "cost": ref("Cost"), "charge": ref("Charge"),
}, ["id", "silo_id", "state"], description="A reservation of budget (docs/BUDGETS.md).")
SCHEMAS["ClaimList"] = obj({"claims": arr(ref("Claim")), "next_after": INTN},
                           ["claims", "next_after"])

# Estimators (docs/ESTIMATORS.md)
_client_id = {"oneOf": [string(), integer()]}
_vec = {"oneOf": [num(), arr(num(), minItems=1)],
        "description": "a number, or one per coordinate (multivariate)"}
_vecn = {"oneOf": [NUMN, arr(NUMN)], "description": "a number, or one per coordinate"}
_status = enum("converged", "max_iter", "boundary", "unidentifiable", "degenerate",
               "no_pooling_gain")
_estimate = obj({"id": null_or(_client_id), "posterior_mean": _vecn, "posterior_sd": _vecn,
                 "shrinkage": _vecn, "responsibilities": arr(NUMN)},
                ["posterior_mean", "posterior_sd", "shrinkage"])
_run_common = {
    "run_id": ID, "replayed": boolean(description="an Idempotency-Key replay: the first answer"),
    "estimates": arr(_estimate), "log_likelihood": NUMN, "iterations": integer(minimum=0),
    "results": enum("full", "summary", description="full: every client's estimate (estimates) "
                    "answered; summary: the fit alone, no estimates"),
    "keep_results": boolean(description="the per-client results are stored with the run (GET "
                            "/v1/runs/{id}/clients pages them); false: the fit alone is stored"),
    "estimates_digest": string(description="16 hex digits: a digest of the per-client results "
                               "(fields and every value's bits), present when they were computed; "
                               "an Idempotency-Key retry that computes them again must match it"),
    "status": _status, "converged": boolean(description="status is not max_iter"),
    "status_reason": null_or(string(description="the status in words: why the fit is not simply "
                                                "converged, and what its answers then are")),
    "privacy": null_or(obj({"mechanism": string(), "model": string(),
                            "charges": arr(obj({"silo_id": ID, "charge_id": INTN,
                                                "clients": integer(), "event": ref("Event"),
                                                "cost_eps": NUMN, "cost_rho": NUMN,
                                                "spent_eps_after": NUMN,
                                                "remaining_after": NUMN, "replayed": boolean()},
                                               ["silo_id"], closed=False)),
                            "charging": string(),
                            "privacy_unit": enum("client", description="central DP: whose "
                                                 "data one guarantee covers"),
                            "epsilon": NUMN, "delta": NUMN, "rho": NUMN,
                            "noise_multiplier": NUMN,
                            "sensitivities": obj({"sum": NUMN, "sum_of_squares": NUMN,
                                                "l2_scaled": NUMN}, closed=False),
                            "noise_std": obj({"sum": NUMN, "sum_of_squares": NUMN},
                                             closed=False),
                            "posterior_scope": string(description="central DP: each client's "
                                                      "posterior is for that client alone"),
                            "weight_noise": NUMN},
                           ["charges"], closed=False,
                           description="the local-DP mechanism, its parameters and what was "
                                       "charged to which silo")),
}
_nm_families = enum("normal", "point_normal", "point_laplace", "normal_scale_mixture", "npmle")
_run_req = ["model", "method", "prior", "log_likelihood", "iterations", "status",
            "converged", "privacy"]
_gfit = obj({"mean": _vecn, "variance": _vecn, "log_likelihood": NUMN,
             "iterations": integer(), "status": _status})
_bfit = obj({"alpha": NUMN, "beta": NUMN, "log_likelihood": NUMN, "iterations": integer(),
             "status": _status})
SCHEMAS["EstimatorRun"] = {
    "description": "The answer of an estimator, stored as a run (run_id; GET /v1/runs/{id} "
                   "gives it again as outputs, without run_id): one form per model.",
    "oneOf": [
        obj(dict(_run_common, **{
            "model": {"const": "gaussian"}, "method": enum("mle", "moments", "known_prior"),
            "prior": obj({"mean": _vecn, "variance": _vecn, "source": string()},
                         ["mean", "variance", "source"]),
            "fits": null_or(obj({"mle": _gfit, "moments": _gfit}, ["mle", "moments"])),
            "noise_variance": NUMN,
            "noise_variance_source": enum("pooled", "given", "standard_errors")}),
            _run_req + ["fits", "noise_variance", "noise_variance_source"]),
        obj(dict(_run_common, **{
            "model": {"const": "beta"}, "method": string(), "variant": string(),
            "leave_one_out": boolean(),
            "prior": obj({"alpha": NUMN, "beta": NUMN, "mean": NUMN, "concentration": NUMN,
                          "source": string(), "reason": string()},
                         ["alpha", "beta", "mean", "concentration", "source"]),
            "fits": null_or(obj({"mle": _bfit, "moments": _bfit}, ["mle", "moments"])),
            "clamped": obj({"pooled": integer(), "local": integer(), "mean": integer()},
                           ["pooled", "local", "mean"])}),
            _run_req + ["variant", "leave_one_out", "fits", "clamped"]),
        obj(dict(_run_common, **{
            "model": {"const": "mixture"}, "method": enum("em", "altmin", "known_prior"),
            "prior": obj({"components": arr(obj({"weight": NUMN, "mean": _vecn,
                                                 "variance": _vecn},
                                                ["weight", "mean", "variance"])),
                          "source": enum("given", "fitted")}, ["components", "source"]),
            "noise_variance": NUMN,
            "noise_variance_source": enum("pooled", "given", "standard_errors")}),
            _run_req + ["noise_variance", "noise_variance_source"]),
        obj(dict(_run_common, **{
            "model": {"const": "normal_means"}, "prior_family": _nm_families,
            "prior": obj({"family": _nm_families, "mode": NUMN, "scale": NUMN, "pi0": NUMN,
                          "components": arr(obj({"weight": NUMN, "mean": NUMN, "sd": NUMN},
                                                ["weight", "mean", "sd"]))},
                         ["family", "mode", "scale", "pi0", "components"],
                         description="the fitted prior g as a mixture of normals (sd 0: a "
                                     "point mass); scale and pi0 for normal and point_normal"),
            "estimates": arr(obj({"posterior_mean": NUMN, "posterior_sd": NUMN,
                                  "posterior_second_moment": NUMN, "lfsr": NUMN,
                                  "draws": arr(NUMN)},
                                 ["posterior_mean", "posterior_sd", "posterior_second_moment",
                                  "lfsr"])),
            "n_observations": integer(minimum=1),
            "evaluations": integer(minimum=0, description="profile points: weights solved")}),
            ["model", "prior_family", "prior", "log_likelihood", "iterations",
             "status", "converged", "privacy", "n_observations", "evaluations"]),
    ]}
SCHEMAS["RunSummary"] = obj({"id": ID, "kind": enum("gaussian", "beta", "mixture", "normal-means"),
                             "created_at": TIME, "status": string(), "private": boolean(),
                             "n_clients": integer(minimum=0)},
                            ["id", "kind", "created_at", "status"])
SCHEMAS["Run"] = obj({"id": ID, "kind": enum("gaussian", "beta", "mixture", "normal-means"),
                      "created_at": TIME, "status": string(), "private": boolean(),
                      "n_clients": integer(minimum=0), "data_kept": boolean(),
                      "inputs": t("object", description="the request without its clients, "
                                  "plus n_clients and dimension; the clients too (as clients) "
                                  "when keep_data was true"),
                      "outputs": ref("EstimatorRun")},
                     ["id", "kind", "created_at", "status", "private", "n_clients", "data_kept",
                      "inputs", "outputs"])
SCHEMAS["RunClients"] = obj({
    "run_id": ID, "total": integer(minimum=1, description="the run's rows"),
    "clients": arr(obj(dict({"position": integer(minimum=1, description="1-based place in the "
                                                 "request's clients (or x)")},
                            **{k: v for k, v in _estimate["properties"].items()},
                            **{"posterior_second_moment": NUMN, "lfsr": NUMN, "draws": arr(NUMN)}),
                       ["position", "posterior_mean", "posterior_sd"])),
    "next_after": INTN}, ["run_id", "total", "clients", "next_after"])
SCHEMAS["RunList"] = obj({"runs": arr(ref("RunSummary")), "next_after": INTN},
                         ["runs", "next_after"])
_gclient = obj({"id": _client_id, "mean": _vec,
                "n": num(minimum=1, description="observations behind the mean: a count or an "
                                                "effective sample size (need not be an integer)"),
                "se": num(exclusiveMinimum=0, description="the mean's standard error, instead of "
                                                          "n and noise_variance (every client or "
                                                          "none)"),
                "within_variance": _vec,
                "samples": arr({"oneOf": [num(), arr(num(), minItems=1)]}, minItems=1,
                               description="raw samples: numbers, or arrays of coordinates"),
                "silo_id": ID}, description="a summary (mean with n and within_variance, or mean with "
                            "se) or samples")
_bclient = obj({"id": _client_id, "successes": num(minimum=0), "trials": num(minimum=0),
                "samples": arr({"oneOf": [enum(0, 1), boolean()]}, minItems=1),
                "silo_id": ID}, description="successes and trials, or 0/1 samples")
_results = enum("full", "summary", description="full (default): every client's estimate "
                "answered; summary: the fit alone, no per-client row answered")
_keep_results = boolean(description="default false: store the per-client results with the run, "
                        "for GET /v1/runs/{id} and its pages GET /v1/runs/{id}/clients (with "
                        "results summary: a small answer, the rows read a page at a time); "
                        "otherwise the fit alone is stored")
_common_est = {"method": string(), "privacy": null_or(t("object")), "seed": integer(minimum=0),
               "max_iter": integer(minimum=1), "keep_data": boolean(), "results": _results,
               "keep_results": _keep_results}
_gprivacy = null_or(obj({
    "model": enum("local", "central", description="local (default): each client's mean through "
                  "its own randomizer; central: the service adds noise once to clipped sums"),
    "mechanism": enum("gaussian", "quantize"), "epsilon0": num(exclusiveMinimum=0),
    "delta": num(exclusiveMinimum=0, exclusiveMaximum=1), "r": num(minimum=0),
    "sigma_theta_bound": num(minimum=0), "b": num(exclusiveMinimum=0),
    "range": enum("paper", "safe"), "calibration": string(), "per_coordinate": boolean(),
    "bits": integer(minimum=1, maximum=52),
    "epsilon": num(exclusiveMinimum=0, description="central only: the noise is calibrated to it"),
    "noise_multiplier": num(exclusiveMinimum=0, description="central only, instead of epsilon")},
    ["r"]))
SCHEMAS["GaussianRequest"] = obj(dict(
    clients=arr(_gclient, minItems=1), noise_variance={"oneOf": [num(minimum=0), arr(num())]},
    prior=obj({"mean": null_or(_vec), "variance": _vec}, ["variance"]),
    **dict(_common_est, privacy=_gprivacy)),
    ["clients"])
_bprivacy = null_or(obj({
    "model": enum("local", "central", description="local (default): each client's randomized "
                  "response bits; central: the service adds Gaussian noise once to the sums of "
                  "the clients' rates and unbiased squares"),
    "epsilon0": num(exclusiveMinimum=0, description="local only: pure LDP per client"),
    "scheme": enum("two_bit", "paper_1bit", description="local only"),
    "epsilon": num(exclusiveMinimum=0, description="central only: the noise is calibrated to it"),
    "noise_multiplier": num(exclusiveMinimum=0, description="central only, instead of epsilon"),
    "delta": num(exclusiveMinimum=0, exclusiveMaximum=1, description="central only")}))
SCHEMAS["BetaRequest"] = obj(dict(
    clients=arr(_bclient, minItems=1),
    prior=obj({"alpha": num(exclusiveMinimum=0), "beta": num(exclusiveMinimum=0)}),
    variant=string(), leave_one_out=boolean(), **dict(_common_est, privacy=_bprivacy)),
    ["clients"])
SCHEMAS["MixtureRequest"] = obj(dict(
    clients=arr(_gclient, minItems=1), noise_variance={"oneOf": [num(minimum=0), arr(num())]},
    components=integer(minimum=1),
    prior=obj({"components": arr(obj({"weight": num(), "mean": num(), "variance": num()}))}),
    tol=num(exclusiveMinimum=0), n_init=integer(minimum=1), variance_floor=num(minimum=0),
    **_common_est), ["clients"])
_fixed_or_estimate = {"oneOf": [num(), {"const": "estimate"}]}
SCHEMAS["NormalMeansRequest"] = obj(dict(
    x=arr(num(), minItems=1, description="observations"),
    s={"oneOf": [num(exclusiveMinimum=0), arr(num(exclusiveMinimum=0), minItems=1)],
       "description": "standard errors: one per observation, or one for all"},
    prior_family=_nm_families, mode=_fixed_or_estimate, scale=_fixed_or_estimate,
    grid=arr(num(), minItems=1, description="normal_scale_mixture: sds (>= 0, increasing); "
                                            "npmle: atoms (increasing)"),
    grid_size=integer(minimum=1, maximum=1000), grid_mult=num(exclusiveMinimum=1),
    draws=integer(minimum=0, maximum=1000), seed=integer(minimum=0),
    max_iter=integer(minimum=1), tol=num(exclusiveMinimum=0), results=_results, keep_results=_keep_results),
    ["x", "s", "prior_family"])

# Tuning (docs/TUNING.md)
SCHEMAS["ResolvedDistribution"] = {
    "description": "A distribution of the number of runs with its parameters resolved (eta, "
                   "gamma and the mean of a truncated negative binomial; geometric and "
                   "logarithmic come back as eta 1 and 0).",
    "oneOf": [
        obj({"fixed": integer(minimum=1)}, ["fixed"]),
        obj({"poisson": obj({"mean": NUMN}, ["mean"])}, ["poisson"]),
        obj({"truncated_negative_binomial": obj({"eta": NUMN, "gamma": NUMN, "mean": NUMN},
                                                ["eta", "gamma", "mean"])},
            ["truncated_negative_binomial"]),
    ]}
SCHEMAS["TuningAccounting"] = obj({
    "accountant": {"const": "rdp"}, "bound": string(), "auxiliary_orders": string(),
    "conversion": string(), "optimal_order": NUMN, "neighboring": NEIGHBORING},
    ["accountant", "bound", "conversion", "optimal_order", "neighboring"])
SCHEMAS["TuningDraw"] = obj({
    "id": ID, "created_at": TIME, "runs": integer(minimum=0),
    "candidates": null_or(arr(integer(minimum=0))), "candidates_reason": string(),
    "grid_size": INTN, "distribution": ref("ResolvedDistribution"), "expected_runs": NUMN,
    "prob_no_run": NUMN, "label": STRN},
    ["id", "created_at", "runs", "candidates", "distribution", "expected_runs", "prob_no_run",
     "grid_size", "label"])

# Training (docs/TRAINING.md)
_generator = obj({
    "generator": enum("synthetic-linreg", "synthetic-classification", "synthetic-lowrank"),
    "silos": integer(minimum=1), "dim": integer(minimum=1), "n_min": integer(minimum=1),
    "n_max": integer(minimum=1), "tau": num(minimum=0), "noise": num(minimum=0),
    "classes": integer(minimum=2), "seed": integer(minimum=0),
    "rank": integer(minimum=1, description="synthetic-lowrank only")}, ["generator"])
SCHEMAS["JobSpec"] = obj({
    "algorithm": enum("local", "fedavg", "finetune", "mrmtl", "ditto", "dp_fedavg", "ppsgd",
                      "fedhdp", "altmin", "adaped", "dp_adaped", "ifca", "adamix",
                      "gaussian_prior"),
    "dataset": {"oneOf": [integer(minimum=1, description="an uploaded data set"),
                          {"const": "fashion-mnist"}, _generator]},
    "partition": obj({"kind": enum("natural", "iid", "dirichlet", "classes"),
                      "silos": integer(minimum=1), "alpha": num(exclusiveMinimum=0),
                      "classes_per_silo": integer(minimum=1), "seed": integer(minimum=0),
                      "rows_per_silo": integer(
                          minimum=1, maximum=10000000,
                          description="each silo keeps at most this many of its rows "
                                      "(a random subset); absent: every row")}),
    "model": obj({"type": enum("linear", "logistic", "svm", "softmax", "mlp"),
                  "hidden": null_or(arr(integer(minimum=1), minItems=1))}, ["type"]),
    "rounds": integer(minimum=1), "local_epochs": integer(minimum=1),
    "batch_size": integer(minimum=1), "lr": num(exclusiveMinimum=0, maximum=1e3),
    "lambda": num(minimum=0, maximum=1e6), "finetune_fraction": num(minimum=0, maximum=1),
    "seed": integer(minimum=0), "test_fraction": num(minimum=0, maximum=0.9),
    "privacy": null_or(obj({"target_epsilon": num(exclusiveMinimum=0),
                            "noise_multiplier": num(minimum=0), "delta": num(minimum=0,
                                                                             maximum=0.5),
                            "clip": num(exclusiveMinimum=0),
                            "client_rate": num(exclusiveMinimum=0, maximum=1)},
                           ["delta", "clip"])),
    "silos": null_or(t("object", additionalProperties=integer(minimum=1),
                       description="the data set's silo names -> ledger silo ids")),
    "on_budget_exhausted": enum("refuse", "stop_silo", "stop_job"),
    "standardize": enum("silo", "none"), "weighted": boolean(), "resume": boolean(),
    "name": string(minLength=1),
    "ratio": {"oneOf": [num(minimum=0, maximum=1e12), {"const": "inf"}]},
    "ppsgd_mode": integer(minimum=1, maximum=3,
                          description="ppsgd only: Bietti et al. (ICML 2022) Alg. 1, 2 or 3 "
                                      "(default 3); 1 needs client_rate 1 and batch_size 1"),
    "fedhdp": obj({
        "groups": arr(obj({
            "name": string(minLength=1, maxLength=128),
            "silos": null_or(arr(string(minLength=1), minItems=1,
                                 description="data-set silo names; one group may leave it out "
                                             "and take the rest")),
            "private": boolean(), "target_epsilon": num(exclusiveMinimum=0, maximum=1000),
            "noise_multiplier": num(exclusiveMinimum=0, maximum=1e6),
            "r": num(minimum=0, maximum=1e6), "lambda": num(minimum=0, maximum=1e6)}),
            minItems=1, maxItems=16),
        "adaptive_clip": obj({"quantile": num(exclusiveMinimum=0, exclusiveMaximum=1),
                              "lr": num(exclusiveMinimum=0, maximum=100),
                              "count_noise": num(exclusiveMinimum=0, maximum=1e6)},
                             ["count_noise"])},
        ["groups"], description="FedHDP's privacy groups (docs/TRAINING.md \"FedHDP\")"),
    "altmin": obj({"rank": integer(minimum=1, maximum=64), "init": enum("random", "spectral")},
                  description="APriv-AltMin's rank and initialisation (docs/TRAINING.md)"),
    "adaped": obj({"tau": integer(minimum=1), "psi_init": num(exclusiveMinimum=0),
                   "psi_floor": num(exclusiveMinimum=0), "lr_mu": num(exclusiveMinimum=0),
                   "lr_psi": num(minimum=0), "kd_psi": num(exclusiveMinimum=0),
                   "clip_psi": num(exclusiveMinimum=0, description="dp_adaped only"),
                   "client_rate": num(exclusiveMinimum=0, maximum=1,
                                      description="adaped only (dp_adaped: privacy.client_rate)"),
                   "unsampled_rounds": integer(
                       minimum=0, maximum=100000,
                       description="Alg. 7: consecutive unsampled rounds a silo keeps training "
                                   "(0: it idles, Alg. 2)")},
                  description="AdaPeD's parameters (docs/TRAINING.md \"AdaPeD and DP-AdaPeD\")"),
    "ifca": obj({"clusters": integer(minimum=1, maximum=16),
                 "select_rounds": integer(minimum=1, description="<= warm_rounds (its default)"),
                 "warm_rounds": integer(minimum=1, description="<= rounds (its default: IFCA "
                                                               "throughout)"),
                 "selection_epsilon": num(exclusiveMinimum=0, maximum=1000,
                                          description="per selection; private jobs only "
                                                      "(default 0.03 target_epsilon)"),
                 "loss_bound": num(exclusiveMinimum=0, maximum=1e6)},
                description="IFCA's clusters, private selection and MR-MTL warm start "
                            "(docs/TRAINING.md \"IFCA\")"),
    "adamix": obj({"components": integer(minimum=1, maximum=16),
                   "steps": integer(minimum=1, maximum=10000), "em_iters": integer(minimum=1,
                                                                                  maximum=1000),
                   "noise_var": num(exclusiveMinimum=0, maximum=1e6),
                   "var_floor": num(exclusiveMinimum=0, maximum=1e6)},
                  description="AdaMix's parameters, Ozkara et al. Alg. 1 (docs/TRAINING.md "
                              "\"adamix and gaussian_prior\"); adamix only"),
    "gaussian_prior": obj({"variant": enum("gd", "em"),
                           "steps": integer(minimum=1, maximum=10000),
                           "sigma_theta2": num(exclusiveMinimum=0, maximum=1e12),
                           "sigma_x2": num(exclusiveMinimum=0, maximum=1e12),
                           "lr_mu": num(minimum=0, maximum=2), "lr_var": num(minimum=0, maximum=1),
                           "var_floor": num(exclusiveMinimum=0, maximum=1e6)},
                          description="The Gaussian-prior learner's parameters, Ozkara et al. "
                                      "Alg. 4 (linear) and Alg. 5 (logistic; variant gd only); "
                                      "gaussian_prior only"),
}, ["algorithm", "dataset", "rounds"],
    description="A training job (docs/TRAINING.md \"The job spec\"). model, batch_size and lr "
                "are required for every algorithm but altmin, which refuses batch_size, lr and "
                "local_epochs and takes only the linear model (its default).")
_plan_silo = obj({
    "name": string(), "silo_id": INTN, "n_train": integer(), "n_test": integer(),
    "batch": integer(), "q": NUMN, "steps_per_round": integer(), "steps": integer(),
    "noise_multiplier": NUMN, "sigma": NUMN, "delta": NUMN, "epsilon": NUMN,
    "round_event": null_or(ref("Event")),
    "select_rounds": integer(description="ifca: the rounds t < this charge select_event"),
    "select_epsilon": num(description="ifca: epsilon of one cluster selection"),
    "select_event": ref("Event")}, ["name"], closed=False)
SCHEMAS["ModelShape"] = obj({"type": string(), "d_in": integer(), "n_classes": integer(),
                             "hidden": arr(integer()), "n_params": integer()}, ["type"],
                            closed=False)
SCHEMAS["Job"] = obj({
    "id": ID, "name": STRN,
    "algorithm": string(), "status": enum("queued", "running", "succeeded", "failed",
                                          "cancelled", "interrupted"),
    "reason": STRN, "cancel_requested": boolean(), "rounds": integer(),
    "rounds_done": integer(minimum=0), "progress": num(minimum=0, maximum=1),
    "created_at": TIME, "started_at": null_or(TIME), "finished_at": null_or(TIME),
    "updated_at": TIME, "spec": ref("JobSpec"),
    "plan": obj({"silos": arr(_plan_silo), "model": ref("ModelShape"),
                 "privacy_unit": string(), "rounds": integer(), "server_noise": NUMN},
                closed=False),
}, ["id", "algorithm", "status", "rounds", "rounds_done", "created_at", "spec"])
SCHEMAS["JobList"] = obj({"jobs": arr(ref("Job")), "next_after": INTN}, ["jobs", "next_after"])
SCHEMAS["JobPlan"] = obj({
    "plan": SCHEMAS["Job"]["properties"]["plan"],
    "on_budget_exhausted": enum("refuse", "stop_silo", "stop_job"), "rounds": integer(minimum=1),
    "admitted": boolean(),
    "budget_checks": arr(obj({"silo": string(), "silo_id": ID, "planned_epsilon": NUMN,
                              "unit": enum("epsilon", "rho"), "requested": NUMN, "would_be": NUMN,
                              "budget": NUMN, "affordable": boolean()},
                             ["silo", "silo_id", "planned_epsilon", "unit", "requested",
                              "would_be", "budget", "affordable"])),
    "refusal": null_or(ref("Error")),
}, ["plan", "on_budget_exhausted", "rounds", "admitted", "budget_checks", "refusal"],
    description="A dry run of a job spec (POST /v1/jobs/plan): the plan POST /v1/jobs would store, "
                "each bound silo's whole planned spend checked against its budget, and the 409 "
                "POST /v1/jobs would answer under on_budget_exhausted refuse (else null).")
_figs = t("object", additionalProperties=NUMN)
SCHEMAS["RoundMetrics"] = obj({
    "round": integer(minimum=1), "wall_ms": num(), "metric": string(),
    "silos_trained": integer(),
    "global": null_or(_figs),  # null: no evaluated global model (local, altmin)
    "personalized": _figs,
    "silos": arr(obj({"silo": string(), "silo_id": INTN, "stopped": boolean(),
                      "trained": boolean(), "rounds_trained": integer(),
                      "rounds_charged": integer(), "n_train": integer(), "n_test": integer(),
                      "epsilon": NUMN, "job_epsilon": NUMN, "global": null_or(_figs),
                      "cluster": integer(minimum=0, description="ifca: the silo's cluster")},
                     ["silo"], closed=False)),
}, ["round", "silos"], closed=False, description="One round of a job's metrics.")
SCHEMAS["JobMetrics"] = obj({"job_id": ID, "status": string(), "rounds_total": integer(),
                             "rounds_done": integer(), "rounds": arr(ref("RoundMetrics")),
                             "next_after": INTN}, ["job_id", "rounds", "next_after"])
SCHEMAS["JobModel"] = obj({"job_id": ID, "round": integer(), "silo": STRN,
                           "model": ref("ModelShape"), "layout": string(),
                           "params": arr(num())}, ["job_id", "model", "params"])
SCHEMAS["Dataset"] = obj({
    "id": ID, "kind": {"const": "upload"}, "name": string(), "created_at": TIME,
    "rows": integer(minimum=0), "columns": integer(minimum=0), "label": string(),
    "silo": STRN, "features": arr(string(), description="the feature columns' names"),
    "classes": integer(minimum=0, description="0: a regression label"),
    "silos": arr(obj({"name": string(), "rows": integer(minimum=0)}, ["name", "rows"])),
    "bytes": integer(minimum=0), "sha256": string()},
    ["id", "kind", "name", "created_at", "rows", "columns", "label", "silo", "features",
     "classes", "silos", "bytes", "sha256"],
    description="An uploaded data set (a CSV).")
SCHEMAS["BuiltinDataset"] = obj({
    "id": string(), "kind": enum("dataset", "generator"), "task": string(),
    "description": string(), "available": boolean(),
    "rows": integer(), "features": integer(), "classes": integer(),
    "parameters": arr(obj({"name": string(), "type": enum("integer", "number"),
                           "description": string(), "default": num(), "min": num(),
                           "max": num()},
                          ["name", "type", "description", "default", "min", "max"]))},
    ["id", "kind", "task", "description", "available"],
    description="A built-in data set (fashion-mnist) or a generator with its parameters.")
SCHEMAS["DatasetList"] = obj({"datasets": arr({"oneOf": [ref("BuiltinDataset"),
                                                           ref("Dataset")]}),
                              "next_after": INTN},
                             ["datasets", "next_after"])

# ---- responses and parameters -------------------------------------------------------------------------

ERRORS = {
    "400": "Invalid input: a body field, a query or path parameter (\"field\" names it), "
           "malformed JSON (with line and column), or request framing.",
    "401": "No bearer token, or one that is unknown or revoked (with --auth on).",
    "403": "The token may not act on this resource.",
    "404": "No such resource (or one this token may not see).",
    "409": "A conflict: a budget exhausted (code budget_exhausted, with details), or a "
           "conflicting write (code conflict).",
    "413": "The body is over the route's cap (or --max-body / --max-upload), or the route takes "
           "no body and one was sent.",
    "422": "Valid input that asks for the impossible (code numerical_failure).",
    "500": "Our fault; the server log has the details under the request id.",
    "503": "Busy (database or compute queue full; Retry-After), out of memory, or shutting "
           "down.",
}
RESPONSES = {
    s: {"description": d, "content": {"application/json": {"schema": ref("Error")}}}
    for s, d in ERRORS.items()
}

PARAMS = {
    "id": {"name": "id", "in": "path", "required": True,
           "description": "a positive decimal id (\"01\", \"+1\" and \"0\" are a 400)",
           "schema": ID},
    "limit": {"name": "limit", "in": "query", "description": "page size (default 100)",
              "schema": integer(minimum=1, maximum=1000)},
    "after": {"name": "after", "in": "query",
              "description": "exclusive cursor: the last id of the previous page (its "
                             "next_after); default 0",
              "schema": integer(minimum=0)},
}


IDEMPOTENCY_KEY = {"name": "Idempotency-Key", "in": "header", "schema": string(minLength=1),
                   "description": "a retry with the same key and body answers the first run "
                                  "(replayed: true) and charges nothing; the same key with "
                                  "another body is a 409"}


def q(name, schema, description):
    return {"name": name, "in": "query", "description": description, "schema": schema}


def json_body(schema, required=True):
    return {"required": required, "content": {"application/json": {"schema": schema}}}


def ok(schema, description="OK", media="application/json"):
    return {"description": description, "content": {media: {"schema": schema}}}


# ---- the operations: (method, path, summary, access, query params, body, answers, errors) ---------------

PAGE = ["limit", "after"]
OPS = []


def op(method, path, summary, access, params=(), body=None, answers=None, errors=(), tag=None):
    OPS.append((method, path, summary, access, list(params), body, answers or {}, list(errors),
                tag))


# core
op("GET", "/healthz", "Liveness and a real read of the database", "open",
   [q("fresh", enum("0", "1"), "1: read the database now rather than reuse a read of the last "
      "250 ms")],
   answers={"200": ok(obj({"status": {"const": "ok"}, "db": {"const": "ok"},
                           "db_checked_ms_ago": integer(minimum=0),
                           "schema_version": integer()},
                          ["status", "db", "db_checked_ms_ago", "schema_version"]))},
   errors=["400", "500", "503"], tag="service")
op("GET", "/v1/version", "Build, library and database versions", "open",
   answers={"200": ok(obj({"version": string(), "git_commit": string(), "compiler": string(),
                           "libraries": obj({"microhttpd": string(), "jansson": string(),
                                             "sqlite": string(), "gsl": string()}),
                           "schema_version": integer(),
                           "database": obj({"instance_id": string(), "created_at": TIME})},
                          ["version", "git_commit", "libraries", "schema_version", "database"]))},
   errors=["500", "503"], tag="service")
op("GET", "/v1/openapi.json", "This document", "open",
   answers={"200": ok(t("object", required=["openapi", "paths"]),
                      "The OpenAPI 3.1 document (openapi/openapi.json of the repository)")},
   errors=["503"], tag="service")
op("GET", "/metrics", "Prometheus metrics (text format 0.0.4)", "token",
   answers={"200": ok(string(), media="text/plain")}, errors=["401", "500", "503"],
   tag="service")
op("POST", "/v1/echo", "Diagnostic: runs the request path without touching data", "token",
   body=json_body(obj({"message": string(maxLength=1024), "count": integer(minimum=1,
                                                                          maximum=16)},
                      ["message"])),
   answers={"200": ok(obj({"message": string(), "count": integer(), "request_id": string()},
                          ["message", "count", "request_id"]))},
   errors=["400", "401", "413", "503"], tag="service")

# accounting calculators
for name, extra, req, ans in (
        ("epsilon", {"delta": num(exclusiveMinimum=0, exclusiveMaximum=1)}, ["delta"],
         "EpsilonAnswer"),
        ("delta", {"epsilon": num(minimum=0)}, ["epsilon"], "DeltaAnswer"),
        ("rdp", {"delta": num(exclusiveMinimum=0, exclusiveMaximum=1)}, [], "RdpAnswer"),
        ("calibrate", {"target_epsilon": num(exclusiveMinimum=0),
                       "delta": num(exclusiveMinimum=0, exclusiveMaximum=1)},
         ["target_epsilon", "delta"], "CalibrateAnswer")):
    body = acc_request(extra, req)
    if name == "rdp":
        body = obj({k: v for k, v in body["properties"].items()
                    if k not in ("value_discretization", "tail_mass_truncation", "epsilon")},
                   ["event"])
    op("POST", "/v1/accounting/" + name, {
        "epsilon": "epsilon of an event at delta",
        "delta": "delta of an event at epsilon",
        "calibrate": "the noise multiplier, sampling rate or count that meets a target epsilon",
        "rdp": "the RDP curve of an event at the given orders"}[name], "open",
       body=json_body(named(name.capitalize() + "Request", body)),
       answers={"200": ok(ref(ans))},
       errors=["400", "413", "422", "500", "503"], tag="accounting")

# estimators and runs
for kind, schema in (("gaussian", "GaussianRequest"), ("beta", "BetaRequest"),
                     ("mixture", "MixtureRequest"), ("normal-means", "NormalMeansRequest")):
    op("POST", "/v1/estimators/" + kind, "Empirical-Bayes %s estimator (stored as a run)" % kind,
       "token", [IDEMPOTENCY_KEY], body=json_body(ref(schema)),
       answers={"201": ok(ref("EstimatorRun"), "The run (Location: /v1/runs/{id}); a replay of "
                          "an Idempotency-Key answers the first run with replayed: true")},
       errors=["400", "401", "403", "404", "409", "413", "422", "500", "503"], tag="estimators")
op("GET", "/v1/runs", "The runs the caller may read", "token", [PARAMS["limit"], PARAMS["after"]],
   answers={"200": ok(ref("RunList"))}, errors=["400", "401", "500", "503"], tag="estimators")
op("GET", "/v1/runs/{id}", "One stored run", "token",
   answers={"200": ok(ref("Run"))}, errors=["400", "401", "404", "500", "503"], tag="estimators")
op("GET", "/v1/runs/{id}/clients", "A page of a run's per-client results", "token",
   [dict(PARAMS["limit"], schema=integer(minimum=1, maximum=100000),
         description="rows per page, 1..100000 (default 1000)"),
    dict(PARAMS["after"], description="the last position seen (default 0: from the first "
                                      "client)")],
   answers={"200": ok(ref("RunClients"))}, errors=["400", "401", "404", "500", "503"],
   tag="estimators")

# tuning
op("POST", "/v1/tuning/cost", "Privacy cost of a hyperparameter search", "open",
   body=json_body(named("TuningCostRequest", obj({"event": ref("Event"),
                                                  "distribution": ref("RunsDistribution"),
                       "delta": num(exclusiveMinimum=0, exclusiveMaximum=1),
                       "grid_size": integer(minimum=1), "neighboring": NEIGHBORING},
                      ["event", "distribution", "delta"]))),
   answers={"200": ok(named("TuningCostAnswer", obj({"epsilon": NUMN, "epsilon_one_run": NUMN, "epsilon_naive": NUMN,
                           "epsilon_naive_reason": string(), "naive_runs": INTN,
                           "delta": num(), "expected_runs": NUMN, "prob_no_run": NUMN,
                           "distribution": ref("ResolvedDistribution"), "epsilon_rdp": NUMN,
                           "epsilon_rdp_reason": string(), "epsilon_one_run_reason": string(),
                           "epsilon_reason": string(),
                           "pure": null_or(obj({"epsilon_one_run": NUMN, "epsilon": NUMN,
                                                "epsilon_naive": NUMN, "bound": string()},
                                               closed=False)),
                           "accounting": ref("TuningAccounting")},
                          ["epsilon", "epsilon_one_run", "distribution", "accounting"])))},
   errors=["400", "413", "422", "500", "503"], tag="tuning")
op("POST", "/v1/tuning/plan", "Noise multiplier per run so that the whole search meets a target",
   "open",
   body=json_body(named("TuningPlanRequest", obj({"epsilon": num(exclusiveMinimum=0),
                       "delta": num(exclusiveMinimum=0, exclusiveMaximum=1),
                       "training": obj({"sampling_rate": num(exclusiveMinimum=0, maximum=1),
                                        "steps": integer(minimum=1)},
                                       ["sampling_rate", "steps"]),
                       "distribution": ref("RunsDistribution"), "grid_size": integer(minimum=1),
                       "expected_runs": num(minimum=1), "neighboring": NEIGHBORING},
                      ["epsilon", "delta", "training", "distribution"]))),
   answers={"200": ok(named("TuningPlanAnswer", obj({"noise_multiplier": NUMN, "noise_multiplier_untuned": NUMN,
                           "price_of_tuning": NUMN, "noise_multiplier_naive": NUMN,
                           "runs": obj({"expected": NUMN, "prob_no_run": NUMN,
                                        "distribution": ref("ResolvedDistribution"),
                                        "draw": string()}, ["expected", "distribution"]),
                           "epsilon": NUMN, "accounting": ref("TuningAccounting")},
                          ["noise_multiplier", "runs", "epsilon"], closed=False)))},
   errors=["400", "413", "422", "500", "503"], tag="tuning")
op("POST", "/v1/tuning/draw", "Draw the number of runs and the candidates (stored)", "token",
   body=json_body(obj({"distribution": ref("RunsDistribution"),
                       "grid_size": integer(minimum=1), "label": string()}, ["distribution"])),
   answers={"201": ok(ref("TuningDraw"), "The draw (Location: /v1/tuning/draws/{id})")},
   errors=["400", "401", "413", "500", "503"], tag="tuning")
op("GET", "/v1/tuning/draws/{id}", "A stored draw, unchanged", "token",
   answers={"200": ok(ref("TuningDraw"))}, errors=["400", "401", "404", "500", "503"],
   tag="tuning")

# planning calculators
_BEST = enum("local", "fedavg", "mrmtl")
_MSE = obj({"local": NUMN, "fedavg": NUMN, "mrmtl_star": NUMN}, ["local", "fedavg", "mrmtl_star"])
_mrmtl_silo = obj({"n": num(exclusiveMinimum=0), "sigma": num(minimum=0),
                   "sigma_dp": num(minimum=0), "noise_multiplier": num(minimum=0),
                   "clip": num(exclusiveMinimum=0)}, ["n", "sigma"])
op("POST", "/v1/calculators/mrmtl", "MR-MTL's lambda* and the errors of local, FedAvg, MR-MTL",
   "open",
   body=json_body(named("MrmtlRequest", obj({"silos": {"oneOf": [integer(minimum=1, maximum=10000),
                                           arr(_mrmtl_silo, minItems=1, maxItems=10000)]},
                       "n": num(exclusiveMinimum=0), "sigma": num(minimum=0),
                       "tau": num(minimum=0), "sigma_dp": num(minimum=0),
                       "noise_multiplier": num(minimum=0), "clip": num(exclusiveMinimum=0),
                       "lambda": num(minimum=0)}, ["silos", "tau"]))),
   answers={"200": ok(named("MrmtlAnswer", {
       "description": "Silos alike (silos a count): the figures of all; silos listed: one "
                      "entry each. An infinite lambda* is null (best: fedavg).",
       "oneOf": [
           obj({"model": {"const": "mean_estimation"}, "silos": integer(minimum=1),
                "sigma_dp": NUMN, "sigma_loc2": NUMN, "lambda_star": NUMN, "best": _BEST,
                "mse": _MSE, "gain": obj({"vs_local": NUMN, "vs_fedavg": NUMN},
                                         ["vs_local", "vs_fedavg"]),
                "at_lambda": obj({"lambda": NUMN, "mse": NUMN, "privacy_gap": NUMN,
                                  "own_weight": NUMN}, ["lambda", "mse", "privacy_gap",
                                                        "own_weight"]),
                "reference": string()},
               ["model", "silos", "sigma_dp", "sigma_loc2", "lambda_star", "best", "mse",
                "gain", "reference"]),
           obj({"model": {"const": "mean_estimation"}, "tau": NUMN, "reference": string(),
                "silos": arr(obj({"index": integer(minimum=0), "sigma_dp": NUMN,
                                  "sigma_loc2": NUMN, "lambda_star": NUMN, "best": _BEST,
                                  "mse": _MSE},
                                 ["index", "sigma_dp", "sigma_loc2", "lambda_star", "best",
                                  "mse"]))},
               ["model", "tau", "silos", "reference"])]}))},
   errors=["400", "413", "422", "500", "503"], tag="calculators")
op("POST", "/v1/calculators/fedhdp", "FedHDP's r* and lambda* per privacy group", "open",
   body=json_body(named("FedhdpRequest", obj({"alpha2": num(minimum=0), "tau2": num(minimum=0),
                       "groups": arr(obj({"name": string(), "clients": integer(minimum=1),
                                          "per_client_noise": num(minimum=0),
                                          "gamma2": num(minimum=0)}, ["clients"]),
                                     minItems=1, maxItems=64),
                       "r": arr(num(minimum=0), description="one per group"),
                       "lambda": arr(num(minimum=0), description="one per group")},
                      ["alpha2", "tau2", "groups"]))),
   answers={"200": ok(named("FedhdpAnswer", obj({"groups": arr(obj({
       "name": STRN, "clients": integer(), "per_client_noise": NUMN, "sigma_p2": NUMN,
       "r_star": NUMN, "weight_star": NUMN, "lambda_star": NUMN, "bayes_mse": NUMN,
       "mse_at_star_with_own_noise": NUMN, "lambda_best_with_own_noise": NUMN,
       "mse_best_with_own_noise": NUMN,
       "at": obj({"r": NUMN, "lambda": NUMN, "mse": NUMN, "mse_without_own_noise": NUMN},
                 ["r", "lambda", "mse", "mse_without_own_noise"])},
       ["name", "clients", "per_client_noise", "sigma_p2", "r_star", "weight_star",
        "lambda_star", "bayes_mse"])),
       "server_variance": obj({"optimal": NUMN, "uniform": NUMN, "at_r": NUMN},
                              ["optimal", "uniform", "at_r"]),
                           "alpha2": num(), "tau2": num(), "reference": string()},
                          ["groups", "server_variance", "reference"])))},
   errors=["400", "413", "422", "500", "503"], tag="calculators")
op("POST", "/v1/calculators/ppsgd", "PPSGD's threshold n* and the bound of its Theorem 4.5",
   "open",
   body=json_body(named("PpsgdRequest", obj({"users": num(exclusiveMinimum=0), "sigma": num(minimum=0),
                       "epsilon": num(exclusiveMinimum=0),
                       "delta": num(exclusiveMinimum=0, exclusiveMaximum=1),
                       "dim_w": num(exclusiveMinimum=0), "grad_bound": num(exclusiveMinimum=0),
                       "c": num(exclusiveMinimum=0), "n": num(exclusiveMinimum=0),
                       "smoothness": num(exclusiveMinimum=0), "v_norm2": num(minimum=0)},
                      ["users", "sigma", "epsilon", "delta", "dim_w", "grad_bound"]))),
   answers={"200": ok(named("PpsgdAnswer", obj({"n_star": NUMN,
                                                "variance_favours": enum("local", "global"),
                                                "bound": obj({
       "sigma_zeta": NUMN, "alpha_0": NUMN, "alpha_1_over_users": NUMN, "alpha_inf": NUMN,
       "alpha_best": NUMN, "at_alpha_best": NUMN,
       "best": enum("local", "global", "personalized")},
       ["sigma_zeta", "alpha_0", "alpha_1_over_users", "alpha_inf", "alpha_best",
        "at_alpha_best", "best"]),
                           "reference": string()}, ["n_star", "reference"])))},
   errors=["400", "413", "422", "500", "503"], tag="calculators")

# budgets
op("POST", "/v1/silos", "Create a silo with its budget (and its first token)", "admin",
   body=json_body(obj({"name": string(minLength=1), "budget": obj({
       "epsilon": num(minimum=0), "delta": num(exclusiveMinimum=0, exclusiveMaximum=1),
       "rho": num(minimum=0), "accountant": enum("rdp", "zcdp", "pld"), "conversion": string(),
       "private": boolean()})}, ["name", "budget"])),
   answers={"201": ok(ref("Silo"), "The silo (Location: /v1/silos/{id}), with its token")},
   errors=["400", "401", "403", "409", "413", "500", "503"], tag="budgets")
op("GET", "/v1/silos", "List silos", "admin",
   [PARAMS["limit"], PARAMS["after"],
    q("archived", enum("true", "false", "1", "0"), "true: also the archived silos")],
   answers={"200": ok(ref("SiloList"))}, errors=["400", "401", "403", "500", "503"],
   tag="budgets")
op("GET", "/v1/silos/{id}", "A silo and its totals", "token",
   [q("verify", enum("true", "false", "1", "0"), "true: recompute the totals from the log")],
   answers={"200": ok(ref("Silo"))}, errors=["400", "401", "403", "404", "500", "503"],
   tag="budgets")
op("PATCH", "/v1/silos/{id}", "Rename a silo or change its budget", "admin",
   body=json_body(obj({"name": string(minLength=1),
                       "budget": obj({"epsilon": num(minimum=0),
                                      "delta": num(exclusiveMinimum=0, exclusiveMaximum=1),
                                      "rho": num(minimum=0)})})),
   answers={"200": ok(ref("Silo"))},
   errors=["400", "401", "403", "404", "409", "413", "500", "503"], tag="budgets")
op("DELETE", "/v1/silos/{id}", "Archive a silo (its log stays readable)", "admin",
   answers={"200": ok(ref("Silo"))}, errors=["400", "401", "403", "404", "409", "500", "503"],
   tag="budgets")
op("POST", "/v1/silos/{id}/token", "Issue a new token for the silo, revoking the old ones", "token",
   body=json_body(obj({}), required=False),
   answers={"200": ok(obj({"silo_id": ID, "token_id": ID, "token": string(),
                           "token_note": string(), "revoked": integer(minimum=0)},
                          ["silo_id", "token_id", "token", "revoked"]))},
   errors=["400", "401", "403", "404", "409", "413", "500", "503"], tag="budgets")
op("DELETE", "/v1/silos/{id}/token", "Revoke every token of the silo", "admin",
   answers={"200": ok(obj({"silo_id": ID, "revoked": integer(minimum=0)},
                          ["silo_id", "revoked"]))},
   errors=["400", "401", "403", "404", "500", "503"], tag="budgets")
op("POST", "/v1/silos/{id}/charges", "Charge an event to the silo's budget", "token",
   body=json_body(ref("ChargeRequest")),
   answers={"201": ok(ref("Charge"), "Charged (Location: the log row)"),
            "200": ok(ref("Charge"), "dry_run: what the charge would cost; nothing charged")},
   errors=["400", "401", "403", "404", "409", "413", "422", "500", "503"], tag="budgets")
op("GET", "/v1/silos/{id}/charges", "The silo's charge log", "token",
   [PARAMS["limit"], PARAMS["after"], q("job_id", integer(minimum=1), "only this job's charges"),
    q("since", string(), "RFC 3339 time: charges at or after it"),
    q("until", string(), "RFC 3339 time: charges before it")],
   answers={"200": ok(ref("ChargeList"))}, errors=["400", "401", "403", "404", "500", "503"],
   tag="budgets")
op("POST", "/v1/charges", "Charge several silos, all or nothing", "token",
   body=json_body(obj({"charges": arr(obj({"silo_id": ID, "event": ref("Event"),
                                           "neighboring": NEIGHBORING,
                                           "idempotency_key": string(minLength=1),
                                           "reason": string(), "job_id": integer(minimum=1)},
                                          ["silo_id", "event"]), minItems=1),
                       "idempotency_key": string(minLength=1), "dry_run": boolean(),
                       "reason": string(), "job_id": integer(minimum=1)}, ["charges"])),
   answers={"201": ok(obj({"charges": arr(ref("Charge"))}, ["charges"])),
            "200": ok(obj({"charges": arr(ref("Charge"))}, ["charges"]), "dry_run")},
   errors=["400", "401", "403", "404", "409", "413", "422", "500", "503"], tag="budgets")
op("POST", "/v1/silos/{id}/claims", "Reserve budget for an event (a claim)", "token",
   body=json_body(obj({"event": ref("Event"), "neighboring": NEIGHBORING,
                       "idempotency_key": string(minLength=1), "reason": string(),
                       "job_id": integer(minimum=1), "timeout_ms": integer(minimum=1)},
                      ["event"])),
   answers={"201": ok(ref("Claim"), "The claim (Location: /v1/claims/{id})")},
   errors=["400", "401", "403", "404", "409", "413", "422", "500", "503"], tag="budgets")
op("GET", "/v1/silos/{id}/claims", "The silo's open claims (active, unexpired)", "token",
   [PARAMS["limit"], PARAMS["after"]], answers={"200": ok(ref("ClaimList"))},
   errors=["400", "401", "403", "404", "500", "503"], tag="budgets")
op("GET", "/v1/claims/{id}", "A claim", "token", answers={"200": ok(ref("Claim"))},
   errors=["400", "401", "403", "404", "500", "503"], tag="budgets")
for verb, what in (("commit", "Spend a claim's reservation"), ("abort", "Release a claim")):
    op("POST", "/v1/claims/{id}/" + verb, what, "token", body=json_body(obj({}), required=False),
       answers={"200": ok(ref("Claim"))},
       errors=["400", "401", "403", "404", "409", "413", "500", "503"], tag="budgets")

# training
op("GET", "/v1/datasets", "Built-in data sets, generators, and the caller's uploads", "token",
   [PARAMS["limit"], PARAMS["after"]], answers={"200": ok(ref("DatasetList"))},
   errors=["400", "401", "500", "503"], tag="training")
op("POST", "/v1/datasets", "Upload a CSV data set", "token",
   [q("label", string(minLength=1), "the label column (required)"),
    q("silo", string(minLength=1), "the column naming each row's silo"),
    q("name", string(minLength=1), "a name for the data set")],
   body={"required": True, "content": {"text/csv": {"schema": string()}}},
   answers={"201": ok(ref("Dataset"), "The data set (Location: /v1/datasets/{id})")},
   errors=["400", "401", "413", "500", "503"], tag="training")
op("GET", "/v1/datasets/{id}", "An upload's summary", "token", answers={"200": ok(ref("Dataset"))},
   errors=["400", "401", "404", "500", "503"], tag="training")
op("DELETE", "/v1/datasets/{id}", "Remove an upload", "token",
   answers={"200": ok(obj({"id": ID, "deleted": {"const": True}}, ["id", "deleted"]))},
   errors=["400", "401", "404", "409", "500", "503"], tag="training")
op("POST", "/v1/jobs", "Submit a training job", "token", body=json_body(ref("JobSpec")),
   answers={"202": ok(ref("Job"), "Queued (Location: /v1/jobs/{id})")},
   errors=["400", "401", "403", "404", "409", "413", "422", "500", "503"], tag="training")
op("POST", "/v1/jobs/plan", "Dry-run a job spec: its plan and budget checks, nothing stored",
   "token", body=json_body(ref("JobSpec")), answers={"200": ok(ref("JobPlan"))},
   errors=["400", "401", "403", "404", "413", "422", "500", "503"], tag="training")
op("GET", "/v1/jobs", "The jobs the caller may see", "token",
   [PARAMS["limit"], PARAMS["after"],
    q("status", enum("queued", "running", "succeeded", "failed", "cancelled", "interrupted"),
      "only jobs in this state")],
   answers={"200": ok(ref("JobList"))}, errors=["400", "401", "500", "503"], tag="training")
op("GET", "/v1/jobs/{id}", "A job: status, progress, spec and plan", "token",
   answers={"200": ok(ref("Job"))}, errors=["400", "401", "404", "500", "503"], tag="training")
op("POST", "/v1/jobs/{id}/cancel", "Cancel a job", "token", body=json_body(obj({}), required=False),
   answers={"202": ok(ref("Job"))},
   errors=["400", "401", "404", "409", "413", "500", "503"], tag="training")
op("GET", "/v1/jobs/{id}/metrics", "Per-round metrics", "token",
   [q("limit", integer(minimum=1, maximum=1000), "rounds per page"),
    q("after", integer(minimum=0), "the last round seen")],
   answers={"200": ok(ref("JobMetrics"))}, errors=["400", "401", "404", "500", "503"],
   tag="training")
op("GET", "/v1/jobs/{id}/events", "Server-sent events: status changes and rounds", "token",
   [q("after", integer(minimum=0), "the last event id seen (or the Last-Event-ID header)"),
    {"name": "Last-Event-ID", "in": "header", "schema": integer(minimum=0),
     "description": "the id of the last event received (server-sent events); ?after= wins"}],
   answers={"200": ok(string(), "An event stream", media="text/event-stream"),
            "204": {"description": "A finished job's stream has been read to its end"}},
   errors=["400", "401", "404", "500", "503"], tag="training")
op("GET", "/v1/jobs/{id}/model", "The global model, or a silo's personalised one", "token",
   [q("silo", string(minLength=1), "a silo's name: its personalised model")],
   answers={"200": ok(ref("JobModel"))}, errors=["400", "401", "403", "404", "500", "503"],
   tag="training")


# ---- the document ---------------------------------------------------------------------------------------


def build():
    paths = {}
    for method, path, summary, access, params, body, answers, errors, tag in OPS:
        o = {"operationId": (method.lower() + path.replace("/v1/", "/").replace("/", "_")
                             .replace("{", "").replace("}", "").replace(".", "_")),
             "summary": summary, "tags": [tag]}
        plist = []
        if "{id}" in path:
            plist.append({"$ref": "#/components/parameters/id"})
        for p in params:
            if p is PARAMS.get("limit"):
                plist.append({"$ref": "#/components/parameters/limit"})
            elif p is PARAMS.get("after"):
                plist.append({"$ref": "#/components/parameters/after"})
            else:
                plist.append(p)
        if plist:
            o["parameters"] = plist
        if body is not None:
            o["requestBody"] = body
        resp = dict(answers)
        # the dispatcher's own answers, on every route: 400 (an unknown query parameter, a
        # malformed id or body, framing), 413 (a body over the cap, or any body where the route
        # takes none), 500, 503 (busy, out of memory, shutting down)
        for e in sorted(set(errors) | {"400", "413", "500", "503"}):
            resp[e] = {"$ref": "#/components/responses/" + e}
        o["responses"] = dict(sorted(resp.items()))
        o["security"] = [] if access == "open" else [{"bearer": []}]
        o["x-access"] = access
        paths.setdefault(path, {})[method.lower()] = o
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "dpsilod",
            "version": open(os.path.join(HERE, "..", "VERSION")).read().strip(),
            "description": "The HTTP API of dpsilod, a differential-privacy accounting and "
                           "federated training daemon. docs/API.md is the prose; this document "
                           "is the same API for machines. Every path answers 405 with Allow to "
                           "a method it does not list, and 404 to a path not listed here "
                           "(except the dashboard's static files). x-access: open (anyone), "
                           "token (any valid bearer token; each handler narrows what it may "
                           "see), admin (the admin token only); with --auth off no token is "
                           "needed.",
        },
        "servers": [{"url": "http://127.0.0.1:8080"}],
        "security": [{"bearer": []}],
        "paths": paths,
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer",
                                           "description": "the admin token or a silo's token "
                                                          "(docs/BUDGETS.md \"Access "
                                                          "control\")"}},
            "parameters": PARAMS,
            "responses": RESPONSES,
            "schemas": SCHEMAS,
        },
    }


def text():
    return json.dumps(build(), indent=1, ensure_ascii=False) + "\n"


def main(argv):
    want = text()
    if len(argv) > 1 and argv[1] == "--check":
        have = open(OUT, encoding="utf-8").read() if os.path.exists(OUT) else ""
        if have != want:
            print("openapi/openapi.json is not what openapi/build.py writes: run "
                  "python3 openapi/build.py and commit both")
            return 1
        return 0
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(want)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

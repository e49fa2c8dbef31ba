-- 0004_estimator_runs: every call of POST /v1/estimators/{gaussian,beta,mixture} is stored as a run
-- (issue #6). GET /v1/runs/{id} returns its inputs and outputs; GET /v1/runs lists them.
--
-- params: the request without its client data (method, variant, prior, privacy parameters, seed, ...)
--         plus n_clients and dimension, as JSON text.
-- data:   the clients array as sent, only when the request set "keep_data": true (else NULL), so raw
--         data is not retained by default.
-- result: the response body (prior, estimates, log-likelihood, status, privacy), as JSON text.
-- Runs are append-only. Timestamps are INTEGER Unix milliseconds, UTC (as every table of dpsilo).
CREATE TABLE estimator_runs (
    id            INTEGER PRIMARY KEY,
    kind          TEXT    NOT NULL CHECK (kind IN ('gaussian', 'beta', 'mixture')),
    created_at_ms INTEGER NOT NULL,
    request_id    TEXT    NOT NULL,
    status        TEXT    NOT NULL,
    private       INTEGER NOT NULL CHECK (private IN (0, 1)),
    n_clients     INTEGER NOT NULL CHECK (n_clients >= 1),
    params        TEXT    NOT NULL CHECK (json_valid(params)),
    data          TEXT             CHECK (data IS NULL OR json_valid(data)),
    result        TEXT    NOT NULL CHECK (json_valid(result))
);

-- 0007_estimator_run_keys: idempotent estimator runs (issue 10, D7). A POST /v1/estimators/... with
-- an Idempotency-Key header stores the key (scoped to the caller's token: "t<token id>:<key>") and
-- the SHA-256 of the request (route and canonical body). A retry with the same key and request is
-- answered from the stored run; the same key with another request is a 409. The run row and the
-- silos' charges commit in one transaction (the ledger's), so a key never names a half-done run.
ALTER TABLE estimator_runs ADD COLUMN idempotency_key TEXT;
ALTER TABLE estimator_runs ADD COLUMN request_hash TEXT
    CHECK (request_hash IS NULL OR length(request_hash) = 64);
CREATE UNIQUE INDEX estimator_runs_idempotency_key ON estimator_runs (idempotency_key)
    WHERE idempotency_key IS NOT NULL;

-- 0011_normal_means_runs: runs of the normal-means estimator (POST /v1/estimators/normal-means,
-- issue 15) are stored like the other estimators' runs, with kind 'normal-means'.
--
-- 0004's CHECK (kind IN ('gaussian', 'beta', 'mixture')) refuses that kind, and SQLite cannot change
-- a CHECK constraint, so the table is rebuilt exactly as 0008 rebuilt it (same columns in the same
-- order, result last; same indexes and append-only triggers), only the kind list grows. The rows
-- keep their ids. estimator_run_silos references estimator_runs and is rebuilt too, unchanged, its
-- rows set aside in a temporary table. DROP TABLE's implicit delete fires no trigger, so the
-- append-only triggers do not stand in the way (https://sqlite.org/lang_droptable.html).

CREATE TABLE estimator_runs_0011 (
    id               INTEGER PRIMARY KEY,
    kind             TEXT    NOT NULL
                     CHECK (kind IN ('gaussian', 'beta', 'mixture', 'normal-means')),
    created_at_ms    INTEGER NOT NULL,
    request_id       TEXT    NOT NULL,
    status           TEXT    NOT NULL,
    private          INTEGER NOT NULL CHECK (private IN (0, 1)),
    n_clients        INTEGER NOT NULL CHECK (n_clients >= 1),
    params           TEXT    NOT NULL CHECK (json_valid(params)),
    data             TEXT,
    creator_token_id INTEGER REFERENCES tokens(id),
    idempotency_key  TEXT,
    request_hash     TEXT    CHECK (request_hash IS NULL OR length(request_hash) = 64),
    result           TEXT    NOT NULL
);
INSERT INTO estimator_runs_0011 (id, kind, created_at_ms, request_id, status, private, n_clients,
                                 params, data, creator_token_id, idempotency_key, request_hash,
                                 result)
SELECT id, kind, created_at_ms, request_id, status, private, n_clients, params, data,
       creator_token_id, idempotency_key, request_hash, result
FROM estimator_runs;

CREATE TEMP TABLE estimator_run_silos_0011 AS SELECT run_id, silo_id FROM estimator_run_silos;
DROP TABLE estimator_run_silos;
DROP TABLE estimator_runs;
ALTER TABLE estimator_runs_0011 RENAME TO estimator_runs;

CREATE TABLE estimator_run_silos (
    run_id  INTEGER NOT NULL REFERENCES estimator_runs(id),
    silo_id INTEGER NOT NULL,
    PRIMARY KEY (run_id, silo_id)
) WITHOUT ROWID;
INSERT INTO estimator_run_silos (run_id, silo_id)
SELECT run_id, silo_id FROM temp.estimator_run_silos_0011;
DROP TABLE temp.estimator_run_silos_0011;

CREATE INDEX estimator_run_silos_silo ON estimator_run_silos(silo_id, run_id);
CREATE INDEX estimator_runs_creator ON estimator_runs(creator_token_id, id);
CREATE UNIQUE INDEX estimator_runs_idempotency_key ON estimator_runs (idempotency_key)
    WHERE idempotency_key IS NOT NULL;

CREATE TRIGGER estimator_runs_no_update BEFORE UPDATE ON estimator_runs
BEGIN SELECT RAISE(ABORT, 'estimator runs are append-only'); END;
CREATE TRIGGER estimator_runs_no_delete BEFORE DELETE ON estimator_runs
BEGIN SELECT RAISE(ABORT, 'estimator runs are append-only'); END;
CREATE TRIGGER estimator_run_silos_no_update BEFORE UPDATE ON estimator_run_silos
BEGIN SELECT RAISE(ABORT, 'estimator run silos are append-only'); END;
CREATE TRIGGER estimator_run_silos_no_delete BEFORE DELETE ON estimator_run_silos
BEGIN SELECT RAISE(ABORT, 'estimator run silos are append-only'); END;

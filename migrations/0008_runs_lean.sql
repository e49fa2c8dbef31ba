-- 0008_runs_lean: a stored run costs its text once (issue 10, "peak memory stays within a small
-- documented multiple of the body size").
--
-- 0004's CHECK (json_valid(result)) and CHECK (data IS NULL OR json_valid(data)), and 0006's trigger
-- estimator_runs_charged_silos (json_each over NEW.result), each made SQLite parse the whole stored
-- text on every insert: for a run of a million clients that was several times the request body in
-- SQLite's JSON nodes, and the larger part of the run's peak memory. Both texts are written by the
-- daemon from jansson dumps (service/api/estimators.c), so they are valid JSON by construction; the
-- silos a run charged are now written by the daemon itself, in the same transaction as the run
-- (service/db/runs.c, runs_insert). The params check stays: params is a few hundred bytes.
--
-- SQLite cannot drop a CHECK constraint, so the table is rebuilt (https://sqlite.org/lang_altertable.html,
-- "Making Other Kinds Of Table Schema Changes"): a new table with every column of 0004, 0006 and 0007
-- and every other constraint, the rows copied with their ids, the old table dropped, the new one
-- renamed. One thing moves: result is now the LAST column. The daemon inserts a run with
-- zeroblob(n) there and then writes the text into it in place (sqlite3_blob_write), and SQLite
-- builds a record without materialising a trailing zeroblob only: so the result is never copied
-- into SQLite's memory as a whole. Results stored so are BLOBs holding UTF-8 JSON text (typeof
-- 'blob'; runs stored before 0008 stay 'text'); from the sqlite3 shell read them as
-- CAST(result AS TEXT). estimator_run_silos references estimator_runs, and foreign keys are on during
-- migrations (a DROP of a referenced table would fail), so its rows are set aside in a temporary
-- table and it is rebuilt too, unchanged. The indexes of 0006 and 0007 are created again.
--
-- Runs were said to be append-only (0004) but nothing enforced it: the triggers at the end refuse
-- UPDATE and DELETE of a run and of its silo rows, as 0002 and 0003 do for draws and charges.

CREATE TABLE estimator_runs_0008 (
    id               INTEGER PRIMARY KEY,
    kind             TEXT    NOT NULL CHECK (kind IN ('gaussian', 'beta', 'mixture')),
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
INSERT INTO estimator_runs_0008 (id, kind, created_at_ms, request_id, status, private, n_clients,
                                 params, data, result, creator_token_id, idempotency_key,
                                 request_hash)
SELECT id, kind, created_at_ms, request_id, status, private, n_clients, params, data, result,
       creator_token_id, idempotency_key, request_hash
FROM estimator_runs;

CREATE TEMP TABLE estimator_run_silos_0008 AS SELECT run_id, silo_id FROM estimator_run_silos;
DROP TABLE estimator_run_silos;
DROP TABLE estimator_runs;
ALTER TABLE estimator_runs_0008 RENAME TO estimator_runs;

CREATE TABLE estimator_run_silos (
    run_id  INTEGER NOT NULL REFERENCES estimator_runs(id),
    silo_id INTEGER NOT NULL,
    PRIMARY KEY (run_id, silo_id)
) WITHOUT ROWID;
INSERT INTO estimator_run_silos (run_id, silo_id)
SELECT run_id, silo_id FROM temp.estimator_run_silos_0008;
DROP TABLE temp.estimator_run_silos_0008;

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

-- 0015_run_clients: the per-client results of an estimator run, stored as columns of doubles
-- beside the run rather than as JSON text inside its result (issue 15, "fast end to end": a run
-- of 10^6 clients stored some 100 MB of text and took seconds to write and read).
--
-- One row per run that kept them (a request with "results": "full", the default; none for
-- "results": "summary"). layout is the JSON text service/codec/run_rows.h writes ({"version": 1,
-- "ids": "none" | "index" | "text", "fields": [{"name", "width", "vector"}]}); vals holds n_rows x
-- (sum of the widths) little-endian IEEE doubles, row by row; ids, when the clients sent their
-- own, n_rows + 1 little-endian uint32 offsets followed by the ids' JSON texts. The run's result
-- keeps the placeholder "estimates": [] where the rows go when it is read (GET /v1/runs/{id}, an
-- Idempotency-Key replay) and GET /v1/runs/{id}/clients pages through them. Runs stored before
-- this migration keep their rows inside their result and have no row here.
--
-- vals is the table's last column, so the daemon inserts zeroblob(n) and writes the bytes in place
-- (sqlite3_blob_write), as for the run's result (0008). Append-only, as the runs are.

CREATE TABLE estimator_run_clients (
    run_id  INTEGER PRIMARY KEY REFERENCES estimator_runs(id),
    n_rows  INTEGER NOT NULL CHECK (n_rows >= 1),
    layout  TEXT    NOT NULL CHECK (json_valid(layout)),
    ids     BLOB,
    vals    BLOB    NOT NULL
);

CREATE TRIGGER estimator_run_clients_no_update BEFORE UPDATE ON estimator_run_clients
BEGIN SELECT RAISE(ABORT, 'estimator runs are append-only'); END;
CREATE TRIGGER estimator_run_clients_no_delete BEFORE DELETE ON estimator_run_clients
BEGIN SELECT RAISE(ABORT, 'estimator runs are append-only'); END;

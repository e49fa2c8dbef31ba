-- 0001_init: the daemon's own metadata.
--
-- The migration runner (service/store.c) creates schema_migrations itself and records this file there;
-- journal_mode=WAL is set by store_open because it cannot change inside a transaction.
-- Numbers reserved for other features: 0002 tuning, 0003 ledger, 0004 estimator runs.
-- Timestamps are INTEGER Unix milliseconds, UTC (as every table of dpsilo).

-- One row: a random identity for this database, created once and never changed. GET /v1/version reports
-- it, so a client (and the restart test) can tell whether it is talking to the same data.
CREATE TABLE instance (
    id            INTEGER PRIMARY KEY CHECK (id = 1),
    instance_id   TEXT    NOT NULL CHECK (length(instance_id) = 16),
    created_at_ms INTEGER NOT NULL
);

INSERT INTO instance (id, instance_id, created_at_ms)
VALUES (1, lower(hex(randomblob(8))), CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER));

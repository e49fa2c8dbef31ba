-- 0005_ledger_rules.sql: audit rows say at which delta their cumulative epsilon is, batch idempotency
-- keys are recorded as a whole, and silo names are looked up by an index (issue #10). Owned by
-- service/ledger.c.
--
-- * charges.delta_after: the delta at which eps_after (the cumulative epsilon after the row, under the
--   rule that admitted it) was computed; NULL on rows written before this migration and on silos
--   without a delta. Within one silo and one delta, eps_after never decreases from one row to the next.
-- * charge_batches: one row per batch idempotency key (POST /v1/charges with a top-level
--   "idempotency_key"), scoped by the token that sent it (actor 0: --auth off or internal callers).
--   request_hash identifies the whole batch (its silos, events, relations and jobs): the same key with
--   another batch is refused (409), never partly replayed. Append-only.
-- * silos_name: active silo names are unique (enforced by the ledger's committer, which serialises
--   every write; an index rather than a UNIQUE constraint so that databases holding duplicates from
--   before this migration still open).

ALTER TABLE charges ADD COLUMN delta_after REAL CHECK (delta_after IS NULL OR (delta_after > 0 AND delta_after < 1));

CREATE TABLE charge_batches (
    id              INTEGER PRIMARY KEY,
    actor_token_id  INTEGER NOT NULL,       -- tokens.id of the sender, 0 when none
    idempotency_key TEXT    NOT NULL CHECK (length(idempotency_key) BETWEEN 1 AND 200),
    request_hash    BLOB    NOT NULL CHECK (length(request_hash) = 32),
    created_at      INTEGER NOT NULL,
    UNIQUE (actor_token_id, idempotency_key)
);
CREATE TRIGGER charge_batches_no_update BEFORE UPDATE ON charge_batches
BEGIN SELECT RAISE(ABORT, 'charge_batches are append-only'); END;
CREATE TRIGGER charge_batches_no_delete BEFORE DELETE ON charge_batches
BEGIN SELECT RAISE(ABORT, 'charge_batches are append-only'); END;

CREATE INDEX silos_name ON silos(name);

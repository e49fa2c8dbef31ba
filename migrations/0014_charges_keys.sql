-- 0014_charges_keys: the idempotency key and claim uniqueness of charges as partial indexes led by
-- the key (issue 12).
--
-- UNIQUE (silo_id, idempotency_key) put one entry per charge at the silo's place in the index,
-- with or without a key (a job round's charges have none: NULL entries, never in conflict), so a
-- round of 139 silos wrote a leaf page per silo once the index had grown past a page per silo; so
-- did UNIQUE (claim_id) with the NULL of every charge that is not a claim's commit. As partial
-- indexes over the rows that have a key (a claim), led by the key, a keyless charge writes no entry
-- and the charges of one batch under one key land side by side. The constraints are the same: two
-- rows of a silo never share a key, a claim is committed at most once, NULLs never conflict.
-- SQLite cannot drop a table's UNIQUE constraint, so charges is rebuilt (the same columns, checks,
-- references, triggers and rows, ids included) without the two.

CREATE TABLE charges_new (
    id              INTEGER PRIMARY KEY,
    silo_id         INTEGER NOT NULL REFERENCES silos(id),
    created_at      INTEGER NOT NULL,
    actor_token_id  INTEGER REFERENCES tokens(id),
    job_id          INTEGER,
    claim_id        INTEGER REFERENCES claims(id),
    idempotency_key TEXT,
    request_hash    BLOB    NOT NULL CHECK (length(request_hash) = 32),
    reason          TEXT,
    event           TEXT    NOT NULL,
    neighboring     TEXT    NOT NULL CHECK (neighboring IN ('add_remove', 'replace_one')),
    cost_rdp        BLOB    NOT NULL,
    cost_rho        REAL    NOT NULL CHECK (cost_rho >= 0),
    cost_eps        REAL    CHECK (cost_eps IS NULL OR cost_eps >= 0),   -- this charge alone, at the silo's delta
    seq             INTEGER NOT NULL CHECK (seq >= 1),                  -- n_charges of the silo after it
    eps_after       REAL    CHECK (eps_after IS NULL OR eps_after >= 0), -- cumulative spend after it
    rho_after       REAL    NOT NULL CHECK (rho_after >= 0),
    remaining_after REAL,
    delta_after     REAL    CHECK (delta_after IS NULL OR (delta_after > 0 AND delta_after < 1)),
    curve_key       BLOB    REFERENCES charge_curves(event_key),
    UNIQUE (silo_id, seq)
);

INSERT INTO charges_new (id, silo_id, created_at, actor_token_id, job_id, claim_id,
                         idempotency_key, request_hash, reason, event, neighboring, cost_rdp,
                         cost_rho, cost_eps, seq, eps_after, rho_after, remaining_after,
                         delta_after, curve_key)
SELECT id, silo_id, created_at, actor_token_id, job_id, claim_id, idempotency_key, request_hash,
       reason, event, neighboring, cost_rdp, cost_rho, cost_eps, seq, eps_after, rho_after,
       remaining_after, delta_after, curve_key
FROM charges ORDER BY id;

DROP TABLE charges;
ALTER TABLE charges_new RENAME TO charges;

CREATE UNIQUE INDEX charges_key ON charges(idempotency_key, silo_id)
    WHERE idempotency_key IS NOT NULL;
CREATE UNIQUE INDEX charges_claim ON charges(claim_id) WHERE claim_id IS NOT NULL;

CREATE TRIGGER charges_no_update BEFORE UPDATE ON charges
BEGIN SELECT RAISE(ABORT, 'charges are append-only'); END;
CREATE TRIGGER charges_no_delete BEFORE DELETE ON charges
BEGIN SELECT RAISE(ABORT, 'charges are append-only'); END;

-- 0003_ledger.sql: per-silo privacy budgets (issue #5). Owned by service/ledger.c.
--
-- Invariants (docs/BUDGETS.md):
--   * charges is the append-only spend log: triggers refuse every UPDATE and DELETE.
--   * a silo's cached totals (spent_rdp, spent_rho, n_charges) are derived from its charges: each append
--     updates them in the same BEGIN IMMEDIATE transaction, and ledger_verify_silo recomputes them from
--     the log. Vectors are BLOBs of native doubles, one per order of ledger_orders.orders.
--   * UNIQUE(silo_id, idempotency_key) makes a retried charge land once.
--   * tokens hold SHA-256 hashes only; a token itself is never stored.
-- Times are INTEGER Unix milliseconds, UTC.

-- The RDP order grid used by every vector in this database (fixed at first start).
CREATE TABLE ledger_orders (
    id     INTEGER PRIMARY KEY CHECK (id = 1),
    orders BLOB NOT NULL CHECK (length(orders) > 0 AND length(orders) % 8 = 0)
);

CREATE TABLE silos (
    id          INTEGER PRIMARY KEY,
    name        TEXT    NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    created_at  INTEGER NOT NULL,
    archived_at INTEGER,                 -- NULL while active; archived silos keep their log
    budget_kind TEXT    NOT NULL CHECK (budget_kind IN ('eps_delta', 'rho', 'none')),
    accountant  TEXT    NOT NULL CHECK (accountant IN ('rdp', 'zcdp', 'pld', 'none')),
    conversion  TEXT    NOT NULL,
    epsilon     REAL    CHECK (epsilon IS NULL OR epsilon >= 0),
    delta       REAL    CHECK (delta IS NULL OR (delta > 0 AND delta < 1)),
    rho         REAL    CHECK (rho IS NULL OR rho >= 0),
    -- cached totals, derived from charges
    n_charges   INTEGER NOT NULL DEFAULT 0 CHECK (n_charges >= 0),
    spent_rdp   BLOB    NOT NULL,
    spent_rho   REAL    NOT NULL DEFAULT 0 CHECK (spent_rho >= 0),
    CHECK (budget_kind <> 'eps_delta' OR (epsilon IS NOT NULL AND delta IS NOT NULL)),
    CHECK (budget_kind <> 'rho' OR rho IS NOT NULL),
    CHECK ((budget_kind = 'none') = (accountant = 'none'))
);

CREATE TABLE tokens (
    id         INTEGER PRIMARY KEY,
    hash       BLOB    NOT NULL UNIQUE CHECK (length(hash) = 32),
    role       TEXT    NOT NULL CHECK (role IN ('admin', 'silo')),
    silo_id    INTEGER REFERENCES silos(id),
    created_at INTEGER NOT NULL,
    CHECK ((role = 'silo') = (silo_id IS NOT NULL))
);

CREATE TABLE claims (
    id              INTEGER PRIMARY KEY,
    silo_id         INTEGER NOT NULL REFERENCES silos(id),
    created_at      INTEGER NOT NULL,
    expires_at      INTEGER NOT NULL CHECK (expires_at > created_at),
    actor_token_id  INTEGER REFERENCES tokens(id),
    job_id          INTEGER,
    idempotency_key TEXT,
    request_hash    BLOB    NOT NULL CHECK (length(request_hash) = 32),
    reason          TEXT,
    event           TEXT    NOT NULL,
    neighboring     TEXT    NOT NULL CHECK (neighboring IN ('add_remove', 'replace_one')),
    cost_rdp        BLOB    NOT NULL,
    cost_rho        REAL    NOT NULL CHECK (cost_rho >= 0),
    state           TEXT    NOT NULL DEFAULT 'active'
                            CHECK (state IN ('active', 'committed', 'aborted', 'expired')),
    closed_at       INTEGER,
    UNIQUE (silo_id, idempotency_key)
);
CREATE INDEX claims_active ON claims(silo_id, state, expires_at);

CREATE TABLE charges (
    id              INTEGER PRIMARY KEY,
    silo_id         INTEGER NOT NULL REFERENCES silos(id),
    created_at      INTEGER NOT NULL,
    actor_token_id  INTEGER REFERENCES tokens(id),
    job_id          INTEGER,
    claim_id        INTEGER UNIQUE REFERENCES claims(id),
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
    UNIQUE (silo_id, idempotency_key),
    UNIQUE (silo_id, seq)
);
CREATE INDEX charges_silo_time ON charges(silo_id, created_at);
CREATE INDEX charges_silo_job ON charges(silo_id, job_id);

CREATE TRIGGER charges_no_update BEFORE UPDATE ON charges
BEGIN SELECT RAISE(ABORT, 'charges are append-only'); END;
CREATE TRIGGER charges_no_delete BEFORE DELETE ON charges
BEGIN SELECT RAISE(ABORT, 'charges are append-only'); END;
CREATE TRIGGER claims_no_delete BEFORE DELETE ON claims
BEGIN SELECT RAISE(ABORT, 'claims are never deleted'); END;
CREATE TRIGGER claims_closed_final BEFORE UPDATE ON claims WHEN OLD.state <> 'active'
BEGIN SELECT RAISE(ABORT, 'a closed claim cannot change'); END;
CREATE TRIGGER silos_no_delete BEFORE DELETE ON silos
BEGIN SELECT RAISE(ABORT, 'silos are archived, never deleted'); END;
CREATE TRIGGER tokens_no_delete BEFORE DELETE ON tokens
BEGIN SELECT RAISE(ABORT, 'tokens are never deleted'); END;

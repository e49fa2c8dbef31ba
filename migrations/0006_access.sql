-- 0006_access: token revocation and private estimator runs and tuning draws (issue 10, "Access").
--
-- Tokens are never deleted (0003's tokens_no_delete): a token is revoked by setting revoked_at, once;
-- a lookup ignores revoked rows. So the tokens table is also the audit trail of rotations: one row per
-- token ever issued, with its created_at and revoked_at (Unix milliseconds, UTC).
--   * at start the admin token from the file is registered and every other admin token revoked;
--   * POST /v1/silos/{id}/token issues a silo token and revokes the silo's previous ones;
--   * DELETE /v1/silos/{id}/token revokes the silo's tokens.
--
-- Who may read a run or a draw (docs/BUDGETS.md "Access control"):
--   * creator_token_id: the token that created it (NULL: --auth off, or created before 0006);
--   * estimator_run_silos: the silos a run charged, one row per (run, silo). They are read from
--     the run's stored result (result.privacy.charges[].silo_id, the charges the run made), by the
--     trigger below for new runs and by the INSERT below for the runs stored before 0006.

ALTER TABLE tokens ADD COLUMN revoked_at INTEGER CHECK (revoked_at IS NULL OR revoked_at >= 0);

-- Only revocation changes a token row, and only once.
CREATE TRIGGER tokens_revoke_only BEFORE UPDATE ON tokens
WHEN NEW.id IS NOT OLD.id OR NEW.hash IS NOT OLD.hash OR NEW.role IS NOT OLD.role
  OR NEW.silo_id IS NOT OLD.silo_id OR NEW.created_at IS NOT OLD.created_at
  OR OLD.revoked_at IS NOT NULL OR NEW.revoked_at IS NULL
BEGIN SELECT RAISE(ABORT, 'a token can only be revoked, once'); END;

CREATE INDEX tokens_silo ON tokens(silo_id, revoked_at) WHERE silo_id IS NOT NULL;

ALTER TABLE estimator_runs ADD COLUMN creator_token_id INTEGER REFERENCES tokens(id);
ALTER TABLE tuning_draws ADD COLUMN creator_token_id INTEGER REFERENCES tokens(id);

CREATE TABLE estimator_run_silos (
    run_id  INTEGER NOT NULL REFERENCES estimator_runs(id),
    silo_id INTEGER NOT NULL,
    PRIMARY KEY (run_id, silo_id)
) WITHOUT ROWID;
CREATE INDEX estimator_run_silos_silo ON estimator_run_silos(silo_id, run_id);

INSERT OR IGNORE INTO estimator_run_silos (run_id, silo_id)
SELECT r.id, json_extract(c.value, '$.silo_id')
FROM estimator_runs AS r, json_each(r.result, '$.privacy.charges') AS c
WHERE json_type(c.value, '$.silo_id') = 'integer';

CREATE TRIGGER estimator_runs_charged_silos AFTER INSERT ON estimator_runs
BEGIN
    INSERT OR IGNORE INTO estimator_run_silos (run_id, silo_id)
    SELECT NEW.id, json_extract(c.value, '$.silo_id')
    FROM json_each(NEW.result, '$.privacy.charges') AS c
    WHERE json_type(c.value, '$.silo_id') = 'integer';
END;

CREATE INDEX estimator_runs_creator ON estimator_runs(creator_token_id, id);
CREATE INDEX tuning_draws_creator ON tuning_draws(creator_token_id, id);

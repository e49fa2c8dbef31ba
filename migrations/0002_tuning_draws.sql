-- 0002_tuning_draws: every draw of the number of runs K made by POST /v1/tuning/draw (issue #4).
--
-- The random search of Papernot & Steinke (ICLR 2022) is private only if K really is drawn from the
-- announced distribution and the client runs exactly K trainings. Recording each draw (append-only)
-- lets an auditor check that a tuned release used a draw the service made, and how many runs it
-- was told to make. Rows are never updated or deleted (triggers below).
CREATE TABLE tuning_draws (
    id            INTEGER PRIMARY KEY,
    created_at_ms INTEGER NOT NULL,                 -- Unix milliseconds, UTC
    request_id    TEXT    NOT NULL,                 -- X-Request-Id of the POST that drew it
    distribution  TEXT    NOT NULL,                 -- resolved distribution, JSON (kind, k/mean/eta/gamma)
    runs          INTEGER NOT NULL CHECK (runs >= 0),
    expected_runs REAL    NOT NULL CHECK (expected_runs >= 0),  -- E[K] of the distribution
    prob_no_run   REAL    NOT NULL CHECK (prob_no_run >= 0),    -- P(K = 0)
    grid_size     INTEGER CHECK (grid_size IS NULL OR grid_size >= 1),
    candidates    TEXT,                             -- JSON array of K grid indices, or NULL
    label         TEXT                              -- optional client label
);

CREATE TRIGGER tuning_draws_no_update BEFORE UPDATE ON tuning_draws
BEGIN
    SELECT RAISE(ABORT, 'tuning_draws is append-only');
END;

CREATE TRIGGER tuning_draws_no_delete BEFORE DELETE ON tuning_draws
BEGIN
    SELECT RAISE(ABORT, 'tuning_draws is append-only');
END;

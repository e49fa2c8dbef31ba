-- 0010_jobs: federated training jobs (issue 12; docs/TRAINING.md).
--
-- jobs: one row per POST /v1/jobs. spec is the body as accepted; plan is what the job will spend
-- (per silo: training rows, q, steps, noise multiplier, the round's event). status moves
-- queued -> running -> succeeded | failed | cancelled | interrupted (and running -> queued when the
-- daemon stops or restarts with a job that resumes). No job is ever left running across a
-- restart: the daemon requeues or interrupts it before it serves (service/jobs/runner.c).
--
-- job_silos: the ledger silos a job is bound to; a token of such a silo may read the job.
--
-- job_rounds: one row per finished round, written in the same transaction as the round's ledger
-- charges and the checkpoint (so a round that was charged is in the metrics, and a checkpoint never
-- runs ahead of the charges). Append-only.
--
-- job_events: what GET /v1/jobs/{id}/events streams (status changes, rounds); the row id is the
-- event id (Last-Event-ID). Append-only.
--
-- job_checkpoints: the newest state of a running job (federated/fl_algo.h fl_state_serialize),
-- replaced each round.

CREATE TABLE jobs (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    name             TEXT,
    created_at_ms    INTEGER NOT NULL,
    request_id       TEXT    NOT NULL,
    creator_token_id INTEGER REFERENCES tokens(id),
    algorithm        TEXT    NOT NULL,
    spec             TEXT    NOT NULL CHECK (json_valid(spec)),
    plan             TEXT    NOT NULL CHECK (json_valid(plan)),
    dataset_id       INTEGER, -- an uploaded data set (no FK: a finished job keeps its id)
    status           TEXT    NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'failed',
                                                       'cancelled', 'interrupted')),
    reason           TEXT,
    rounds_total     INTEGER NOT NULL CHECK (rounds_total >= 1),
    rounds_done      INTEGER NOT NULL DEFAULT 0 CHECK (rounds_done BETWEEN 0 AND rounds_total),
    cancel_requested INTEGER NOT NULL DEFAULT 0 CHECK (cancel_requested IN (0, 1)),
    resume           INTEGER NOT NULL CHECK (resume IN (0, 1)),
    started_at_ms    INTEGER,
    finished_at_ms   INTEGER,
    updated_at_ms    INTEGER NOT NULL
);
CREATE INDEX jobs_by_status ON jobs (status, id);
CREATE INDEX jobs_by_dataset ON jobs (dataset_id) WHERE dataset_id IS NOT NULL;

CREATE TABLE job_silos (
    job_id  INTEGER NOT NULL REFERENCES jobs(id),
    silo_id INTEGER NOT NULL,
    name    TEXT    NOT NULL, -- the data set's silo name bound to it
    PRIMARY KEY (job_id, silo_id)
) WITHOUT ROWID;
CREATE INDEX job_silos_by_silo ON job_silos (silo_id);

CREATE TABLE job_rounds (
    job_id        INTEGER NOT NULL REFERENCES jobs(id),
    round         INTEGER NOT NULL CHECK (round >= 1),
    created_at_ms INTEGER NOT NULL,
    wall_ms       REAL    NOT NULL,
    metrics       TEXT    NOT NULL CHECK (json_valid(metrics)),
    PRIMARY KEY (job_id, round)
) WITHOUT ROWID;

CREATE TABLE job_events (
    id            INTEGER PRIMARY KEY,
    job_id        INTEGER NOT NULL REFERENCES jobs(id),
    created_at_ms INTEGER NOT NULL,
    type          TEXT    NOT NULL,
    data          TEXT    NOT NULL CHECK (json_valid(data))
);
CREATE INDEX job_events_by_job ON job_events (job_id, id);

CREATE TABLE job_checkpoints (
    job_id INTEGER PRIMARY KEY REFERENCES jobs(id),
    round  INTEGER NOT NULL,
    state  BLOB    NOT NULL
);

CREATE TRIGGER job_rounds_no_update BEFORE UPDATE ON job_rounds
BEGIN
    SELECT RAISE(ABORT, 'job_rounds is append-only');
END;
CREATE TRIGGER job_rounds_no_delete BEFORE DELETE ON job_rounds
BEGIN
    SELECT RAISE(ABORT, 'job_rounds is append-only');
END;
CREATE TRIGGER job_events_no_update BEFORE UPDATE ON job_events
BEGIN
    SELECT RAISE(ABORT, 'job_events is append-only');
END;
CREATE TRIGGER job_events_no_delete BEFORE DELETE ON job_events
BEGIN
    SELECT RAISE(ABORT, 'job_events is append-only');
END;

-- 0009_datasets: data sets that users upload for training jobs (issue 12, POST /v1/datasets).
--
-- A row keeps the CSV text exactly as uploaded (csv, the LAST column, so that the daemon can insert
-- zeroblob(n) and write the text in place with sqlite3_blob_write, as 0008 does for run results:
-- a 256 MiB upload is never copied into SQLite's memory as a whole) and what its parse found:
-- rows, columns, the label and silo columns, the features, the classes and the natural silos with
-- their row counts. A training job parses the stored text again when it starts (the parse is
-- deterministic), so the numbers a job trains on are those the upload was answered with.
--
-- Access (docs/TRAINING.md "Data sets"): the admin, the token that uploaded it, or another token
-- of that token's silo, as for tuning draws (0006).
--
-- Deleting a data set removes its row (ids are AUTOINCREMENT: a finished job's "dataset": 7 never
-- comes to name another upload); a data set that a queued or running job uses cannot be
-- deleted (the daemon answers 409 before it gets here).

CREATE TABLE datasets (
    id               INTEGER PRIMARY KEY AUTOINCREMENT, -- never reused: a job names its data by id
    name             TEXT    NOT NULL CHECK (length(name) BETWEEN 1 AND 128),
    created_at_ms    INTEGER NOT NULL,
    request_id       TEXT    NOT NULL,
    creator_token_id INTEGER REFERENCES tokens(id),
    label_column     TEXT    NOT NULL,
    silo_column      TEXT,
    n_rows           INTEGER NOT NULL CHECK (n_rows >= 1),
    n_columns        INTEGER NOT NULL CHECK (n_columns >= 2),
    n_features       INTEGER NOT NULL CHECK (n_features >= 1),
    n_classes        INTEGER NOT NULL CHECK (n_classes >= 0),
    silos            TEXT    NOT NULL CHECK (json_valid(silos)),    -- [{"name","rows"}] or []
    features         TEXT    NOT NULL CHECK (json_valid(features)), -- ["x1", ...]
    bytes            INTEGER NOT NULL CHECK (bytes >= 1),
    sha256           TEXT    NOT NULL CHECK (length(sha256) = 64),
    csv              BLOB    NOT NULL
);

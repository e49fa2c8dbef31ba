-- 0012_charge_curves: a charge's per-order RDP cost stored once per distinct event (issue 12).
--
-- charges.cost_rdp held each charge's whole curve (8 bytes per RDP order: 1,304 bytes at the default
-- grid), although a training round charges the same event again and again. A row appended from now
-- on may instead name its curve by curve_key, the ledger's event key (SHA-256 of the event tree and
-- its neighbouring relation, service/ledger/curves.c lg_event_key), with cost_rdp the empty blob;
-- charge_curves holds each such curve once. The curve is a function of the key and of the database's
-- order grid, which is fixed at the first start, so one row per key is exact. Rows written before
-- this migration, and rows the ledger appends without a key (its cost cache off, a claim's commit),
-- keep their curve inline and curve_key NULL. Readers take coalesce(charge_curves.cost_rdp,
-- charges.cost_rdp): the same bytes either way. Like charges, charge_curves is append-only.

CREATE TABLE charge_curves (
    event_key BLOB PRIMARY KEY CHECK (length(event_key) = 32),
    cost_rdp  BLOB NOT NULL CHECK (length(cost_rdp) > 0)
) WITHOUT ROWID;

ALTER TABLE charges ADD COLUMN curve_key BLOB REFERENCES charge_curves(event_key);

CREATE TRIGGER charge_curves_no_update BEFORE UPDATE ON charge_curves
BEGIN SELECT RAISE(ABORT, 'charge curves are append-only'); END;
CREATE TRIGGER charge_curves_no_delete BEFORE DELETE ON charge_curves
BEGIN SELECT RAISE(ABORT, 'charge curves are append-only'); END;

-- The two non-unique per-silo indexes of charges are dropped: every charge wrote a leaf of each.
-- What read them is served by UNIQUE (silo_id, seq) in log order: seq and id both grow with each
-- append of a silo (the table is append-only), so the readers order a silo's rows by seq, which
-- is their id order, without a sort. The audit log's time filter (since/until) becomes a scan of the
-- silo's log instead of a range of charges_silo_time (its job filter never used charges_silo_job).
DROP INDEX charges_silo_time;
DROP INDEX charges_silo_job;

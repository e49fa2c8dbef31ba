-- 0013_silo_totals: a silo's per-order RDP total moves out of its row into a checkpoint (issue 12).
--
-- silos.spent_rdp (8 bytes per RDP order: 1,304 bytes at the default grid) was rewritten with every
-- charge, so a training round that charges 139 silos wrote ~70 pages of silo rows into the WAL for
-- a few changed integers and reals. The total is a function of the silo's log: the sum, in seq
-- order, of its rows' curves with the ledger's upward rounding (ledger_sum_up, one addition per
-- row). silo_totals keeps that sum as of row `seq` of the silo, rewritten only every
-- LEDGER_TOTALS_EVERY charges (service/ledger/internal.h); a reader adds the curves of the rows
-- after seq in seq order, the same additions on the same operands as the charges themselves made,
-- so the total it gets is the same bits. The checkpoint and the rows it sums are written in the
-- same transaction, so a crash never separates them; ledger_silo_verify still compares the whole
-- log's sum with the total read this way. silos keeps n_charges and spent_rho (small values).

CREATE TABLE silo_totals (
    silo_id   INTEGER PRIMARY KEY REFERENCES silos(id),
    seq       INTEGER NOT NULL CHECK (seq >= 0),      -- the silo's rows 1..seq are summed
    spent_rdp BLOB    NOT NULL CHECK (length(spent_rdp) > 0 AND length(spent_rdp) % 8 = 0)
);

INSERT INTO silo_totals (silo_id, seq, spent_rdp) SELECT id, n_charges, spent_rdp FROM silos;

CREATE TRIGGER silo_totals_no_delete BEFORE DELETE ON silo_totals
BEGIN SELECT RAISE(ABORT, 'silo totals are never deleted'); END;

ALTER TABLE silos DROP COLUMN spent_rdp;

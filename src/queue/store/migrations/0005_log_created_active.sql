-- 0005_log_created_active: a message handed to a delivery as it is published logs CREATED and
-- ACTIVE at the same time; the two entries are kept as one row (state 'CREATED', active = 1) and
-- listed as two (the store expands the row). One B-tree insert into `logs` and its two indexes
-- per delivered message fewer. Rows written before keep active = 0 and read as before.

ALTER TABLE logs ADD COLUMN active INTEGER NOT NULL DEFAULT 0;

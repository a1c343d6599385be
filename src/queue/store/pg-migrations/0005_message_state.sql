-- 0005_message_state: what changes per delivery attempt moves out of the wide message row.
--
-- Before, every claim, outcome and retry UPDATEd `messages`, and PostgreSQL writes a whole new
-- version of an updated row (url, headers, body and ~30 other columns) to the heap and the WAL,
-- plus an entry in every index (the id index too). Now:
--   message_data   the message as published, immutable (the old table, renamed; its seq, id
--                  index and the dlq reference stay);
--   message_state  one narrow row per message: status, due time, retries, cancel request, lease,
--                  finish time, and copies of the immutable queue_name / flow_control_key that
--                  the admission indexes need. Claims and outcomes update only this row.
--   messages       a view joining the two: every reader keeps seeing the old shape.
-- Nothing is unlogged: both tables are as durable as before.

ALTER TABLE messages RENAME TO message_data;

CREATE TABLE message_state (
  seq              BIGINT PRIMARY KEY,                  -- = message_data.seq
  status           TEXT NOT NULL DEFAULT 'pending',     -- pending | delivered | failed | cancelled
  due_at           BIGINT NOT NULL,
  retried          INTEGER NOT NULL DEFAULT 0,
  cancel_requested INTEGER NOT NULL DEFAULT 0,
  claimed_by       TEXT,                                -- lease owner (dispatcher id), or 'held'
  lease_until      BIGINT,
  finished_at      BIGINT,
  queue_name       TEXT,                                -- copy of message_data.queue_name
  flow_control_key TEXT                                 -- copy of message_data.flow_control_key
) WITH (fillfactor = 80);                               -- room for the new versions on the same page

INSERT INTO message_state (seq, status, due_at, retried, cancel_requested, claimed_by, lease_until, finished_at, queue_name, flow_control_key)
  SELECT seq, status, due_at, retried, cancel_requested, claimed_by, lease_until, finished_at, queue_name, flow_control_key FROM message_data;

-- drops the old partial indexes on these columns with them (recreated on message_state below)
ALTER TABLE message_data
  DROP COLUMN status, DROP COLUMN due_at, DROP COLUMN retried, DROP COLUMN cancel_requested,
  DROP COLUMN claimed_by, DROP COLUMN lease_until, DROP COLUMN finished_at;

CREATE INDEX messages_due ON message_state(due_at) WHERE status = 'pending' AND claimed_by IS NULL;
CREATE INDEX messages_lease ON message_state(lease_until) WHERE claimed_by IS NOT NULL;
CREATE INDEX messages_finished ON message_state(finished_at) WHERE status <> 'pending';
CREATE INDEX messages_held_queue ON message_state(queue_name, seq) WHERE claimed_by = 'held';
CREATE INDEX messages_held_fc ON message_state(flow_control_key, seq) WHERE claimed_by = 'held' AND queue_name IS NULL;
CREATE INDEX messages_admitted_queue ON message_state(queue_name)
  WHERE status = 'pending' AND queue_name IS NOT NULL AND (claimed_by IS NULL OR claimed_by <> 'held');
CREATE INDEX messages_admitted_fc ON message_state(flow_control_key)
  WHERE status = 'pending' AND flow_control_key IS NOT NULL AND (claimed_by IS NULL OR claimed_by <> 'held');
CREATE INDEX messages_held_due ON message_state(due_at) WHERE claimed_by = 'held';

CREATE VIEW messages AS
  SELECT d.*, s.status, s.due_at, s.retried, s.cancel_requested, s.claimed_by, s.lease_until, s.finished_at
  FROM message_data d JOIN message_state s ON s.seq = d.seq;

-- Event-log rows arrive in time order: a BRIN index (a few pages, next to nothing per insert)
-- serves the time-range reads (pruning, the console's histogram) that the B-tree served.
DROP INDEX logs_time;
CREATE INDEX logs_time ON logs USING brin (time);

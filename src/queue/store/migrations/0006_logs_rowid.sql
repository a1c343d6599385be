-- 0006_logs_rowid: `logs` without AUTOINCREMENT. An AUTOINCREMENT table reads and rewrites its
-- row of `sqlite_sequence` on every INSERT (~3,300 CPU instructions each, two log rows per
-- delivered message); without it SQLite gives a new row the largest `seq` + 1. `seq` still only
-- grows: the store's pruning never deletes the row with the largest `seq` (src/queue/store/sqlite.ts
-- `prune`), so the largest `seq` ever given out is always in the table and never given again, and
-- a page cursor (an entry key derived from `seq`, src/queue/store/sqlite-logs.ts) keeps meaning
-- "after / before this entry". The table is rebuilt (rows copied with their `seq`, the indexes
-- made again); when the newest rows were already pruned, a marker row holds the largest `seq`
-- given out so far (message_seq 0: no message, so no listing shows it and the histogram leaves it
-- out; pruning deletes it once a newer row exists).

CREATE TABLE logs_new (
  seq                 INTEGER PRIMARY KEY,
  time                INTEGER NOT NULL,               -- ms
  message_seq         INTEGER NOT NULL,
  state               TEXT NOT NULL,
  error               TEXT,
  next_delivery_time  INTEGER,
  response_status     INTEGER,
  response_headers    TEXT,
  response_body       BLOB,
  active              INTEGER NOT NULL DEFAULT 0     -- 1: a CREATED row that is also the ACTIVE entry (0005)
);
INSERT INTO logs_new (seq, time, message_seq, state, error, next_delivery_time, response_status, response_headers, response_body, active)
  SELECT seq, time, message_seq, state, error, next_delivery_time, response_status, response_headers, response_body, active FROM logs;
INSERT INTO logs_new (seq, time, message_seq, state)
  SELECT s.seq, 0, 0, 'CREATED' FROM sqlite_sequence s
  WHERE s.name = 'logs' AND s.seq > (SELECT IFNULL(MAX(seq), 0) FROM logs);
DROP TABLE logs;
ALTER TABLE logs_new RENAME TO logs;
CREATE INDEX logs_message ON logs(message_seq);
CREATE INDEX logs_time ON logs(time);

-- 0007_messages_rowid: `messages` without AUTOINCREMENT, as `logs` in 0006: every INSERT of an
-- AUTOINCREMENT table reads and rewrites its row of `sqlite_sequence` (~3,100 CPU instructions per
-- message). Without it a new message takes the largest `seq` + 1. A `seq` is never given to a
-- second message while anything refers to the first: `dlq` and `logs` rows refer to `messages.seq`,
-- and the store deletes a message only when neither does (src/queue/store/sqlite.ts `prune`), which
-- also never deletes the message with the largest `seq`, so from this schema on no `seq` is given
-- twice. The table is rebuilt (rows copied with their `seq`, every index made again) with foreign
-- keys off (`migrate.ts`), so `dlq.message_seq` keeps referring to the same rows.

CREATE TABLE messages_new (
  seq              INTEGER PRIMARY KEY,
  id               TEXT NOT NULL UNIQUE,
  kind             TEXT NOT NULL DEFAULT 'message',  -- message | callback | failure_callback
  status           TEXT NOT NULL DEFAULT 'pending',
  url              TEXT NOT NULL,
  url_host         TEXT NOT NULL,
  url_path         TEXT NOT NULL,
  origin           TEXT NOT NULL,                     -- scheme://host:port, the fairness key
  method           TEXT NOT NULL,
  headers          TEXT NOT NULL,                     -- JSON Record<string,string[]>, canonical keys
  body             BLOB NOT NULL,
  created_at       INTEGER NOT NULL,                  -- ms
  not_before       INTEGER,                           -- ms, when the user asked for a delay
  due_at           INTEGER NOT NULL,                  -- ms, next delivery attempt
  max_retries      INTEGER NOT NULL,
  retried          INTEGER NOT NULL DEFAULT 0,        -- failed attempts so far
  retry_delay      TEXT,                              -- retry delay expression (ms)
  timeout_ms       INTEGER,
  callback         TEXT,
  callback_opts    TEXT,                              -- JSON PublishOptions of the callback message
  failure_callback TEXT,
  failure_callback_opts TEXT,
  caller_ip        TEXT,
  labels           TEXT,                              -- JSON string[]
  redact           TEXT,                              -- JSON RedactSpec
  topic_name       TEXT,
  endpoint_name    TEXT,
  queue_name       TEXT,
  schedule_id      TEXT,
  flow_control_key TEXT,
  flow_control     TEXT,                              -- JSON {parallelism, rate, period}
  extra            TEXT,                              -- JSON for later features (workflows)
  cancel_requested INTEGER NOT NULL DEFAULT 0,
  claimed_by       TEXT,                              -- delivery lease owner
  lease_until      INTEGER,                           -- ms
  finished_at      INTEGER                            -- ms, when status left 'pending'
);
INSERT INTO messages_new (seq, id, kind, status, url, url_host, url_path, origin, method, headers, body, created_at, not_before, due_at, max_retries, retried, retry_delay, timeout_ms, callback, callback_opts, failure_callback, failure_callback_opts, caller_ip, labels, redact, topic_name, endpoint_name, queue_name, schedule_id, flow_control_key, flow_control, extra, cancel_requested, claimed_by, lease_until, finished_at)
  SELECT seq, id, kind, status, url, url_host, url_path, origin, method, headers, body, created_at, not_before, due_at, max_retries, retried, retry_delay, timeout_ms, callback, callback_opts, failure_callback, failure_callback_opts, caller_ip, labels, redact, topic_name, endpoint_name, queue_name, schedule_id, flow_control_key, flow_control, extra, cancel_requested, claimed_by, lease_until, finished_at FROM messages;
DROP TABLE messages;
ALTER TABLE messages_new RENAME TO messages;
CREATE INDEX messages_due ON messages(due_at) WHERE status = 'pending' AND claimed_by IS NULL;
CREATE INDEX messages_lease ON messages(lease_until) WHERE claimed_by IS NOT NULL;
CREATE INDEX messages_finished ON messages(finished_at) WHERE status <> 'pending';
CREATE INDEX messages_held_queue ON messages(queue_name, seq) WHERE claimed_by = 'held';
CREATE INDEX messages_held_fc ON messages(flow_control_key, seq) WHERE claimed_by = 'held' AND queue_name IS NULL;
CREATE INDEX messages_admitted_queue ON messages(queue_name)
  WHERE status = 'pending' AND queue_name IS NOT NULL AND (claimed_by IS NULL OR claimed_by <> 'held');
CREATE INDEX messages_admitted_fc ON messages(flow_control_key)
  WHERE status = 'pending' AND flow_control_key IS NOT NULL AND (claimed_by IS NULL OR claimed_by <> 'held');
CREATE INDEX messages_held_due ON messages(due_at) WHERE claimed_by = 'held';

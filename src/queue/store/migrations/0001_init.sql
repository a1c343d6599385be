-- 0001_init: messages (live and finished, one row per message), DLQ entries, event log, dedup keys.
-- Append-only: never edit a released migration; add 0002_... instead.

-- One row per message for its whole life. `status` says what is ready:
--   pending   waiting for its due time, being delivered (claimed_by set) or waiting for a retry
--   delivered finished with a 2xx; kept for logs until retention
--   failed    retries exhausted or non-retryable; referenced by a DLQ entry until it is deleted
--   cancelled cancelled by the user
CREATE TABLE messages (
  seq              INTEGER PRIMARY KEY AUTOINCREMENT,
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
-- The hot index: only due, unclaimed, undelivered messages (partial index).
CREATE INDEX messages_due ON messages(due_at) WHERE status = 'pending' AND claimed_by IS NULL;
-- Leases to reap after a crash or a stuck delivery.
CREATE INDEX messages_lease ON messages(lease_until) WHERE claimed_by IS NOT NULL;
-- Retention pruning of finished messages.
CREATE INDEX messages_finished ON messages(finished_at) WHERE status <> 'pending';

CREATE TABLE dlq (
  seq                 INTEGER PRIMARY KEY AUTOINCREMENT,
  dlq_id              TEXT NOT NULL UNIQUE,
  message_seq         INTEGER NOT NULL REFERENCES messages(seq),
  created_at          INTEGER NOT NULL,               -- ms, when the message failed
  response_status     INTEGER,
  response_headers    TEXT,                           -- JSON Record<string,string[]>
  response_body       BLOB,
  error               TEXT
);
CREATE INDEX dlq_message ON dlq(message_seq);

-- The event log: one row per state transition (spec "Message states").
CREATE TABLE logs (
  seq                 INTEGER PRIMARY KEY AUTOINCREMENT,
  time                INTEGER NOT NULL,               -- ms
  message_seq         INTEGER NOT NULL,
  state               TEXT NOT NULL,
  error               TEXT,
  next_delivery_time  INTEGER,
  response_status     INTEGER,
  response_headers    TEXT,
  response_body       BLOB
);
CREATE INDEX logs_message ON logs(message_seq);
CREATE INDEX logs_time ON logs(time);

CREATE TABLE dedup (
  key         TEXT PRIMARY KEY,
  message_id  TEXT NOT NULL,
  expires_at  INTEGER NOT NULL                        -- ms
);
CREATE INDEX dedup_expires ON dedup(expires_at);

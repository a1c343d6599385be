-- URL groups, queues, schedules, flow control.
-- Messages waiting for admission by a queue or a flow-control key are stored with
-- claimed_by = 'held' and lease_until NULL: they stay out of the due index (messages_due) and
-- out of lease reaping until the admission gate (src/queue/flow-control/gate.ts) releases them.

CREATE TABLE url_groups (
  name        TEXT PRIMARY KEY,
  created_at  INTEGER NOT NULL,                  -- ms
  updated_at  INTEGER NOT NULL                   -- ms
);
CREATE TABLE url_group_endpoints (
  seq         INTEGER PRIMARY KEY AUTOINCREMENT,
  group_name  TEXT NOT NULL REFERENCES url_groups(name) ON DELETE CASCADE,
  url         TEXT NOT NULL,
  name        TEXT                               -- optional endpoint name
);
CREATE INDEX url_group_endpoints_group ON url_group_endpoints(group_name, seq);

CREATE TABLE queues (
  name        TEXT PRIMARY KEY,
  parallelism INTEGER NOT NULL DEFAULT 1,
  paused      INTEGER NOT NULL DEFAULT 0,
  created_at  INTEGER NOT NULL,
  updated_at  INTEGER NOT NULL
);

-- Per flow-control key: the limits of the latest message (or the pinned ones) and the switches.
CREATE TABLE flow_control_keys (
  key                 TEXT PRIMARY KEY,
  parallelism         INTEGER,
  rate                INTEGER,
  period_s            INTEGER,
  paused              INTEGER NOT NULL DEFAULT 0,
  pinned_parallelism  INTEGER,                   -- non-null = pinned
  pinned_rate         INTEGER,                   -- non-null = pinned (with pinned_period_s)
  pinned_period_s     INTEGER,
  updated_at          INTEGER NOT NULL
);

CREATE TABLE schedules (
  id                TEXT PRIMARY KEY,
  cron              TEXT NOT NULL,               -- as given (trimmed), CRON_TZ= prefix kept
  destination       TEXT NOT NULL,               -- URL or URL-group name
  options           TEXT NOT NULL,               -- JSON PublishOptions (every publish header)
  body              BLOB NOT NULL,
  queue_name        TEXT,
  caller_ip         TEXT,
  paused            INTEGER NOT NULL DEFAULT 0,
  created_at        INTEGER NOT NULL,
  last_time         INTEGER,                     -- ms, last firing
  next_time         INTEGER,                     -- ms, next due firing (NULL while paused)
  last_message_ids  TEXT                         -- JSON string[] of the last firing
);
CREATE INDEX schedules_next ON schedules(next_time) WHERE paused = 0;

-- Admission lookups: held messages per queue / per key in FIFO order, and admitted
-- (not held) pending messages per queue / per key for the in-flight counts.
CREATE INDEX messages_held_queue ON messages(queue_name, seq) WHERE claimed_by = 'held';
CREATE INDEX messages_held_fc ON messages(flow_control_key, seq) WHERE claimed_by = 'held' AND queue_name IS NULL;
CREATE INDEX messages_admitted_queue ON messages(queue_name)
  WHERE status = 'pending' AND queue_name IS NOT NULL AND (claimed_by IS NULL OR claimed_by <> 'held');
CREATE INDEX messages_admitted_fc ON messages(flow_control_key)
  WHERE status = 'pending' AND flow_control_key IS NOT NULL AND (claimed_by IS NULL OR claimed_by <> 'held');
CREATE INDEX messages_held_due ON messages(due_at) WHERE claimed_by = 'held';

-- 0001_init (PostgreSQL): the whole queue schema — messages, DLQ, event log, dedup keys, URL groups,
-- queues, flow-control keys, schedules, workflow runs/steps/waiters. Same tables and meanings as
-- the SQLite migrations 0001-0003 (src/queue/store/migrations); times are Unix ms (BIGINT).
-- Append-only: never edit a released migration; add 0002_... instead.

CREATE TABLE messages (
  seq              BIGSERIAL PRIMARY KEY,
  id               TEXT NOT NULL UNIQUE,
  kind             TEXT NOT NULL DEFAULT 'message',
  status           TEXT NOT NULL DEFAULT 'pending',   -- pending | delivered | failed | cancelled
  url              TEXT NOT NULL,
  url_host         TEXT NOT NULL,
  url_path         TEXT NOT NULL,
  origin           TEXT NOT NULL,
  method           TEXT NOT NULL,
  headers          TEXT NOT NULL,                     -- JSON Record<string,string[]>
  body             BYTEA NOT NULL,
  created_at       BIGINT NOT NULL,
  not_before       BIGINT,
  due_at           BIGINT NOT NULL,
  max_retries      INTEGER NOT NULL,
  retried          INTEGER NOT NULL DEFAULT 0,
  retry_delay      TEXT,
  timeout_ms       BIGINT,
  callback         TEXT,
  callback_opts    TEXT,
  failure_callback TEXT,
  failure_callback_opts TEXT,
  caller_ip        TEXT,
  labels           TEXT,                              -- JSON string[]
  redact           TEXT,
  topic_name       TEXT,
  endpoint_name    TEXT,
  queue_name       TEXT,
  schedule_id      TEXT,
  flow_control_key TEXT,
  flow_control     TEXT,
  extra            TEXT,
  cancel_requested INTEGER NOT NULL DEFAULT 0,
  claimed_by       TEXT,                              -- lease owner (a node's dispatcher id), or 'held'
  lease_until      BIGINT,                            -- NULL with claimed_by = 'held'
  finished_at      BIGINT
);
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

CREATE TABLE dlq (
  seq                 BIGSERIAL PRIMARY KEY,
  dlq_id              TEXT NOT NULL UNIQUE,
  message_seq         BIGINT NOT NULL REFERENCES messages(seq),
  created_at          BIGINT NOT NULL,
  response_status     INTEGER,
  response_headers    TEXT,
  response_body       BYTEA,
  error               TEXT
);
CREATE INDEX dlq_message ON dlq(message_seq);
CREATE INDEX dlq_created ON dlq(created_at);

CREATE TABLE logs (
  seq                 BIGSERIAL PRIMARY KEY,
  time                BIGINT NOT NULL,
  message_seq         BIGINT NOT NULL,
  state               TEXT NOT NULL,
  error               TEXT,
  next_delivery_time  BIGINT,
  response_status     INTEGER,
  response_headers    TEXT,
  response_body       BYTEA
);
CREATE INDEX logs_message ON logs(message_seq);
CREATE INDEX logs_time ON logs(time);

CREATE TABLE dedup (
  key         TEXT PRIMARY KEY,
  message_id  TEXT NOT NULL,
  expires_at  BIGINT NOT NULL
);
CREATE INDEX dedup_expires ON dedup(expires_at);

CREATE TABLE url_groups (
  name        TEXT PRIMARY KEY,
  created_at  BIGINT NOT NULL,
  updated_at  BIGINT NOT NULL
);
CREATE TABLE url_group_endpoints (
  seq         BIGSERIAL PRIMARY KEY,
  group_name  TEXT NOT NULL REFERENCES url_groups(name) ON DELETE CASCADE,
  url         TEXT NOT NULL,
  name        TEXT
);
CREATE INDEX url_group_endpoints_group ON url_group_endpoints(group_name, seq);

CREATE TABLE queues (
  name        TEXT PRIMARY KEY,
  parallelism INTEGER NOT NULL DEFAULT 1,
  paused      INTEGER NOT NULL DEFAULT 0,
  created_at  BIGINT NOT NULL,
  updated_at  BIGINT NOT NULL
);

CREATE TABLE flow_control_keys (
  key                 TEXT PRIMARY KEY,
  parallelism         INTEGER,
  rate                INTEGER,
  period_s            INTEGER,
  paused              INTEGER NOT NULL DEFAULT 0,
  pinned_parallelism  INTEGER,
  pinned_rate         INTEGER,
  pinned_period_s     INTEGER,
  updated_at          BIGINT NOT NULL
);

-- Flow-control rate windows shared by every node: one row per delivery attempt of a key, from
-- its start (ended_at NULL while it runs) until one period after its end.
CREATE TABLE flow_control_attempts (
  seq         BIGSERIAL PRIMARY KEY,
  key         TEXT NOT NULL,
  message_id  TEXT NOT NULL,
  owner       TEXT NOT NULL,                 -- node (dispatcher id) running the attempt
  started_at  BIGINT NOT NULL,
  ended_at    BIGINT
);
CREATE INDEX flow_control_attempts_key ON flow_control_attempts(key, ended_at);

CREATE TABLE schedules (
  id                TEXT PRIMARY KEY,
  cron              TEXT NOT NULL,
  destination       TEXT NOT NULL,
  options           TEXT NOT NULL,
  body              BYTEA NOT NULL,
  queue_name        TEXT,
  caller_ip         TEXT,
  paused            INTEGER NOT NULL DEFAULT 0,
  created_at        BIGINT NOT NULL,
  last_time         BIGINT,
  next_time         BIGINT,
  last_message_ids  TEXT
);
CREATE INDEX schedules_next ON schedules(next_time) WHERE paused = 0;

CREATE TABLE workflow_runs (
  seq            BIGSERIAL PRIMARY KEY,
  run_id         TEXT NOT NULL,
  created_at     BIGINT NOT NULL,
  url            TEXT NOT NULL,
  state          TEXT NOT NULL,
  completed_at   BIGINT,
  response       TEXT,
  initial_body   BYTEA NOT NULL,
  config         TEXT NOT NULL,
  labels         TEXT,
  caller_ip      TEXT,
  flow_control_key TEXT,
  dlq_id         TEXT,
  failure        TEXT,
  next           TEXT,
  updated_at     BIGINT NOT NULL
);
CREATE INDEX workflow_runs_run_id ON workflow_runs(run_id, created_at);
CREATE INDEX workflow_runs_dlq ON workflow_runs(dlq_id) WHERE dlq_id IS NOT NULL;

CREATE TABLE workflow_steps (
  seq            BIGSERIAL PRIMARY KEY,
  run_seq        BIGINT NOT NULL REFERENCES workflow_runs(seq),
  message_id     TEXT NOT NULL,
  call_type      TEXT NOT NULL,
  body           BYTEA NOT NULL,
  created_at     BIGINT NOT NULL
);
CREATE INDEX workflow_steps_run ON workflow_steps(run_seq, seq);

CREATE TABLE workflow_waiters (
  seq            BIGSERIAL PRIMARY KEY,
  event_id       TEXT NOT NULL,
  run_seq        BIGINT NOT NULL REFERENCES workflow_runs(seq),
  url            TEXT NOT NULL,
  deadline       BIGINT NOT NULL,
  step           TEXT NOT NULL,
  timeout_url    TEXT,
  timeout_headers TEXT,
  created_at     BIGINT NOT NULL
);
CREATE INDEX workflow_waiters_event ON workflow_waiters(event_id);
CREATE INDEX workflow_waiters_deadline ON workflow_waiters(deadline);

-- Shared credentials of the queue area (token, signing keys) so a rotation reaches every node.
CREATE TABLE queue_credentials (
  name        TEXT PRIMARY KEY,
  value       TEXT NOT NULL,
  updated_at  BIGINT NOT NULL
);

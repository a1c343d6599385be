-- 0003_workflows: workflow runs (@upstash/workflow) kept on top of the message tables.
-- A run is created by its trigger message (Upstash-Workflow-Init: true); every later step the
-- SDK publishes is appended to workflow_steps, and each delivery carries the whole step list.

CREATE TABLE workflow_runs (
  seq            INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id         TEXT NOT NULL,                 -- wfr_...; reused by resume with a new created_at
  created_at     INTEGER NOT NULL,              -- ms
  url            TEXT NOT NULL,                 -- workflow endpoint
  state          TEXT NOT NULL,                 -- RUN_STARTED | RUN_SUCCESS | RUN_FAILED | RUN_CANCELED
  completed_at   INTEGER,                       -- ms
  response       TEXT,                          -- body of DELETE /v2/workflows/runs/{id}?cancel=false
  initial_body   BLOB NOT NULL,                 -- the trigger payload
  config         TEXT NOT NULL,                 -- JSON RunConfig (settings of the trigger message)
  labels         TEXT,                          -- JSON string[]
  caller_ip      TEXT,
  flow_control_key TEXT,
  dlq_id         TEXT,                          -- DLQ entry of the failed step message
  failure        TEXT,                          -- JSON failure-callback info
  next           TEXT,                          -- JSON state of the step being delivered
  updated_at     INTEGER NOT NULL
);
CREATE INDEX workflow_runs_run_id ON workflow_runs(run_id, created_at);
CREATE INDEX workflow_runs_dlq ON workflow_runs(dlq_id) WHERE dlq_id IS NOT NULL;

-- Step results in publish order (the trigger's payload is not a row: it is workflow_runs.initial_body).
CREATE TABLE workflow_steps (
  seq            INTEGER PRIMARY KEY AUTOINCREMENT,
  run_seq        INTEGER NOT NULL REFERENCES workflow_runs(seq),
  message_id     TEXT NOT NULL,
  call_type      TEXT NOT NULL,                 -- step | toCallback | fromCallback
  body           BLOB NOT NULL,                 -- the step JSON as the SDK published it
  created_at     INTEGER NOT NULL
);
CREATE INDEX workflow_steps_run ON workflow_steps(run_seq, seq);

-- context.waitForEvent: a run waiting for `notify` (or its timeout) on an event id.
CREATE TABLE workflow_waiters (
  seq            INTEGER PRIMARY KEY AUTOINCREMENT,
  event_id       TEXT NOT NULL,
  run_seq        INTEGER NOT NULL REFERENCES workflow_runs(seq),
  url            TEXT NOT NULL,
  deadline       INTEGER NOT NULL,              -- ms
  step           TEXT NOT NULL,                 -- JSON of the Wait step
  timeout_url    TEXT,
  timeout_headers TEXT,                         -- JSON Record<string,string[]>
  created_at     INTEGER NOT NULL
);
CREATE INDEX workflow_waiters_event ON workflow_waiters(event_id);
CREATE INDEX workflow_waiters_deadline ON workflow_waiters(deadline);

-- 0002_workflow_notifies (PostgreSQL; as SQLite's 0004): notifies that found no waiter, kept for
-- the look-back window so a waitForEvent registered shortly after still gets them; indexes for
-- run-level retention.

CREATE TABLE workflow_notifies (
  seq            BIGSERIAL PRIMARY KEY,
  event_id       TEXT NOT NULL,
  run_id         TEXT,                          -- the run it was sent to; NULL = any waiting run
  data           BYTEA NOT NULL,
  created_at     BIGINT NOT NULL
);
CREATE INDEX workflow_notifies_event ON workflow_notifies(event_id, seq);
CREATE INDEX workflow_notifies_created ON workflow_notifies(created_at);

CREATE INDEX workflow_runs_completed ON workflow_runs(completed_at) WHERE completed_at IS NOT NULL;
CREATE INDEX workflow_waiters_run ON workflow_waiters(run_seq);

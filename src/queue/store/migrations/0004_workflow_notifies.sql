-- 0004_workflow_notifies: notifies that found no waiter, kept for the look-back window so a
-- waitForEvent registered shortly after still gets them; an index for run-level retention.

CREATE TABLE workflow_notifies (
  seq            INTEGER PRIMARY KEY AUTOINCREMENT,
  event_id       TEXT NOT NULL,
  run_id         TEXT,                          -- the run it was sent to; NULL = any waiting run
  data           BLOB NOT NULL,                 -- the event data
  created_at     INTEGER NOT NULL               -- ms
);
CREATE INDEX workflow_notifies_event ON workflow_notifies(event_id, seq);
CREATE INDEX workflow_notifies_created ON workflow_notifies(created_at);

CREATE INDEX workflow_runs_completed ON workflow_runs(completed_at) WHERE completed_at IS NOT NULL;
CREATE INDEX workflow_waiters_run ON workflow_waiters(run_seq);

-- 0003_flow_control_attempts: the rate windows of flow-control keys shared by every node. A row is
-- made when an admission round lets a message of a rate-limited key go (started = 0: admitted, not
-- started), marked started by the node that delivers it (retries add a started row), and ended
-- when the attempt ends; it counts against the key's rate until one period after its end.
ALTER TABLE flow_control_attempts ADD COLUMN started INTEGER NOT NULL DEFAULT 0;
CREATE INDEX flow_control_attempts_message ON flow_control_attempts(message_id) WHERE ended_at IS NULL;
CREATE INDEX flow_control_attempts_ended ON flow_control_attempts(ended_at);

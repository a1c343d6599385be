-- 0004_credentials_seed: the queue's credentials (token, signing keys) are shared by every node in
-- queue_credentials. `seed` is the env value (SVC_QUEUE_TOKEN, SVC_QUEUE_*_SIGNING_KEY) the row was
-- last set from: a node restarted with that same env keeps a later rotation, a node started with a
-- changed env value replaces the row (the operator's explicit choice). NULL: not from env.
ALTER TABLE queue_credentials ADD COLUMN seed TEXT;

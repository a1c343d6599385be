-- The vector indexes created through the management API (vector/admin.ts): id (= the index's key,
-- vector_indexes.name), unique display name, creation time (ms). A row exists exactly while the
-- index does: create and delete are one transaction each.
CREATE TABLE vector_catalogue (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  created_at BIGINT NOT NULL
);

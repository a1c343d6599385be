-- The vector area on PostgreSQL (SVC_VECTOR_DATABASE_URL): the source of truth every node loads
-- and follows. Positions (range cursor, graph labels) and sequence numbers are assigned under the
-- index's advisory lock from the counters stored here.
CREATE TABLE vector_indexes (
  name TEXT PRIMARY KEY,
  -- the definition the index was created with (definitions.ts fields; compared at each start)
  definition JSONB NOT NULL,
  -- dense dimension once fixed (by the definition or the first dense upsert)
  dimension INTEGER,
  -- last change sequence number (vector_changes.seq)
  seq BIGINT NOT NULL DEFAULT 0,
  -- changes up to this sequence number were pruned: a node behind it reloads the index whole
  pruned_seq BIGINT NOT NULL DEFAULT 0,
  -- random id of this index in this database: tags every node's local cache
  incarnation TEXT NOT NULL,
  created_at BIGINT NOT NULL
);

CREATE TABLE vector_namespaces (
  index_name TEXT NOT NULL REFERENCES vector_indexes (name),
  id INTEGER NOT NULL,
  name TEXT NOT NULL,
  next_pos BIGINT NOT NULL DEFAULT 0,
  generation INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (index_name, id)
);
CREATE UNIQUE INDEX vector_namespaces_name ON vector_namespaces (index_name, name);

CREATE TABLE vector_records (
  index_name TEXT NOT NULL,
  ns INTEGER NOT NULL,
  id TEXT NOT NULL,
  pos BIGINT NOT NULL,
  seq BIGINT NOT NULL,
  vector BYTEA,
  sparse BYTEA,
  metadata TEXT,
  data TEXT,
  PRIMARY KEY (index_name, ns, id)
);
CREATE UNIQUE INDEX vector_records_pos ON vector_records (index_name, ns, pos);

-- Every write, delete, reset and namespace change, in order. An upsert's data is its record row
-- (joined on seq: a record written again later is applied from its later change).
CREATE TABLE vector_changes (
  index_name TEXT NOT NULL,
  seq BIGINT NOT NULL,
  kind TEXT NOT NULL,
  ns INTEGER,
  id TEXT,
  pos BIGINT,
  name TEXT,
  PRIMARY KEY (index_name, seq)
);

CREATE TABLE vector_credentials (
  name TEXT PRIMARY KEY,
  value TEXT NOT NULL,
  updated_at BIGINT NOT NULL,
  seed TEXT
);

CREATE TABLE vector_sessions (
  uuid TEXT PRIMARY KEY,
  index_name TEXT NOT NULL,
  ns TEXT NOT NULL,
  query JSONB NOT NULL,
  returned JSONB NOT NULL,
  idle_ms BIGINT NOT NULL,
  last_used BIGINT NOT NULL
);
CREATE INDEX vector_sessions_index ON vector_sessions (index_name, last_used);

-- Published copies of a node's local cache of an index (store-pg.ts publish/download): the SQLite
-- cache file and the graph snapshots, so that a node joining with an empty data dir loads a graph
-- instead of rebuilding it. One publication per index: the row below names it; its files are the
-- chunks with its id. A publication is uploaded chunk by chunk first and becomes current only when
-- this row is switched to it (one transaction, which also deletes the previous one's chunks), so
-- chunks of an upload that stopped half-way are never read (and are deleted by the next upload).
CREATE TABLE vector_publications (
  index_name TEXT PRIMARY KEY REFERENCES vector_indexes (name),
  -- random id of the publication (vector_publication_chunks.publication)
  id TEXT NOT NULL,
  -- vector_indexes.incarnation when it was published: another one is never loaded
  incarnation TEXT NOT NULL,
  -- the change sequence number the SQLite copy contains (a joiner applies the changes after it)
  seq BIGINT NOT NULL,
  -- [{"name", "bytes", "chunks", "sha256"}] of every file
  files JSONB NOT NULL,
  bytes BIGINT NOT NULL,
  -- the database's clock (ms since the epoch) when it became current
  published_at BIGINT NOT NULL
);

CREATE TABLE vector_publication_chunks (
  -- (a chunk of an index deleted meanwhile cannot be inserted: no orphan outlives its index)
  index_name TEXT NOT NULL REFERENCES vector_indexes (name),
  publication TEXT NOT NULL,
  file TEXT NOT NULL,
  no INTEGER NOT NULL,
  data BYTEA NOT NULL,
  PRIMARY KEY (publication, file, no)
);
CREATE INDEX vector_publication_chunks_index ON vector_publication_chunks (index_name);
-- graph and vector bytes do not compress: stored out of line without trying
ALTER TABLE vector_publication_chunks ALTER COLUMN data SET STORAGE EXTERNAL;

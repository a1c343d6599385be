-- What the graph snapshots of a publication are checked against, taken from its SQLite copy when it
-- was published: {"dimension": number | null, "namespaces": [{"id", "generation"}]}. A joiner loads
-- the graph files as soon as they are downloaded, while the SQLite copy still downloads, with these
-- expectations, and refuses the publication when the graph files or the SQLite copy disagree with
-- them. NULL in publications written before: their graphs are loaded after the SQLite copy.
ALTER TABLE vector_publications ADD COLUMN expectations JSONB;

/**
 * Persisted HNSW graph snapshots. hnswlib's own
 * file has no header, so each snapshot is two files in `<dataDir>/vector/<index>.snapshots/`:
 * - `ns-<nsId>-<generation>-<seq>.hnsw`: `writeIndexSync` output, written to a temp name then renamed;
 * - `ns-<nsId>-<generation>-<seq>.codes`: the 8-bit codes of the vectors (dense.ts
 *   `QuantizedVectors`: `labels` × dimension bytes, then `labels` float32 scales and squared norms);
 * - `ns-<nsId>.json`: the header `{magic, version, dimension, metric, m, efConstruction, count,
 *   seq, generation, file, bytes, labels, codesBytes}`, written to a temp name then renamed (the commit point).
 * A snapshot covers every record write with sequence number <= `seq` (the graph's covered
 * sequence: writes still pending insertion are newer); on start the graph and codes are loaded and
 * only newer records are replayed. A header that does not match (magic, version, dimension,
 * metric, M, efConstruction, generation, size) is ignored and the graph is rebuilt from SQLite.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Metric } from '../definitions.js';
import { HnswDense, QuantizedVectors, type HnswParams } from './dense.js';

export const SNAPSHOT_MAGIC = 'SVC-HNSW';
export const SNAPSHOT_VERSION = 2;

export interface SnapshotHeader {
  magic: string;
  version: number;
  dimension: number;
  metric: Metric;
  m: number;
  efConstruction: number;
  count: number;
  seq: number;
  generation: number;
  file: string;
  bytes: number;
  /** Entries in the codes file. */
  labels: number;
  codesBytes: number;
}

const codesName = (graphFile: string) => graphFile.replace(/\.hnsw$/, '.codes');
const headerPath = (dir: string, nsId: number) => path.join(dir, `ns-${nsId}.json`);

/** Writes a snapshot of `graph` covering sequence number `seq`; replaces the previous one. */
export function writeSnapshot(dir: string, nsId: number, generation: number, seq: number, graph: HnswDense): void {
  fs.mkdirSync(dir, { recursive: true });
  const file = `ns-${nsId}-${generation}-${seq}.hnsw`;
  const tmp = path.join(dir, `${file}.tmp`);
  graph.index.writeIndexSync(tmp);
  fs.renameSync(tmp, path.join(dir, file));
  const labels = Math.min(graph.labelSpan, graph.codes.capacity);
  const codesFile = codesName(file);
  const fd = fs.openSync(`${path.join(dir, codesFile)}.tmp`, 'w');
  try {
    for (const part of graph.codes.serialize(labels)) fs.writeSync(fd, part);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  fs.renameSync(`${path.join(dir, codesFile)}.tmp`, path.join(dir, codesFile));
  const header: SnapshotHeader = {
    magic: SNAPSHOT_MAGIC,
    version: SNAPSHOT_VERSION,
    dimension: graph.dimension,
    metric: graph.metric,
    m: graph.params.m,
    efConstruction: graph.params.efConstruction,
    count: graph.size,
    seq,
    generation,
    file,
    bytes: fs.statSync(path.join(dir, file)).size,
    labels,
    codesBytes: fs.statSync(path.join(dir, codesFile)).size,
  };
  const hp = headerPath(dir, nsId);
  let previous: string | undefined;
  try {
    previous = (JSON.parse(fs.readFileSync(hp, 'utf8')) as SnapshotHeader).file;
  } catch {
    /* none */
  }
  fs.writeFileSync(`${hp}.tmp`, JSON.stringify(header));
  fs.renameSync(`${hp}.tmp`, hp);
  if (previous && previous !== file) {
    fs.rmSync(path.join(dir, previous), { force: true });
    fs.rmSync(path.join(dir, codesName(previous)), { force: true });
  }
}

/**
 * Loads the snapshot of namespace `nsId` when its header matches; undefined otherwise (absent,
 * corrupt or stale). Never throws.
 */
export function readSnapshot(
  dir: string,
  nsId: number,
  expect: { dimension: number; metric: Metric; params: HnswParams; generation: number },
): { graph: HnswDense; header: SnapshotHeader } | undefined {
  try {
    const h = JSON.parse(fs.readFileSync(headerPath(dir, nsId), 'utf8')) as SnapshotHeader;
    const file = path.join(dir, h.file);
    if (
      h.magic !== SNAPSHOT_MAGIC || h.version !== SNAPSHOT_VERSION || h.dimension !== expect.dimension ||
      h.metric !== expect.metric || h.m !== expect.params.m || h.efConstruction !== expect.params.efConstruction ||
      h.generation !== expect.generation || fs.statSync(file).size !== h.bytes ||
      fs.statSync(path.join(dir, codesName(h.file))).size !== h.codesBytes
    ) return undefined;
    const codes = QuantizedVectors.deserialize(fs.readFileSync(path.join(dir, codesName(h.file))), expect.dimension, h.labels);
    return { graph: HnswDense.load(file, codes, expect.dimension, expect.metric, expect.params), header: h };
  } catch {
    return undefined;
  }
}

/** Removes every snapshot file of a namespace (after delete-namespace or reset). */
export function dropSnapshot(dir: string, nsId: number): void {
  try {
    for (const f of fs.readdirSync(dir)) if (f.startsWith(`ns-${nsId}-`) || f === `ns-${nsId}.json`) fs.rmSync(path.join(dir, f), { force: true });
  } catch {
    /* no dir */
  }
}

/**
 * Record reads of one index — fetch, range, info, random — and the output shape of a record on
 * the wire (float32-shortest numbers, only the fields that exist and were asked for).
 */
import type { VectorIndex } from '../engine/vector-index.js';
import { blobToF32, printVector, shortestFloat32 } from '../engine/float32.js';
import type { NamespaceState } from '../engine/namespace.js';
import type { Scored } from '../engine/scores.js';
import { blobToSparse, type RecordRow } from '../engine/store.js';
import { MAX_FETCH_PREFIX, type Include } from '../validate.js';
import { VectorsMissing } from '../errors.js';

/** One record as answered by query, fetch, range and random. */
export interface OutRecord {
  id: string;
  score?: number;
  vector?: number[];
  sparseVector?: { indices: number[]; values: number[] };
  metadata?: Record<string, unknown>;
  data?: string;
}

/**
 * A record as the wire shows it (absent keys when the field does not exist or was not asked).
 * @throws VectorsMissing when its dense vector is asked for and not filled yet (`vector-index.ts` `fill`)
 */
export function formatRecord(index: VectorIndex, ns: NamespaceState, label: number, inc: Include, score?: number): OutRecord {
  const out: OutRecord = { id: ns.ids[label]! };
  if (score !== undefined) out.score = shortestFloat32(score);
  let row: RecordRow | undefined;
  if (inc.includeVectors || inc.includeData) row = index.store.getByPos(ns.row.id, label);
  if (inc.includeVectors && row) {
    if (row.vector) out.vector = printVector(blobToF32(row.vector));
    else if (index.vectorPending(row.vector)) throw new VectorsMissing(ns.row.id, [label]);
    if (row.sparse) {
      const s = blobToSparse(row.sparse);
      out.sparseVector = { indices: Array.from(s.indices), values: printVector(s.values) };
    }
  }
  if (inc.includeMetadata) {
    const m = ns.meta(label);
    if (m !== undefined) out.metadata = m;
  }
  if (inc.includeData && row?.data != null) out.data = row.data;
  return out;
}

/**
 * `f` of each of `items`; the positions of every record whose vector is missing gathered into one
 * `VectorsMissing` (thrown once all were tried: one read of the database fills them all).
 */
function formatEach<T, R>(ns: NamespaceState, items: T[], f: (x: T) => R): R[] {
  let missing: number[] | undefined;
  const out = items.map((x) => {
    try {
      return f(x);
    } catch (err) {
      if (!(err instanceof VectorsMissing)) throw err;
      (missing ??= []).push(...err.positions);
      return undefined as R;
    }
  });
  if (missing) throw new VectorsMissing(ns.row.id, missing);
  return out;
}

/** Formats scored labels. @throws VectorsMissing (see {@link formatRecord}) */
export function formatScored(index: VectorIndex, ns: NamespaceState | undefined, hits: Scored[], inc: Include): OutRecord[] {
  if (!ns) return [];
  return formatEach(ns, hits, (h) => formatRecord(index, ns, h.label, inc, h.score));
}

/** `fetch` by ids (request order, `null` for unknown) or by prefix (≤ 1,000, position order). */
export function fetchRecords(index: VectorIndex, nsName: string, by: { ids?: string[]; prefix?: string }, inc: Include): (OutRecord | null)[] {
  const ns = index.ns(nsName);
  if (!ns) return by.ids ? by.ids.map(() => null) : [];
  if (by.ids) return formatEach(ns, by.ids, (id) => (ns.byId.has(id) ? formatRecord(index, ns, ns.byId.get(id)!, inc) : null));
  return formatEach(ns, index.store.range(ns.row.id, 0, MAX_FETCH_PREFIX, by.prefix), (r) => formatRecord(index, ns, r.pos, inc));
}

/** `range`: records with position >= cursor, `limit` per page, look-ahead for `nextCursor` ("" at the end). */
export function rangeRecords(index: VectorIndex, nsName: string, cursor: number, limit: number, prefix: string | undefined, inc: Include): { nextCursor: string; vectors: OutRecord[] } {
  const ns = index.ns(nsName);
  if (!ns) return { nextCursor: '', vectors: [] };
  const rows = index.store.range(ns.row.id, cursor, limit + 1, prefix);
  const nextCursor = rows.length > limit ? String(rows[limit].pos) : '';
  return { nextCursor, vectors: formatEach(ns, rows.slice(0, limit), (r) => formatRecord(index, ns, r.pos, inc)) };
}

/** `info`: totals, index size, dimension, metric, type, dense/sparse parts, namespaces. */
export function info(index: VectorIndex): Record<string, unknown> {
  const namespaces: Record<string, { vectorCount: number; pendingVectorCount: number }> = {};
  let total = 0;
  for (const ns of index.namespaces.values()) {
    // Points still queued for graph insertion are searchable (exact scan), so none is "pending"
    // in the wire's sense (stored but not yet searchable).
    namespaces[ns.name] = { vectorCount: ns.count, pendingVectorCount: 0 };
    total += ns.count;
  }
  const d = index.def;
  const out: Record<string, unknown> = {
    vectorCount: total,
    pendingVectorCount: 0,
    // Not in the Upstash answer (clients ignore it): records searchable by exact scan that are
    // not yet in the HNSW graph, and whether a graph rebuild runs (benches wait on these).
    indexingVectorCount: index.pendingCount(),
    rebuilding: index.rebuildCount() > 0,
    indexSize: index.store.size(),
    dimension: index.hasDense ? index.dimension ?? 0 : 0,
    similarityFunction: d.metric,
    indexType: d.type,
  };
  if (index.hasDense) out.denseIndex = { dimension: index.dimension ?? 0, similarityFunction: d.metric, embeddingModel: d.embedder.dense ? d.embedder.dense.name ?? d.embedder.dense.model : '' };
  if (index.hasSparse) out.sparseIndex = { embeddingModel: d.embedder.sparse ?? '' };
  out.namespaces = namespaces;
  return out;
}

/** `random`: one random record with its vectors, metadata and data, or null. */
export function randomRecord(index: VectorIndex, nsName: string): OutRecord | null {
  const ns = index.ns(nsName);
  const label = ns?.randomLabel();
  if (!ns || label === undefined) return null;
  return formatRecord(index, ns, label, { includeVectors: true, includeMetadata: true, includeData: true });
}

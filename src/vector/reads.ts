/**
 * Read operations of one index: query (dense, sparse, hybrid fusion),
 * fetch, range, info, random, list-namespaces — and the output shapes (float32-shortest numbers,
 * only the fields that exist and were asked for).
 */
import type { VectorIndex } from './engine.js';
import { badRequest, MESSAGES, unprocessable } from './errors.js';
import { blobToF32, printVector, shortestFloat32 } from './float32.js';
import type { Neighbor } from './dense.js';
import type { NamespaceState } from './namespace.js';
import { denseScore, fuseDbsf, fuseRrf, byScore, type Scored } from './scores.js';
import { blobToSparse, type RecordRow, type SparseVector } from './store.js';
import { MAX_FETCH_PREFIX, type Include, type QueryRequest } from './validate.js';

/** Per-component candidate depth of a regular hybrid query: max(topK, this). */
export const HYBRID_DEPTH = 100;

export interface OutRecord {
  id: string;
  score?: number;
  vector?: number[];
  sparseVector?: { indices: number[]; values: number[] };
  metadata?: Record<string, unknown>;
  data?: string;
}

/** A record as the wire shows it (absent keys when the field does not exist or was not asked). */
export function formatRecord(index: VectorIndex, ns: NamespaceState, label: number, inc: Include, score?: number): OutRecord {
  const out: OutRecord = { id: ns.ids[label]! };
  if (score !== undefined) out.score = shortestFloat32(score);
  let row: RecordRow | undefined;
  if (inc.includeVectors || inc.includeData) row = index.store.getByPos(ns.row.id, label);
  if (inc.includeVectors && row) {
    if (row.vector) out.vector = printVector(blobToF32(row.vector));
    if (row.sparse) {
      const s = blobToSparse(row.sparse);
      out.sparseVector = { indices: Array.from(s.indices), values: printVector(s.values) };
    }
  }
  if (inc.includeMetadata && ns.metas[label] !== undefined) out.metadata = ns.metas[label];
  if (inc.includeData && row?.data != null) out.data = row.data;
  return out;
}

/** A query whose text parts were already embedded. */
export interface ResolvedQuery extends QueryRequest {
  vector?: number[];
  sparse?: SparseVector;
}

const f = Math.fround;

/**
 * COSINE hits whose graph distance is at most this (cosine >= 1 - 1e-6) get their score
 * recomputed from the original vector in SQLite, so identical vectors score exactly 1 even
 * though the graph's float32 dot product of two unit vectors may round just below 1.
 */
export const NEAR_DUPLICATE_DISTANCE = 1e-6;

/**
 * Final float32 scores of HNSW hits from the graph distances (dense.ts: stored-form vectors; `ip`
 * distance = 1 − dot, `l2` distance = squared Euclidean, both computed by hnswlib in float32):
 * COSINE `(1 + cos)/2` with cos = 1 − d of the unit vectors, DOT_PRODUCT `(1 + dot)/2`,
 * EUCLIDEAN `1/(1 + d)`. This avoids reading the result vectors back (a SQLite read costs ~10 µs
 * per vector, more than the whole graph search at 128-d); the result agrees with
 * {@link denseScore} on the original vectors to within a float32 rounding step. Near-duplicates
 * under COSINE are recomputed exactly ({@link NEAR_DUPLICATE_DISTANCE}). Sorted best first.
 */
function scoreHits(index: VectorIndex, ns: NamespaceState, q: number[], hits: Neighbor[], exactAll: boolean): Scored[] {
  const metric = index.def.metric;
  if (exactAll) return rescoreExact(index, ns, q, hits.map((h) => h.label));
  const out: Scored[] = new Array(hits.length);
  let qf: Float32Array | undefined;
  for (let i = 0; i < hits.length; i++) {
    const { label, distance: d } = hits[i];
    let score: number;
    if (metric === 'EUCLIDEAN') score = f(1 / f(1 + Math.max(0, d)));
    else {
      const dot = f(1 - d);
      score = f(f(1 + (metric === 'COSINE' ? Math.min(1, Math.max(-1, dot)) : dot)) / 2);
      if (metric === 'COSINE' && d <= NEAR_DUPLICATE_DISTANCE) {
        const v = index.store.vectorAt(ns.row.id, label);
        if (v) score = denseScore(metric, (qf ??= Float32Array.from(q)), blobToF32(v));
      }
    }
    out[i] = { label, score };
  }
  return out.sort(byScore);
}

/**
 * Final scores of `labels` from their original vectors ({@link denseScore}, one SQLite statement):
 * used where score values feed further arithmetic (DBSF fusion), so the reference's float32
 * literals are reproduced bit for bit. Sorted best first.
 */
function rescoreExact(index: VectorIndex, ns: NamespaceState, q: number[], labels: number[]): Scored[] {
  const qf = Float32Array.from(q);
  const out: Scored[] = [];
  if (labels.length === 0) return out;
  for (const r of index.store.vectorsByPos(ns.row.id, labels)) {
    if (r.vector) out.push({ label: r.pos, score: denseScore(index.def.metric, qf, blobToF32(r.vector)) });
  }
  return out.sort(byScore);
}

/**
 * Candidates re-ranked on the original vectors per exact scan: k + this. Reading them from SQLite
 * is most of the cost of a selective filtered query (~10 µs per vector: index lookup by position,
 * then the row), so few: the 8-bit ranking errs only between near-ties.
 */
export const RERANK_EXTRA = 6;

/**
 * Exact top-`k` among `labels`: the graph's scan of the in-memory 8-bit codes keeps the best
 * k + {@link RERANK_EXTRA}, whose original vectors (SQLite, one statement) give the final float32
 * scores of {@link denseScore} and the order. Best first.
 */
function exactDense(index: VectorIndex, ns: NamespaceState, q: number[], labels: number[], k: number): Scored[] {
  const n = Math.min(labels.length, k + RERANK_EXTRA);
  const cands = ns.dense!.scan(q, n, labels);
  return rescoreExact(index, ns, q, cands.map((c) => c.label)).slice(0, k);
}

/**
 * Runs one query on namespace `ns`: scored labels, best first, at most `k`.
 * `depth` = candidates per component for fusion (regular: max(k, 100); resumable: k);
 * `exclude` = ids already returned (resumable queries).
 * @throws VectorError 400 (missing part, bad filter) / 422 (dimension).
 */
export function runQuery(index: VectorIndex, ns: NamespaceState | undefined, q: ResolvedQuery, k: number, depth: number, exclude?: Set<string>): Scored[] {
  const t = index.def.type;
  if (t === 'DENSE' && q.sparse) throw badRequest('sparseVector is not allowed for a DENSE index');
  if (t === 'SPARSE' && q.vector) throw badRequest('vector is not allowed for a SPARSE index');
  if (q.vector && index.dimension !== undefined && q.vector.length !== index.dimension) {
    throw unprocessable(MESSAGES.dimension(q.vector.length, index.dimension));
  }
  if (!ns || k === 0) {
    ns?.match(q.filter);
    return [];
  }
  const match = ns.match(q.filter);
  const ef = index.def.hnsw.efSearch;
  const exact = (labels: number[], n: number) => exactDense(index, ns, q.vector!, labels, n);
  const dbsf = !!(q.vector && q.sparse && q.fusion === 'DBSF');
  const fromGraph = (hits: Neighbor[]) => scoreHits(index, ns, q.vector!, hits, dbsf);
  const dense = (n: number) => ns.denseCandidates(q.vector!, n, ef, match, exclude, exact, fromGraph);
  const sparse = (n: number) => ns.sparseSearch(q.sparse!, n, q.useIdf, match, exclude);
  if (q.vector && q.sparse) {
    const lists = [dense(depth), sparse(depth)];
    return (q.fusion === 'DBSF' ? fuseDbsf(lists) : fuseRrf(lists)).slice(0, k);
  }
  if (q.vector) return dense(k).slice(0, k);
  return sparse(k);
}

/** Formats scored labels. */
export function formatScored(index: VectorIndex, ns: NamespaceState | undefined, hits: Scored[], inc: Include): OutRecord[] {
  if (!ns) return [];
  return hits.map((h) => formatRecord(index, ns, h.label, inc, h.score));
}

/** `fetch` by ids (request order, `null` for unknown) or by prefix (≤ 1,000, position order). */
export function fetchRecords(index: VectorIndex, nsName: string, by: { ids?: string[]; prefix?: string }, inc: Include): (OutRecord | null)[] {
  const ns = index.ns(nsName);
  if (by.ids) return by.ids.map((id) => (ns && ns.byId.has(id) ? formatRecord(index, ns, ns.byId.get(id)!, inc) : null));
  if (!ns) return [];
  return index.store.range(ns.row.id, 0, MAX_FETCH_PREFIX, by.prefix).map((r) => formatRecord(index, ns, r.pos, inc));
}

/** `range`: records with position >= cursor, `limit` per page, look-ahead for `nextCursor` ("" at the end). */
export function rangeRecords(index: VectorIndex, nsName: string, cursor: number, limit: number, prefix: string | undefined, inc: Include): { nextCursor: string; vectors: OutRecord[] } {
  const ns = index.ns(nsName);
  if (!ns) return { nextCursor: '', vectors: [] };
  const rows = index.store.range(ns.row.id, cursor, limit + 1, prefix);
  const nextCursor = rows.length > limit ? String(rows[limit].pos) : '';
  return { nextCursor, vectors: rows.slice(0, limit).map((r) => formatRecord(index, ns, r.pos, inc)) };
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

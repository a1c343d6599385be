/**
 * Query execution on one namespace: dense (HNSW graph, or an exact scan of the filter's matches),
 * sparse (inverted index), hybrid fusion (RRF / DBSF), and the final float32 scores.
 * Output shapes are in `records.ts`.
 */
import type { VectorIndex } from '../engine/vector-index.js';
import { vectorError, VectorsMissing } from '../errors.js';
import { blobToF32 } from '../engine/float32.js';
import { HnswDense, type Neighbor } from '../engine/dense.js';
import type { NamespaceState } from '../engine/namespace.js';
import { denseScore, fuseDbsf, fuseRrf, byScore, norm2F32, type Scored } from '../engine/scores.js';
import type { SparseVector } from '../engine/store.js';
import type { QueryRequest } from '../validate.js';

/** Per-component candidate depth of a regular hybrid query: max(topK, this). */
export const HYBRID_DEPTH = 100;

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
 * @throws VectorsMissing for a near-duplicate whose vector is not filled yet (`vector-index.ts` `fill`)
 */
function scoreHits(index: VectorIndex, ns: NamespaceState, q: number[], hits: Neighbor[], exactAll: boolean): Scored[] {
  const metric = index.def.metric;
  if (exactAll) return rescoreExact(index, ns, q, hits.map((h) => h.label));
  const out: Scored[] = new Array(hits.length);
  let qf: Float32Array | undefined;
  let missing: number[] | undefined;
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
        else if (index.vectorPending(v)) (missing ??= []).push(label);
      }
    }
    out[i] = { label, score };
  }
  if (missing) throw new VectorsMissing(ns.row.id, missing);
  return out.sort(byScore);
}

/**
 * Final scores of `labels` from their original vectors ({@link denseScore}, one SQLite statement):
 * used where score values feed further arithmetic (DBSF fusion), so the reference's float32
 * literals are reproduced bit for bit. Sorted best first.
 * @throws VectorsMissing for a vector it reads that is not filled yet (`vector-index.ts` `fill`)
 */
function rescoreExact(index: VectorIndex, ns: NamespaceState, q: number[], labels: number[]): Scored[] {
  const qf = Float32Array.from(q);
  const out: Scored[] = [];
  if (labels.length === 0) return out;
  const metric = index.def.metric;
  const qn = metric === 'COSINE' ? norm2F32(qf) : undefined;
  let v: Float32Array | undefined;
  let missing: number[] | undefined;
  for (const r of index.store.vectorsByPos(ns.row.id, labels)) {
    if (!r.vector) {
      if (index.vectorPending(r.vector)) (missing ??= []).push(r.pos);
      continue;
    }
    // one aligned buffer for every row (a BLOB's bytes need not be 4-byte aligned)
    if (v?.byteLength !== r.vector.byteLength) v = new Float32Array(r.vector.byteLength / 4);
    new Uint8Array(v.buffer).set(r.vector);
    out.push({ label: r.pos, score: denseScore(metric, qf, v, qn) });
  }
  if (missing) throw new VectorsMissing(ns.row.id, missing);
  return out.sort(byScore);
}

/**
 * Candidates re-ranked on the original vectors per exact scan of 8-bit codes (an index without a
 * graph): k + this. Reading them from SQLite is much of the cost of a selective filtered query
 * (~4 µs per vector in one statement: index lookup by position, then the row), so few: the 8-bit
 * ranking errs only between near-ties. On clustered 128-d and 768-d data (100k vectors, filters
 * of 0.1–50 %), every true top-10 member was among the codes' best 13 (k + 2: recall@10 ≥ 0.9997,
 * k + 4: 1.0).
 */
export const RERANK_EXTRA = 3;

/**
 * Exact top-`k` among `labels`, best first. With a graph, its exact scan of its own float32
 * vectors gives the final ranking, scored as graph hits (`fromGraph`). Without one (int8), the
 * scan of the 8-bit codes keeps the best k + {@link RERANK_EXTRA}, whose original vectors (SQLite,
 * one statement) give the final float32 scores of {@link denseScore} and the order.
 */
function exactDense(index: VectorIndex, ns: NamespaceState, q: number[], labels: Int32Array, k: number, fromGraph: (hits: Neighbor[]) => Scored[]): Scored[] {
  const g = ns.dense!;
  if (g instanceof HnswDense) return fromGraph(g.scan(q, k, labels));
  const cands = g.scan(q, Math.min(labels.length, k + RERANK_EXTRA), labels);
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
  if (t === 'DENSE' && q.sparse) throw vectorError('denseNoSparse', '');
  if (t === 'SPARSE' && q.vector) throw vectorError('sparseNoDense', '');
  if (q.vector && index.dimension !== undefined && q.vector.length !== index.dimension) {
    throw vectorError('dimensionMismatch', q.vector.length, index.dimension);
  }
  if (!ns || k === 0) {
    ns?.match(q.filter);
    return [];
  }
  const match = ns.match(q.filter);
  const ef = index.def.hnsw.efSearch;
  const dbsf = !!(q.vector && q.sparse && q.fusion === 'DBSF');
  const fromGraph = (hits: Neighbor[]) => scoreHits(index, ns, q.vector!, hits, dbsf);
  const exact = (labels: Int32Array, n: number) => exactDense(index, ns, q.vector!, labels, n, fromGraph);
  const order = resultOrder(ns);
  const dense = (n: number) => topWithTies((m) => ns.denseCandidates(q.vector!, m, ef, match, exclude, exact, fromGraph), n, order);
  const sparse = (n: number) => topWithTies((m) => ns.sparseSearch(q.sparse!, m, q.useIdf, match, exclude), n, order);
  if (q.vector && q.sparse) {
    const lists = [dense(depth), sparse(depth)];
    return (q.fusion === 'DBSF' ? fuseDbsf(lists) : fuseRrf(lists)).sort(order).slice(0, k);
  }
  if (q.vector) return dense(k);
  return sparse(k);
}

/**
 * Order of ids with equal scores: ascending by Unicode code point, which is the byte order of
 * their UTF-8 forms (JavaScript's `<` compares UTF-16 code units, which puts U+E000–U+FFFF after
 * the characters beyond U+FFFF; the surrogates are moved above them here). Negative, 0 or positive.
 */
export function compareIds(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) return codePointRank(x) - codePointRank(y);
  }
  return a.length - b.length;
}

/** A UTF-16 code unit's place in code point order: surrogates (U+D800–DFFF) after U+E000–U+FFFF. */
function codePointRank(c: number): number {
  return c < 0xd800 ? c : c < 0xe000 ? c + 0x2000 : c - 0x800;
}

/**
 * The final order of every query's results (dense, sparse, fused; every path and namespace):
 * score descending, equal scores by id ascending ({@link compareIds}). So the results of `topK: n`
 * are the first n of those of any larger `topK`.
 */
function resultOrder(ns: NamespaceState): (a: Scored, b: Scored) => number {
  const ids = ns.ids;
  return (a, b) => b.score - a.score || compareIds(ids[a.label] ?? '', ids[b.label] ?? '');
}

/**
 * Candidates whose scores are this close to the k-th one may tie with it: a graph hit's score and
 * the exact score of the same vector differ by up to a float32 rounding step (about 6e-8 near 1).
 */
const TIE_MARGIN = 1e-6;
/** The most candidates {@link topWithTies} fetches to settle a tie at the cut. */
export const MAX_TIE_FETCH = 4096;

/**
 * The best `k` of a search in {@link resultOrder}: `fetch(n)` gives the best n (or all, when
 * fewer) by score, with equal scores in any order. One more than `k` is fetched to see whether
 * the k-th result's score goes on past the cut; while the last candidate fetched may still tie
 * with the k-th ({@link TIE_MARGIN}), twice as many are fetched (up to {@link MAX_TIE_FETCH}), so
 * which of equally scored records make the cut does not depend on `k` or on the search path.
 */
function topWithTies(fetch: (n: number) => Scored[], k: number, order: (a: Scored, b: Scored) => number): Scored[] {
  if (k <= 0) return [];
  for (let n = k + 1; ; n = Math.min(2 * n, Math.max(MAX_TIE_FETCH, k + 1))) {
    const got = fetch(n).sort(order);
    if (got.length <= k) return got;
    if (got.length < n || n >= MAX_TIE_FETCH || got[got.length - 1].score < got[k - 1].score - TIE_MARGIN) return got.slice(0, k);
  }
}

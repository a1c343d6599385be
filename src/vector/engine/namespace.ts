/**
 * In-memory state of one namespace: id <-> label (= range position) maps, parsed metadata (for
 * filters), the dense graph and the sparse inverted index, and the search paths: a filter is
 * evaluated over the namespace once per namespace version (cached), then the dense search picks
 * exact scan or post-filtered HNSW by measured cost ({@link NamespaceState.denseCandidates}).
 * Dense vectors are not held here (the graph holds them in float32, an int8 index as 8-bit codes;
 * SQLite holds the originals); HNSW hits are scored from the graph distances by the query execution (`query/execute.ts`).
 */
import { compileFilter, FilterSyntaxError } from '../filter/index.js';
import { QuantizedDense, type NamespaceDense, type Neighbor } from './dense.js';
import { IdIndex } from './id-index.js';
import { vectorError } from '../errors.js';
import type { NamespaceRow, SparseVector } from './store.js';
import type { SparseIndex } from './sparse.js';
import type { Scored } from './scores.js';

/**
 * Exact top-k among `labels` with their final scores, best first (provided by the read path: a
 * scan of the graph's float32 vectors, or of an int8 index's 8-bit codes re-ranked on the
 * original vectors).
 */
export type ExactSearch = (labels: Int32Array, k: number) => Scored[];
/** Final score of an HNSW hit from its graph distance (see `query/execute.ts` `scoreHits`). */
export type DistanceScorer = (hits: Neighbor[]) => Scored[];
/** Upper bound of the search breadth used for filtered or resumed HNSW searches. */
export const MAX_EF = 4096;
/**
 * A broad filter first searches the graph without the filter for `POST_FILTER_FACTOR × k /
 * selectivity` neighbours and keeps the matching ones (expected: this factor × k matches).
 */
export const POST_FILTER_FACTOR = 1.5;
/**
 * Search breadth of a post-filtering HNSW search for the `n` nearest: max(efSearch, n) plus half
 * the smaller of the two, so the top n come at about the quality efSearch gives the top k. At
 * 100k×128, 50 % selectivity, efSearch 32 (n = 30): ef 62 (efSearch + n) gave recall@10 0.985,
 * 47 (this) 0.969 at 1.25× the speed, 32 (n alone) 0.926; the unfiltered recall is 0.957. At
 * efSearch 64: 0.996 with 94, 0.994 with 79 (this).
 */
export function postFilterEf(efSearch: number, n: number): number {
  return Math.max(efSearch, n) + Math.ceil(Math.min(efSearch, n) / 2);
}
/** Of the filtered queries whose two path estimates are close, one in this many takes the other path. */
export const EXPLORE_EVERY = 16;

export interface FilterMatch {
  bits: Uint8Array;
  labels: number[];
  count: number;
  /** The matches live in the dense graph, as its exact scan takes them (built on first use, {@link NamespaceState.scanList}). */
  scan?: { graph: NamespaceDense; epoch: number; list: Int32Array };
}

export class NamespaceState {
  ids: (string | undefined)[] = [];
  /**
   * Metadata by label: parsed, or still the stored JSON text (start-up keeps the text and parses it
   * later, {@link parseMetadata} / {@link meta}); undefined when the record has none.
   */
  metas: (Record<string, unknown> | string | undefined)[] = [];
  /** Labels below this have parsed metadata (start-up's background parse, {@link parseMetadata}). */
  private parsedUpTo = 0;
  /** Id -> label (reads its keys from {@link ids}: set an id there before adding it, delete it before clearing it). */
  readonly byId = new IdIndex(
    (label) => this.ids[label],
    () => this.ids.length,
  );
  dense?: NamespaceDense;
  /** A graph rebuild in progress (`vector-index.ts`): the fresh graph and the labels still to add. */
  rebuilding?: { graph: NamespaceDense; todo: number[]; at: number };
  sparse?: SparseIndex;
  /** Bumped on every change (filter cache key). */
  version = 0;
  /** Record writes since the last graph snapshot. */
  unsnapshotted = 0;
  /** Filtered dense queries whose two path estimates were within 2× (exploration counter). */
  private closeCalls = 0;
  private readonly filterCache = new Map<string, { version: number; match: FilterMatch }>();

  constructor(public row: NamespaceRow) {}

  get name(): string {
    return this.row.name;
  }
  get count(): number {
    return this.byId.size;
  }

  /** Registers a record at `pos` in the maps (dense/sparse indexes are updated by the caller). */
  put(pos: number, id: string, metadata: Record<string, unknown> | undefined): void {
    this.ids[pos] = id;
    this.metas[pos] = metadata;
    this.byId.set(id, pos);
    this.version++;
  }

  /**
   * Registers a loaded record (start-up): metadata stays JSON text until {@link meta} or
   * {@link parseMetadata} needs it. Does not bump the version.
   */
  load(pos: number, id: string, metadataJson: string | null): void {
    this.ids[pos] = id;
    this.metas[pos] = metadataJson ?? undefined;
    this.byId.set(id, pos);
  }

  /**
   * Makes room for labels below `n` (start-up, before {@link load}): arrays filled up to `n` so
   * that out-of-order assignment keeps them in V8's fast (non-dictionary) element mode.
   */
  presize(n: number): void {
    if (this.ids.length < n) {
      this.ids = this.ids.concat(new Array(n - this.ids.length).fill(undefined));
      this.metas = this.metas.concat(new Array(n - this.metas.length).fill(undefined));
    }
  }

  /** Parsed metadata of label `pos` (parses stored JSON text on first use). */
  meta(pos: number): Record<string, unknown> | undefined {
    const m = this.metas[pos];
    if (typeof m !== 'string') return m;
    const parsed = JSON.parse(m) as Record<string, unknown>;
    this.metas[pos] = parsed;
    return parsed;
  }

  /**
   * Parses stored metadata text left by start-up, in label order, until `performance.now()`
   * passes `deadline`; returns true when every label is parsed (start-up runs it in slices after
   * the index is ready, so filters and `includeMetadata` rarely find text left).
   */
  parseMetadata(deadline = Infinity): boolean {
    const metas = this.metas;
    while (this.parsedUpTo < metas.length) {
      const end = Math.min(metas.length, this.parsedUpTo + 1024);
      for (let i = this.parsedUpTo; i < end; i++) if (typeof metas[i] === 'string') this.meta(i);
      this.parsedUpTo = end;
      if (performance.now() >= deadline) break;
    }
    return this.parsedUpTo >= metas.length;
  }

  /** Removes the record `id` from maps and indexes; returns its label or undefined. */
  drop(id: string): number | undefined {
    const pos = this.byId.get(id);
    if (pos === undefined) return undefined;
    this.byId.delete(id);
    this.ids[pos] = undefined;
    this.metas[pos] = undefined;
    this.dense?.remove(pos);
    this.rebuilding?.graph.remove(pos);
    this.sparse?.remove(pos);
    this.version++;
    return pos;
  }

  /**
   * The records matching `filter` (undefined for an absent/blank filter). Cached per namespace
   * version. @throws VectorError 400 on a syntax error (message with the position).
   */
  match(filter: string | undefined): FilterMatch | undefined {
    if (filter === undefined || filter.trim() === '') return undefined;
    const hit = this.filterCache.get(filter);
    if (hit && hit.version === this.version) return hit.match;
    let compiled;
    try {
      compiled = compileFilter(filter);
    } catch (err) {
      if (err instanceof FilterSyntaxError) throw vectorError('filterSyntax', err.message);
      throw err;
    }
    const bits = new Uint8Array(this.ids.length);
    const labels: number[] = [];
    for (const pos of this.byId.values()) {
      if (compiled.matches(this.meta(pos) ?? {})) {
        bits[pos] = 1;
        labels.push(pos);
      }
    }
    const match = { bits, labels, count: labels.length };
    if (this.filterCache.size >= 16) this.filterCache.delete(this.filterCache.keys().next().value!);
    this.filterCache.set(filter, { version: this.version, match });
    return match;
  }

  /** Labels accepted by a filter match and not excluded (by id). */
  acceptor(match?: FilterMatch, exclude?: Set<string>): ((label: number) => boolean) | undefined {
    if (!match && !exclude?.size) return undefined;
    const bits = match?.bits;
    const ids = this.ids;
    return (label) => (!bits || bits[label] === 1) && (!exclude || !exclude.has(ids[label]!));
  }

  /**
   * Dense top `k` accepted records for `q` with final scores, best first. Unfiltered: HNSW (plus
   * the exact scan of pending points, dense.ts). Filtered, the cheaper of two paths by the graph's
   * measured costs (`SearchCosts` in dense.ts):
   * - exact: scan the matches' float32 vectors in the graph (`exact`); cost ∝ matches × dimension;
   * - post-filter: an unfiltered HNSW search for `POST_FILTER_FACTOR × k / selectivity` neighbours
   *   (search breadth {@link postFilterEf}), keeping the accepted ones; cost ∝ breadth × dimension. When it yields fewer than k,
   *   once more at twice the breadth, then (matches clustered away from the query) HNSW with the
   *   filter as callback, then exact.
   * Never fewer than k results when at least k records qualify. An index without a graph
   * (`"quantization": "int8"`, {@link QuantizedDense}) takes the exact path for every query.
   */
  denseCandidates(q: ArrayLike<number>, k: number, efSearch: number, match: FilterMatch | undefined, exclude: Set<string> | undefined, exact: ExactSearch, score: DistanceScorer): Scored[] {
    const g = this.dense;
    if (!g || g.size === 0 || k <= 0) return [];
    const accept = this.acceptor(match, exclude);
    const excluded = exclude?.size ?? 0;
    const eligible = Math.max(0, (match ? match.count : g.size) - excluded);
    const want = Math.min(k, eligible);
    if (want === 0) return [];
    const ef = Math.max(efSearch, want);
    if (g instanceof QuantizedDense && !accept) return exact(g.liveLabels(), want);
    if (!accept) return score(g.search(q, want, undefined, ef));
    const pool = () => {
      if (match && !exclude?.size) return this.scanList(g, match);
      const all = match ? match.labels : g.labels();
      const out: number[] = [];
      for (const l of all) if (accept(l)) out.push(l);
      return g.live(out);
    };
    if (g instanceof QuantizedDense) return exact(pool(), want);
    const selectivity = Math.max(eligible, 1) / g.size;
    const breadth = Math.ceil((POST_FILTER_FACTOR * want) / selectivity) + excluded;
    const postCost = breadth <= MAX_EF ? g.costs.hnswNs * postFilterEf(ef, breadth) : Infinity;
    const exactCost = g.scanCost(match ? match.count : g.size);
    // Costs are learnt only on the path taken: when the two estimates are within 2× of each
    // other, every EXPLORE_EVERY-th such query takes the other path so both stay measured.
    let takeExact = exactCost <= postCost;
    if (Math.max(exactCost, postCost) < 2 * Math.min(exactCost, postCost) && ++this.closeCalls % EXPLORE_EVERY === 0) takeExact = !takeExact;
    if (takeExact) return exact(pool(), want);
    // Post-filter; one retry at twice the breadth (cheaper than the callback traversal) when the
    // first keeps too few.
    for (let b = breadth; b <= MAX_EF && b <= 2 * breadth; b *= 2) {
      const wide = g.search(q, b, undefined, Math.min(postFilterEf(ef, b), MAX_EF));
      const kept = wide.filter((h) => accept(h.label));
      if (kept.length >= want) return score(kept.slice(0, want));
      if (wide.length < b) break; // the whole graph was returned
    }
    const found = g.search(q, want, accept, Math.min(Math.max(ef, want + excluded), MAX_EF));
    if (found.length >= want) return score(found);
    return exact(pool(), want);
  }

  /**
   * The matches of `match` that are live points of graph `g` (what its exact scan takes), kept on
   * the match (itself cached per namespace version) while the graph's live set is unchanged: the
   * list is built once per filter and write, not per query.
   */
  private scanList(g: NamespaceDense, match: FilterMatch): Int32Array {
    const s = match.scan;
    if (s && s.graph === g && s.epoch === g.liveEpoch) return s.list;
    const list = g.live(match.labels);
    match.scan = { graph: g, epoch: g.liveEpoch, list };
    return list;
  }

  /** Sparse top `k` (exact), filtered. */
  sparseSearch(q: SparseVector, k: number, useIdf: boolean, match?: FilterMatch, exclude?: Set<string>): Scored[] {
    if (!this.sparse || k <= 0) return [];
    return this.sparse.search(q, k, useIdf, this.acceptor(match, exclude));
  }

  /** A random live label, or undefined when empty. */
  randomLabel(): number | undefined {
    if (this.byId.size === 0) return undefined;
    for (let i = 0; i < 64; i++) {
      const p = Math.floor(Math.random() * this.ids.length);
      if (this.ids[p] !== undefined) return p;
    }
    const n = Math.floor(Math.random() * this.byId.size);
    let i = 0;
    for (const p of this.byId.values()) if (i++ === n) return p;
    return undefined;
  }

  /** Clears all records (reset / before a rebuild). */
  clear(): void {
    this.ids = [];
    this.metas = [];
    this.parsedUpTo = 0;
    this.byId.clear();
    this.dense = undefined;
    this.rebuilding = undefined;
    this.sparse = undefined;
    this.version++;
    this.filterCache.clear();
  }
}

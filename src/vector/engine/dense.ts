/**
 * Dense nearest-neighbour indexes behind one interface: {@link HnswDense}
 * (hnswlib through svc's addon, approximate), {@link QuantizedDense} (8-bit codes, scanned) and
 * {@link FlatDense} (brute force, exact; the recall oracle).
 *
 * Labels are the records' range positions (integers). Vectors are kept in "stored form": unit
 * length for COSINE (so COSINE is inner product on normalized vectors), as
 * given otherwise. Distances: `ip` -> `1 - dot`, `l2` -> squared Euclidean; smaller is nearer.
 * Final scores are computed elsewhere from the original vectors (scores.ts).
 */
import { Graph, type HnswGraph } from './hnswlib.js';
import type { Metric } from '../definitions.js';
import { maxQueryCode, simdKernel, type SimdKernel } from './simd.js';

export interface Neighbor {
  label: number;
  distance: number;
}

export interface DenseIndex {
  readonly dimension: number;
  readonly metric: Metric;
  /** Live (not deleted) points. */
  readonly size: number;
  /** Deleted points still occupying the structure. */
  readonly tombstones: number;
  /** Adds or replaces the point `label` (`v` in original form; normalized here for COSINE). */
  add(label: number, v: ArrayLike<number>): void;
  /** Removes `label` (mark-delete for HNSW); no-op when absent. */
  remove(label: number): void;
  has(label: number): boolean;
  /** The `k` nearest live points accepted by `filter`; `ef` = search breadth (HNSW only). */
  search(q: ArrayLike<number>, k: number, filter?: (label: number) => boolean, ef?: number): Neighbor[];
}

/** hnswlib space for a metric. */
export function spaceOf(metric: Metric): 'ip' | 'l2' {
  return metric === 'EUCLIDEAN' ? 'l2' : 'ip';
}

/** `v` in stored form as a plain array (components in double precision). */
export function storedForm(metric: Metric, v: ArrayLike<number>): number[] {
  return storedFormInto(metric, v, new Array<number>(v.length));
}

/**
 * `v` in stored form written into `out` (the first `out.length` components; a Float32Array, a
 * view into a larger one, or a plain array), without an intermediate array (an `Array.from` of a
 * 768-d vector costs ~35 µs; this ~2 µs). COSINE: divided by its norm (norm and quotients in
 * double precision); otherwise, and for a zero vector, copied.
 */
export function storedFormInto<T extends { length: number; [i: number]: number }>(metric: Metric, v: ArrayLike<number>, out: T): T {
  const d = out.length;
  let n = 0;
  if (metric === 'COSINE') {
    for (let i = 0; i < d; i++) n += v[i] * v[i];
    n = Math.sqrt(n);
  }
  if (n > 0) for (let i = 0; i < d; i++) out[i] = v[i] / n;
  else for (let i = 0; i < d; i++) out[i] = v[i];
  return out;
}

/** Distance between stored-form vectors (see module doc). */
export function distance(space: 'ip' | 'l2', a: ArrayLike<number>, b: ArrayLike<number>): number {
  let s = 0;
  if (space === 'ip') {
    for (let i = 0; i < a.length; i++) s += a[i] * b[i];
    return 1 - s;
  }
  for (let i = 0; i < a.length; i++) {
    const d = a[i] - b[i];
    s += d * d;
  }
  return s;
}

/** The capacity of a per-label array holding `label`: `cap` doubled until it is above `label`. */
function doubledFor(cap: number, label: number): number {
  while (cap <= label) cap *= 2;
  return cap;
}

/** `a` copied into a zeroed byte array of length `cap` (at least `a.length`). */
function grownBytes(a: Uint8Array, cap: number): Uint8Array<ArrayBuffer> {
  const b = new Uint8Array(cap);
  b.set(a);
  return b;
}

/**
 * Past this many results, {@link mergePending} sorts once instead of inserting: an insertion
 * shifts up to `n` entries, so m insertions cost O(m·n) (a `topK` of 10^9 on an index with 50,000
 * pending points held the event loop for about a minute).
 */
const INSERT_MAX = 256;

/**
 * Merges candidates into `best` (sorted ascending): keeps the `n` nearest of both. `each` calls
 * its argument once per candidate. Up to {@link INSERT_MAX} results by insertion
 * ({@link pushBounded}, nothing allocated for a candidate not kept), else by one sort.
 */
function mergePending(best: Neighbor[], n: number, each: (add: (label: number, dist: number) => void) => void): Neighbor[] {
  if (n <= INSERT_MAX) {
    each((label, dist) => pushBounded(best, n, label, dist));
    return best;
  }
  each((label, distance) => best.push({ label, distance }));
  best.sort((a, b) => a.distance - b.distance);
  if (best.length > n) best.length = n;
  return best;
}

/**
 * Adds `{label, distance}` to `best` (sorted ascending, at most `n` long) when it is among the `n`
 * nearest so far (insertion into a sorted array: n is small). Allocates only for entries kept.
 */
function pushBounded(best: Neighbor[], n: number, label: number, dist: number): void {
  if (n <= 0 || (best.length === n && dist >= best[n - 1].distance)) return;
  let j = best.length - 1;
  if (best.length < n) best.push({ label, distance: dist });
  else j = n - 2;
  while (j >= 0 && best[j].distance > dist) {
    best[j + 1] = best[j];
    j--;
  }
  best[j + 1] = { label, distance: dist };
}

/** Keeps the k smallest by distance (k small: insertion into a sorted array). */
function topK(items: Iterable<Neighbor>, k: number): Neighbor[] {
  const out: Neighbor[] = [];
  for (const it of items) {
    if (out.length === k && it.distance >= out[k - 1].distance) continue;
    let i = out.length - 1;
    if (out.length < k) out.push(it);
    else i = k - 2;
    while (i >= 0 && out[i].distance > it.distance) {
      out[i + 1] = out[i];
      i--;
    }
    out[i + 1] = it;
  }
  return out;
}

export interface HnswParams {
  m: number;
  efConstruction: number;
  efSearch: number;
}

/**
 * Codes of namespaces at least this large (capacity × stride bytes) live in WebAssembly memory
 * and are scanned by the SIMD kernel (`simd.ts`); smaller ones stay in a JavaScript array (a
 * WebAssembly memory reserves address space of its own, not worth it for a few thousand vectors).
 * 1 MiB = 8,192 vectors at 128-d, 1,365 at 768-d. When no WebAssembly memory can be had (no SIMD
 * support, address space exhausted by very many large namespaces) the codes stay in JavaScript.
 */
export const SIMD_MIN_BYTES = 1 << 20;

/**
 * 8-bit codes of stored-form vectors, one byte per dimension plus a per-vector scale (max |x| / 127)
 * and squared norm: the vectors of an index without a graph ({@link QuantizedDense},
 * `"quantization": "int8"`), 0.25× the memory of float32; ranking from the codes is approximate,
 * so callers re-rank a few more candidates than they return on the original vectors
 * (`query/execute.ts`). Each vector takes `stride` bytes (the
 * dimension rounded up to 16, zero-padded) so the SIMD kernel reads whole 16-byte lanes. Grows by
 * doubling with the largest label. With the SIMD kernel, codes, scales and norms all live in its
 * memory (codes at 0, then the scales, then the norms, then the scratch space of {@link select}).
 */
export class QuantizedVectors {
  codes!: Int8Array;
  scale!: Float32Array;
  norm2!: Float32Array;
  /** Bytes per vector in {@link codes}: the dimension rounded up to a multiple of 16. */
  readonly stride: number;
  /** The SIMD kernel whose memory holds {@link codes} (large namespaces), if any. */
  private kernel: SimdKernel | undefined;
  private cap = 0;

  constructor(readonly dimension: number, initial = 1024) {
    this.stride = Math.ceil(dimension / 16) * 16;
    this.resize(initial);
  }

  get capacity(): number {
    return this.cap;
  }

  /** Whether scans run on the SIMD kernel. */
  get simd(): boolean {
    return this.kernel !== undefined;
  }

  /**
   * Storage for `cap` vectors holding the current contents: in the kernel's memory from
   * {@link SIMD_MIN_BYTES} of codes on (when WebAssembly SIMD is available), JavaScript arrays
   * otherwise.
   */
  private resize(cap: number): void {
    const stride = this.stride;
    const had = this.cap;
    // copies first: growing the kernel's memory detaches the old views, and the grown codes overlap the old scales
    const oldCodes = had && !this.kernel ? this.codes : undefined;
    const oldScale = had ? this.scale.slice(0, had) : undefined;
    const oldNorm2 = had ? this.norm2.slice(0, had) : undefined;
    if (!this.kernel && cap * stride >= SIMD_MIN_BYTES) this.kernel = simdKernel(cap * (stride + 8));
    this.cap = cap;
    if (this.kernel) {
      this.reserve(cap * (stride + 8));
      this.view();
      if (oldCodes) this.codes.set(oldCodes);
      this.scale.fill(0);
      this.norm2.fill(0);
    } else {
      this.codes = new Int8Array(cap * stride);
      this.scale = new Float32Array(cap);
      this.norm2 = new Float32Array(cap);
      if (oldCodes) this.codes.set(oldCodes);
    }
    if (oldScale) this.scale.set(oldScale);
    if (oldNorm2) this.norm2.set(oldNorm2);
  }

  /** (Re-)creates the views of codes, scales and norms on the kernel's memory. */
  private view(): void {
    const buf = this.kernel!.memory.buffer;
    const cb = this.cap * this.stride;
    this.codes = new Int8Array(buf, 0, cb);
    this.scale = new Float32Array(buf, cb, this.cap);
    this.norm2 = new Float32Array(buf, cb + this.cap * 4, this.cap);
  }

  /** Grows the kernel's memory to at least `bytes` (growing detaches the old views: callers re-view). */
  private reserve(bytes: number): void {
    const mem = this.kernel!.memory;
    const have = mem.buffer.byteLength;
    if (have < bytes) mem.grow(Math.ceil((bytes - have) / 65536));
  }

  private ensure(label: number): void {
    if (label < this.cap) return;
    this.resize(doubledFor(Math.max(16, this.cap), label));
  }

  /** Stores the codes of `v` (stored form) at `label`. */
  set(label: number, v: ArrayLike<number>): void {
    this.ensure(label);
    const d = this.dimension;
    let max = 0;
    let n2 = 0;
    for (let j = 0; j < d; j++) {
      const x = v[j];
      n2 += x * x;
      if (Math.abs(x) > max) max = Math.abs(x);
    }
    const sc = max > 0 ? max / 127 : 1;
    const o = label * this.stride;
    for (let j = 0; j < d; j++) this.codes[o + j] = Math.round(v[j] / sc);
    this.scale[label] = sc;
    this.norm2[label] = n2;
  }

  /** Approximate dot product of `q` (stored form) with the vector at `label`. */
  dot(q: Float32Array, label: number): number {
    const d = this.dimension;
    const c = this.codes;
    let s = 0;
    for (let j = 0, o = label * this.stride; j < d; j++, o++) s += q[j] * c[o];
    return s * this.scale[label];
  }

  /**
   * Approximate dot products of `q` (stored form, float32) with the vectors at `labels[0..count)`
   * into `out[0..count)`: the SIMD kernel (query as 16-bit integers) when the codes live in its
   * memory, {@link dot} otherwise. Same results within the codes' own rounding.
   */
  dots(q: Float32Array, labels: Int32Array, count: number, out: Float32Array): void {
    if (!this.kernel) {
      for (let i = 0; i < count; i++) out[i] = this.dot(q, labels[i]);
      return;
    }
    const r = this.select(q, labels, count, 1, 0, Infinity);
    for (let i = 0; i < count; i++) out[i] = r.keys[i];
  }

  /**
   * The entries of `labels[0..count)` whose key `dot(q, v) · mul + |v|² · addNorm` (approximate,
   * from the codes) is below `threshold`, in input order: `labels[i]` / `keys[i]` for i < `n`. On
   * the SIMD kernel when the codes live in its memory (the returned arrays are then views into its
   * memory, valid until the next call), a JavaScript loop otherwise.
   */
  select(q: Float32Array, labels: Int32Array, count: number, mul: number, addNorm: number, threshold: number): { labels: Int32Array; keys: Float32Array; n: number } {
    const k = this.kernel;
    if (!k) {
      const outL = new Int32Array(count);
      const outK = new Float32Array(count);
      let n = 0;
      for (let i = 0; i < count; i++) {
        const l = labels[i];
        const key = this.dot(q, l) * mul + this.norm2[l] * addNorm;
        if (key < threshold) {
          outL[n] = l;
          outK[n++] = key;
        }
      }
      return { labels: outL.subarray(0, n), keys: outK.subarray(0, n), n };
    }
    const stride = this.stride;
    const cap = this.cap;
    const sOff = cap * stride;
    const nOff = sOff + cap * 4;
    const qOff = nOff + cap * 4;
    const lOff = qOff + stride * 2;
    const olOff = lOff + count * 4;
    const okOff = olOff + count * 4;
    const end = okOff + count * 4;
    if (k.memory.buffer.byteLength < end) {
      this.reserve(end);
      this.view();
    }
    const buf = k.memory.buffer;
    let max = 0;
    for (let j = 0; j < this.dimension; j++) max = Math.max(max, Math.abs(q[j]));
    const qs = max > 0 ? max / maxQueryCode(stride) : 1;
    const qi = new Int16Array(buf, qOff, stride);
    for (let j = 0; j < this.dimension; j++) qi[j] = Math.round(q[j] / qs);
    qi.fill(0, this.dimension);
    new Int32Array(buf, lOff, count).set(count === labels.length ? labels : labels.subarray(0, count));
    const n = k.scan(0, qOff, stride / 16, stride, lOff, count, sOff, nOff, mul * qs, addNorm, threshold, olOff, okOff);
    return { labels: new Int32Array(buf, olOff, n), keys: new Float32Array(buf, okOff, n), n };
  }

  /** Bytes of the three arrays up to `labels` entries (snapshot file body). */
  serialize(labels: number): Buffer[] {
    const n = Math.min(labels, this.capacity);
    return [
      Buffer.from(this.codes.buffer, this.codes.byteOffset, n * this.stride),
      Buffer.from(this.scale.buffer, this.scale.byteOffset, n * 4),
      Buffer.from(this.norm2.buffer, this.norm2.byteOffset, n * 4),
    ];
  }

  /** Inverse of {@link serialize} for `labels` entries. @throws Error when the size does not match. */
  static deserialize(buf: Buffer, dimension: number, labels: number): QuantizedVectors {
    const q = new QuantizedVectors(dimension, Math.max(16, labels));
    const stride = q.stride;
    if (buf.byteLength !== labels * (stride + 8)) throw new Error('vector codes: size mismatch');
    q.codes.set(new Int8Array(buf.buffer, buf.byteOffset, labels * stride));
    new Uint8Array(q.scale.buffer, q.scale.byteOffset, labels * 4).set(buf.subarray(labels * stride, labels * (stride + 4)));
    new Uint8Array(q.norm2.buffer, q.norm2.byteOffset, labels * 4).set(buf.subarray(labels * (stride + 4)));
    return q;
  }
}

/**
 * Measured costs of an HNSW namespace's search paths (exponentially weighted means, updated by
 * every search): nanoseconds per (candidate × dimension) of the exact scan over the graph's own
 * float32 vectors (`graphScanNs`) and per (ef × dimension) of an HNSW search (`hnswNs`).
 * Filtered queries pick the cheaper path from these (namespace.ts, via `scanCost`); the start
 * values are this 2-core machine's at 128-d.
 */
export interface SearchCosts {
  graphScanNs: number;
  hnswNs: number;
}

/**
 * Measured cost of an exact scan over 8-bit codes (as {@link SearchCosts}): in JavaScript
 * (`scanNs`) or on the SIMD kernel (`simdScanNs`, large namespaces).
 */
export interface CodeScanCosts {
  scanNs: number;
  simdScanNs: number;
}

/**
 * The exact scan over the 8-bit codes of a {@link QuantizedDense}, with its buffers. Large lists
 * take two passes of {@link QuantizedVectors.select} (the SIMD kernel for large namespaces): one over an evenly spaced sample of √(count·n) labels, whose n-th best key becomes
 * the threshold of the pass over all of them; only the few labels under it (about count·n / sample)
 * come back to JavaScript, where the best `n` are kept. A sample that is unrepresentative only lets
 * more labels through: the result is the same.
 */
class CodeScanner {
  private query: Float32Array | undefined;
  private sample = new Int32Array(0);
  private bestDist = new Float64Array(0);
  private bestLabel = new Int32Array(0);

  /**
   * The `n` best of `labels[0..count)` (all live) ranked by `codes`, nearest first, with
   * approximate distances in the graph's terms (`ip` 1 − dot, `l2` squared Euclidean); updates the
   * scan cost in `costs` (lists of 256 or more).
   */
  scan(codes: QuantizedVectors, metric: Metric, costs: CodeScanCosts, q: ArrayLike<number>, n: number, labels: Int32Array, count = labels.length): Neighbor[] {
    const d = codes.dimension;
    if (this.query?.length !== d) this.query = new Float32Array(d);
    const sq = this.query;
    storedFormInto(metric, q, sq);
    n = Math.min(n, count);
    if (n <= 0) return [];
    const t0 = performance.now();
    // key = mul·dot + addNorm·|v|²; distance = base + key (`ip` 1 − dot, `l2` |q|² − 2·dot + |v|²)
    const ip = spaceOf(metric) === 'ip';
    let base = 1;
    if (!ip) {
      base = 0;
      for (let j = 0; j < d; j++) base += sq[j] * sq[j];
    }
    const mul = ip ? -1 : -2;
    const addNorm = ip ? 0 : 1;
    let threshold = Infinity;
    const s = Math.max(4 * n, Math.ceil(Math.sqrt(count * n)));
    if (count >= 4 * s) {
      if (this.sample.length < s) this.sample = new Int32Array(s);
      const step = count / s;
      for (let i = 0; i < s; i++) this.sample[i] = labels[Math.floor(i * step)];
      const r = codes.select(sq, this.sample, s, mul, addNorm, Infinity);
      this.keepBest(r.labels, r.keys, r.n, n);
      // strictly above the sample's n-th best key: at least n labels pass
      const nth = this.bestDist[n - 1];
      threshold = nth + Math.abs(nth) * 1e-6 + 1e-30;
    }
    const r = codes.select(sq, labels, count, mul, addNorm, threshold);
    const kept = this.keepBest(r.labels, r.keys, r.n, n);
    if (count >= 256) {
      const c = costs;
      const ns = ((performance.now() - t0) * 1e6) / (count * d);
      if (codes.simd) c.simdScanNs = movedMean(c.simdScanNs, ns);
      else c.scanNs = movedMean(c.scanNs, ns);
    }
    const out: Neighbor[] = new Array(kept);
    for (let i = 0; i < kept; i++) out[i] = { label: this.bestLabel[i], distance: base + this.bestDist[i] };
    return out;
  }

  /**
   * Keeps the `n` smallest of `keys[0..m)` (with their labels) sorted ascending in
   * {@link bestDist} / {@link bestLabel}; returns how many (min(n, m)). By insertion up to
   * {@link INSERT_MAX}, else by one sort (insertions would cost O(m·n)).
   */
  private keepBest(labels: Int32Array, keys: Float32Array, m: number, n: number): number {
    if (this.bestDist.length < n) {
      this.bestDist = new Float64Array(n);
      this.bestLabel = new Int32Array(n);
    }
    const bd = this.bestDist;
    const bl = this.bestLabel;
    if (n > INSERT_MAX) {
      // one stable sort (equal keys keep their order, as the insertion below keeps them)
      const order = Array.from({ length: m }, (_, i) => i).sort((a, b) => keys[a] - keys[b]);
      const k = Math.min(n, m);
      for (let i = 0; i < k; i++) {
        bd[i] = keys[order[i]];
        bl[i] = labels[order[i]];
      }
      return k;
    }
    let kept = 0;
    let worst = Infinity;
    for (let i = 0; i < m; i++) {
      const key = keys[i];
      if (key >= worst) continue;
      let j = kept < n ? kept++ : n - 1;
      while (j > 0 && bd[j - 1] > key) {
        bd[j] = bd[j - 1];
        bl[j] = bl[j - 1];
        j--;
      }
      bd[j] = key;
      bl[j] = labels[i];
      if (kept === n) worst = bd[n - 1];
    }
    return kept;
  }
}

/**
 * A cost mean moved 5 % towards a new sample, the sample limited to twice the mean: the costs are
 * wall-clock times, and a search the scheduler interrupted (busy machine) would otherwise swing
 * the mean, and with it the filtered-query path, by one outlier. A real change still moves the
 * mean (by up to 5 % per sample).
 */
function movedMean(mean: number, sample: number): number {
  return mean + 0.05 * (Math.min(sample, 2 * mean) - mean);
}

/**
 * Factor by which a full graph's capacity grows. hnswlib touches a mutex (40 B), a level (4 B) and
 * a visited mark (2 B) for every slot of its capacity at a resize, not only for the points it
 * holds, and frees the old arrays at every resize: doubling left up to half of them unused (150k
 * × 128 built one by one: the process grew by 108 MB with doubling, 95 MB with this factor; raw
 * 93 MB). Resizing reallocates the level-0 block (`realloc`: untouched pages cost nothing) and
 * rebuilds those arrays, O(capacity) each time, so growth stays geometric.
 */
export const GRAPH_GROWTH = 1.25;

/** `performance.now()` of the last {@link HnswDense.search} in this process. */
let lastGraphSearch = -Infinity;

/** True when some HNSW graph of this process was searched within the last `ms` milliseconds. */
export function graphSearchedWithin(ms: number): boolean {
  return performance.now() - lastGraphSearch < ms;
}

/** Graph state of a label: absent, current, stale (an older vector; re-inserted later), deleted. */
const ABSENT = 0;
const CURRENT = 1;
const STALE = 2;
const DELETED = 3;

/**
 * HNSW graph (svc's hnswlib addon, `hnswlib.ts`) plus a queue of points not yet inserted
 * ("pending"). The graph holds each inserted vector once, in float32 stored form: the exact scan
 * of filtered queries ({@link scan}) reads them there, so no second copy is kept. {@link add}
 * inserts at once; {@link enqueue} only stores the vector, so a write can be acknowledged without
 * paying the insertion (about 0.5 ms at 768-d), and {@link indexBatch} inserts queued points later
 * on the addon's own threads, in parallel and off the event loop ({@link indexPending}: on the calling thread). Searches see
 * pending points at once — those of a batch being inserted too — : they are scanned exactly
 * (float32, stored form) next to the graph search, and a graph hit whose vector was replaced since
 * (a pending update), or that a running batch is inserting, is dropped in favour of the scan.
 * While a batch runs, every other use of the graph pauses its threads for the rest of the event
 * loop's turn ({@link graph}): hnswlib allows no read during an insertion.
 */
export class HnswDense implements DenseIndex {
  readonly index: HnswGraph;
  readonly costs: SearchCosts = { graphScanNs: 0.4, hnswNs: 12 };
  private bits = new Uint8Array(1024);
  private state = new Uint8Array(1024);
  private liveCount = 0;
  private readonly space: 'ip' | 'l2';
  private dead = 0;
  private staleCount = 0;
  /**
   * Pending points: slot of the stored-form vector in {@link slab} and the write's sequence number,
   * by label. One slab with a free list instead of an ArrayBuffer per point: per-record native
   * buffers fragment the malloc heap during bulk upserts.
   */
  private readonly pendingVecs = new Map<number, { slot: number; seq: number }>();
  private slab: Float32Array;
  private freeSlots: number[] = [];
  private slots = 0;
  /** Conversion buffer of one vector (stored form). */
  private readonly scratch: Float32Array;
  /** Query in stored form (reused). */
  private readonly query: Float32Array;
  /** Bumped whenever a label becomes live or is removed (validity of {@link live} lists). */
  private epoch = 0;
  /** Insertion order of pending points (entries whose label was re-queued or removed are skipped). */
  private queue: { label: number; seq: number }[] = [];
  private head = 0;
  /**
   * Snapshot writes reading this graph on libuv's thread pool (snapshot.ts `writeSnapshotAsync`):
   * while above 0 nothing is inserted ({@link indexPending} and {@link indexBatch} insert nothing,
   * {@link add} throws), so the file is one consistent graph. Searches, {@link enqueue} and
   * {@link remove} (a mark-delete flag, re-derived from the records at load) go on meanwhile.
   */
  saving = 0;
  /** The running batch insertion ({@link indexBatch}): its points (queue entries) and its promise. */
  private batch: { entries: { label: number; seq: number }[]; done: Promise<void> } | undefined;
  /** The batch's threads are paused until the JavaScript running now ends ({@link graph}). */
  private paused = false;
  /** Arguments of {@link indexBatch} (the addon copies them), kept between batches. */
  private batchLabels = new Uint32Array(0);
  private batchVectors = new Float32Array(0);

  constructor(readonly dimension: number, readonly metric: Metric, readonly params: HnswParams, initial = 1024) {
    this.space = spaceOf(metric);
    this.index = new Graph(this.space, dimension);
    this.index.initIndex(Math.max(16, initial), params.m, params.efConstruction, 100);
    this.slab = new Float32Array(64 * dimension);
    this.scratch = new Float32Array(dimension);
    this.query = new Float32Array(dimension);
  }

  /**
   * The graph, ready for a read or a single-point change on this thread: when a batch insertion
   * runs, its threads are paused (after the insertions under way end) until the JavaScript running
   * now returns to the event loop (a microtask resumes them), so every use within one synchronous
   * run — a query, the deletes of one request — shares one pause, and the threads insert again
   * while the event loop waits for I/O or runs anything else.
   */
  private graph(): HnswGraph {
    if (this.batch && !this.paused) {
      this.index.pause();
      this.paused = true;
      queueMicrotask(() => {
        if (!this.paused) return; // a new batch started since (it starts unpaused)
        this.paused = false;
        this.index.resume();
      });
    }
    return this.index;
  }

  /** The stored-form vector of a pending slot (a view into the slab). */
  private slotView(slot: number): Float32Array {
    return this.slab.subarray(slot * this.dimension, (slot + 1) * this.dimension);
  }

  private takeSlot(): number {
    const free = this.freeSlots.pop();
    if (free !== undefined) return free;
    if ((this.slots + 1) * this.dimension > this.slab.length) {
      const grown = new Float32Array(this.slab.length * 2);
      grown.set(this.slab);
      this.slab = grown;
    }
    return this.slots++;
  }

  private releaseSlot(label: number): void {
    const p = this.pendingVecs.get(label);
    if (!p) return;
    this.freeSlots.push(p.slot);
    this.pendingVecs.delete(label);
    if (this.pendingVecs.size === 0 && this.slots > 64) {
      // Queue drained after a burst: give the slab back.
      this.slab = new Float32Array(64 * this.dimension);
      this.freeSlots = [];
      this.slots = 0;
    }
  }

  /**
   * Loads a graph written by `writeIndexSync` (every label in the graph counts as live and current
   * until removed or re-queued).
   */
  static load(file: string, dimension: number, metric: Metric, params: HnswParams): HnswDense {
    const h = new HnswDense(dimension, metric, params, 16);
    h.index.readIndexSync(file);
    return h.adopt();
  }

  /**
   * {@link load} with the file read on libuv's thread pool (`readIndex`): the event loop stays
   * free meanwhile (start-up reads SQLite in parallel). Returns a function that completes the
   * graph (call it only once the file is verified). @throws (rejects) when hnswlib cannot read the file.
   */
  static async read(file: string, dimension: number, metric: Metric, params: HnswParams): Promise<() => HnswDense> {
    const h = new HnswDense(dimension, metric, params, 16);
    await h.index.readIndex(file);
    return () => h.adopt();
  }

  /** Marks every label of the loaded graph live and current. */
  private adopt(): HnswDense {
    const ids = this.index.getIdsList();
    let max = -1;
    for (const label of ids) if (label > max) max = label;
    if (max >= 0) this.mark(max); // sizes the arrays once
    for (const label of ids) {
      this.mark(label);
      this.state[label] = CURRENT;
    }
    return this;
  }

  private mark(label: number): void {
    if (label >= this.bits.length) {
      const cap = doubledFor(this.bits.length, label);
      this.bits = grownBytes(this.bits, cap);
      this.state = grownBytes(this.state, cap);
    }
    if (!this.bits[label]) {
      this.bits[label] = 1;
      this.liveCount++;
      this.epoch++;
    }
  }

  get size(): number {
    return this.liveCount;
  }
  get tombstones(): number {
    return this.dead;
  }
  /** Changes whenever a label becomes live or is removed: a {@link live} list stays valid while it does not. */
  get liveEpoch(): number {
    return this.epoch;
  }
  /** Live points not yet inserted into the graph. */
  get pending(): number {
    return this.pendingVecs.size;
  }
  /**
   * Sequence number up to which the graph holds every write: one less than the oldest pending
   * point's (a running batch's included), or `current` when nothing is pending (snapshot header).
   */
  coveredSeq(current: number): number {
    let oldest = current + 1;
    for (const e of this.batch?.entries ?? []) if (e.seq < oldest && this.pendingVecs.get(e.label)?.seq === e.seq) oldest = e.seq;
    for (let i = this.head; i < this.queue.length; i++) {
      const e = this.queue[i];
      if (this.pendingVecs.get(e.label)?.seq === e.seq) {
        oldest = Math.min(oldest, e.seq);
        break;
      }
    }
    return oldest - 1;
  }
  *labels(): Generator<number> {
    const b = this.bits;
    for (let i = 0; i < b.length; i++) if (b[i]) yield i;
  }

  /** Marks `label` live with stored-form vector `v`; returns `v` in stored form (scratch buffer). */
  private store(label: number, v: ArrayLike<number>): Float32Array {
    const stored = storedFormInto(this.metric, v, this.scratch);
    this.mark(label);
    if (this.state[label] === CURRENT) {
      this.state[label] = STALE;
      this.staleCount++;
    }
    return stored;
  }

  /** Grows the graph's capacity (by {@link GRAPH_GROWTH} at least) for `more` points new to it. No batch may run. */
  private reserve(more: number): void {
    const cap = this.index.getMaxElements();
    const need = this.index.getCurrentCount() + more;
    if (need > cap) this.index.resizeIndex(Math.max(need, Math.ceil(cap * GRAPH_GROWTH)));
  }

  /** The graph now holds `label`'s current vector: its state and the pending queue say so. */
  private inserted(label: number): void {
    const st = this.state[label];
    if (st === STALE) this.staleCount--;
    if (st === DELETED) this.dead--;
    this.state[label] = CURRENT;
    this.releaseSlot(label);
  }

  private insert(label: number, stored: Float32Array): void {
    if (this.batch) throw new Error('HNSW graph: single insertion while a batch insertion runs');
    if (this.state[label] === ABSENT) this.reserve(1);
    this.index.addPoint(stored, label);
    this.inserted(label);
  }

  /** Adds or replaces `label` and inserts it into the graph now. @throws while a snapshot reads the graph or a batch runs. */
  add(label: number, v: ArrayLike<number>): void {
    if (this.saving > 0) throw new Error('HNSW graph: insertion while a snapshot reads it');
    this.insert(label, this.store(label, v));
  }

  /**
   * Adds or replaces the distinct `labels[i]` with `vectors[i]` and inserts them into the graph
   * now, on `threads` threads of the addon's own, blocking this thread until all are in (a
   * rebuild at start-up, before anything is served). @throws while a snapshot reads the graph or
   * a batch runs; hnswlib's first insertion error (out of memory).
   */
  addAll(labels: number[], vectors: ArrayLike<number>[], threads: number): void {
    if (this.saving > 0 || this.batch) throw new Error('HNSW graph: insertion while a snapshot reads it or a batch runs');
    const d = this.dimension;
    const buf = new Float32Array(labels.length * d);
    let fresh = 0;
    labels.forEach((label, i) => {
      buf.set(this.store(label, vectors[i]), i * d);
      if (this.state[label] === ABSENT) fresh++;
    });
    this.reserve(fresh);
    this.index.addPointsSync(buf, Uint32Array.from(labels), threads);
    for (const label of labels) this.inserted(label);
  }

  /** Adds or replaces `label`, searchable at once; graph insertion waits for {@link indexPending}. */
  enqueue(label: number, v: ArrayLike<number>, seq: number): void {
    const stored = this.store(label, v);
    const p = this.pendingVecs.get(label);
    const slot = p ? p.slot : this.takeSlot();
    this.slotView(slot).set(stored);
    this.pendingVecs.set(label, { slot, seq });
    this.queue.push({ label, seq });
  }

  /**
   * Inserts queued points into the graph on this thread, oldest first, until the queue is empty or
   * `performance.now()` passes `deadline` (at least one point per call); nothing while a snapshot
   * reads the graph ({@link saving}) or a batch runs ({@link idle} first). Returns the number inserted.
   */
  indexPending(deadline = Infinity): number {
    if (this.saving > 0 || this.batch) return 0;
    let n = 0;
    while (this.head < this.queue.length) {
      const e = this.queue[this.head++];
      const p = this.pendingVecs.get(e.label);
      if (!p || p.seq !== e.seq) continue;
      this.insert(e.label, this.slotView(p.slot));
      n++;
      if (performance.now() >= deadline) break;
    }
    this.compactQueue();
    return n;
  }

  /** True when queued points could go into the graph now: no snapshot reads it, no batch runs. */
  get insertable(): boolean {
    return this.saving === 0 && !this.batch && this.head < this.queue.length;
  }

  /** True while a batch insertion ({@link indexBatch}) runs. */
  get inserting(): boolean {
    return this.batch !== undefined;
  }

  /** Resolves once no batch insertion runs (at once when none does). */
  async idle(): Promise<void> {
    while (this.batch) await this.batch.done.catch(() => undefined);
  }

  /**
   * Starts inserting the queued points, oldest first, up to `maxElements` vector elements (at
   * least one point), on `threads` threads of the addon's own, off the event loop; undefined when
   * nothing can start ({@link insertable} is false). The points stay pending — scanned exactly by
   * searches, their graph hits dropped — until the returned promise settles: then each is current
   * in the graph, unless it was written again meanwhile (the graph holds the older vector: stale,
   * queued again) or removed (mark-deleted now). Rejects with hnswlib's error (out of memory); its
   * points are queued again.
   */
  indexBatch(maxElements: number, threads: number): Promise<void> | undefined {
    if (!this.insertable) return undefined;
    const entries: { label: number; seq: number }[] = [];
    let fresh = 0;
    while (this.head < this.queue.length && (entries.length === 0 || (entries.length + 1) * this.dimension <= maxElements)) {
      const e = this.queue[this.head++];
      if (this.pendingVecs.get(e.label)?.seq !== e.seq) continue;
      entries.push(e);
      if (this.state[e.label] === ABSENT) fresh++;
    }
    this.compactQueue();
    if (entries.length === 0) return undefined;
    this.reserve(fresh);
    const d = this.dimension;
    if (this.batchLabels.length < entries.length) {
      this.batchLabels = new Uint32Array(entries.length);
      this.batchVectors = new Float32Array(entries.length * d);
    }
    entries.forEach((e, i) => {
      this.batchVectors.set(this.slotView(this.pendingVecs.get(e.label)!.slot), i * d);
      this.batchLabels[i] = e.label;
    });
    this.paused = false;
    const done = this.index.addPoints(this.batchVectors.subarray(0, entries.length * d), this.batchLabels.subarray(0, entries.length), threads).then(
      () => {
        this.batch = undefined;
        for (const e of entries) this.batchInserted(e);
        if (this.head >= this.queue.length) {
          // the burst is over: no copies kept for a next batch
          this.batchLabels = new Uint32Array(0);
          this.batchVectors = new Float32Array(0);
          this.index.releaseBatchBuffers();
        }
      },
      (err: unknown) => {
        this.batch = undefined;
        for (const e of entries) if (this.pendingVecs.get(e.label)?.seq === e.seq) this.queue.push(e);
        throw err;
      },
    );
    this.batch = { entries, done };
    return done;
  }

  /** Settles a point of a finished batch (see {@link indexBatch}). */
  private batchInserted(e: { label: number; seq: number }): void {
    const label = e.label;
    if (this.pendingVecs.get(label)?.seq === e.seq) return this.inserted(label);
    const st = this.state[label];
    if (this.has(label)) {
      // written again meanwhile: the graph holds the older vector until the newer one goes in
      if (st === ABSENT || st === DELETED) {
        if (st === DELETED) this.dead--;
        this.state[label] = STALE;
        this.staleCount++;
      }
      return;
    }
    // removed meanwhile (inserting a label hnswlib had mark-deleted also clears the mark)
    try {
      this.index.markDelete(label);
    } catch {
      /* not in the graph */
    }
    if (st !== DELETED) {
      if (st === STALE) this.staleCount--;
      this.state[label] = DELETED;
      this.dead++;
    }
  }

  /** Drops consumed entries from the head of the insertion queue. */
  private compactQueue(): void {
    if (this.head >= this.queue.length) {
      this.queue = [];
      this.head = 0;
    } else if (this.head > 4096 && this.head * 2 > this.queue.length) {
      this.queue = this.queue.slice(this.head);
      this.head = 0;
    }
  }

  remove(label: number): void {
    if (!this.has(label)) return;
    this.bits[label] = 0;
    this.liveCount--;
    this.epoch++;
    this.releaseSlot(label);
    const st = this.state[label];
    if (st === CURRENT || st === STALE) {
      try {
        this.graph().markDelete(label);
      } catch {
        /* already deleted in a loaded snapshot */
      }
      if (st === STALE) this.staleCount--;
      this.state[label] = DELETED;
      this.dead++;
    }
  }

  has(label: number): boolean {
    return label < this.bits.length && this.bits[label] === 1;
  }

  /**
   * The `k` nearest live points accepted by `filter`: the graph search (breadth
   * `max(efSearch, ef, k)`; an exact scan of the graph's points when it holds no more than that)
   * merged with an exact scan of the pending points. Distances are float32 stored-form distances
   * in both cases.
   */
  search(q: ArrayLike<number>, k: number, filter?: (label: number) => boolean, ef?: number): Neighbor[] {
    lastGraphSearch = performance.now();
    if (this.liveCount === 0 || k <= 0) return [];
    const sq = storedFormInto(this.metric, q, this.query);
    const graphLive = this.liveCount - this.pendingVecs.size;
    let out: Neighbor[] = [];
    if (graphLive > 0) {
      // Graph points that are not current — stale ones (pending updates) and those a running batch
      // is inserting (still pending) — are skipped: by the filter callback when there is one or
      // many of them, otherwise by asking for that many more results.
      const state = this.state;
      const hidden = this.staleCount + (this.batch?.entries.length ?? 0);
      const skipHidden = !filter && hidden > 0 && hidden <= 64;
      const kk = Math.min(k, graphLive) + (skipHidden ? hidden : 0);
      const want = Math.max(this.params.efSearch, ef ?? 0, kk);
      const accept = filter ? (l: number) => state[l] === CURRENT && filter(l) : hidden > 64 ? (l: number) => state[l] === CURRENT : undefined;
      const graph = this.graph();
      let r: { neighbors: Uint32Array; distances: Float32Array };
      if (graph.getCurrentCount() <= want) {
        // A graph no larger than the search breadth is scanned exactly: the search would visit
        // about every point anyway, and HNSW's neighbour selection can leave a point among equal
        // vectors unreachable, so the approximate search may miss one that the scan finds.
        const ids = graph.getIdsList();
        const labels = new Int32Array(ids.buffer, ids.byteOffset, ids.length);
        let n = 0;
        for (let i = 0; i < labels.length; i++) if (state[labels[i]] === CURRENT && (!filter || filter(labels[i]))) labels[n++] = labels[i];
        r = graph.exactKnn(sq, labels, n, Math.min(k, n), state);
      } else {
        const t0 = performance.now();
        r = graph.searchKnn(sq, Math.min(kk, graph.getCurrentCount()), want, accept);
        if (!accept) this.costs.hnswNs = movedMean(this.costs.hnswNs, ((performance.now() - t0) * 1e6) / (want * this.dimension));
      }
      for (let i = 0; i < r.neighbors.length; i++) {
        const label = r.neighbors[i];
        if (state[label] === CURRENT) out.push({ label, distance: r.distances[i] });
      }
    }
    out.sort((a, b) => a.distance - b.distance);
    if (out.length > k) out = out.slice(0, k);
    if (this.pendingVecs.size > 0) {
      out = mergePending(out, k, (add) => {
        for (const [label, p] of this.pendingVecs) if (!filter || filter(label)) add(label, this.slotDistance(sq, p.slot));
      });
    }
    return out;
  }

  /**
   * The `n` nearest of `labels[0..count)` by exact float32 stored-form distance (as {@link search}:
   * `ip` 1 − dot, `l2` squared Euclidean), nearest first: the exact scan of filtered queries.
   * Every label must be live ({@link live} makes such a list). Points current in the graph are
   * scanned by the addon on the graph's own vectors (`exactKnn`), pending ones here on their
   * queued copies. Updates {@link SearchCosts.graphScanNs} (lists of 256 or more).
   */
  scan(q: ArrayLike<number>, n: number, labels: Int32Array, count = labels.length): Neighbor[] {
    n = Math.min(n, count);
    if (n <= 0) return [];
    const sq = storedFormInto(this.metric, q, this.query);
    const t0 = performance.now();
    const r = this.graph().exactKnn(sq, labels, count, n, this.state);
    if (count >= 256) this.costs.graphScanNs = movedMean(this.costs.graphScanNs, ((performance.now() - t0) * 1e6) / (count * this.dimension));
    const out: Neighbor[] = new Array(r.neighbors.length);
    for (let i = 0; i < out.length; i++) out[i] = { label: r.neighbors[i], distance: r.distances[i] };
    if (this.pendingVecs.size > 0) {
      const state = this.state;
      return mergePending(out, n, (add) => {
        for (let i = 0; i < count; i++) {
          const label = labels[i];
          if (state[label] === CURRENT) continue;
          const p = this.pendingVecs.get(label);
          if (p) add(label, this.slotDistance(sq, p.slot));
        }
      });
    }
    return out;
  }

  /** Float32 stored-form distance from `sq` to the pending vector in `slot` (as hnswlib's). */
  private slotDistance(sq: Float32Array, slot: number): number {
    const d = this.dimension;
    const slab = this.slab;
    let dist = 0;
    if (this.space === 'ip') {
      for (let j = 0, o = slot * d; j < d; j++, o++) dist += sq[j] * slab[o];
      return 1 - dist;
    }
    for (let j = 0, o = slot * d; j < d; j++, o++) {
      const x = sq[j] - slab[o];
      dist += x * x;
    }
    return dist;
  }

  /**
   * The live points among `labels`, as the list {@link scan} takes. Stays valid while
   * {@link liveEpoch} is unchanged.
   */
  live(labels: Iterable<number>): Int32Array {
    const bits = this.bits;
    const out: number[] = [];
    for (const l of labels) if (l < bits.length && bits[l] === 1) out.push(l);
    return Int32Array.from(out);
  }

  /** Estimated cost of {@link scan} over `count` candidates (ns per dimension; see {@link SearchCosts}). */
  scanCost(count: number): number {
    return this.costs.graphScanNs * count;
  }
}

/**
 * The dense part of an index defined with `"quantization": "int8"` (definitions.ts): no graph, only
 * the 8-bit codes of every live vector ({@link QuantizedVectors}: stride + 8 bytes per vector,
 * about 0.25× float32) and a live bit per label. Every search is a scan of the codes — all live
 * points, or a filter's matches — whose best candidates the caller re-ranks on the original
 * vectors (`query/execute.ts` `exactDense`), so recall is that of an exact search up to near-ties
 * the codes cannot separate, and the cost grows linearly with the points scanned. Writes only set
 * codes: nothing is queued ({@link pending} is 0), nothing is tombstoned, nothing is rebuilt.
 * A removed label gets scale 0, so a snapshot of the codes alone tells which labels are live
 * (set codes always have a positive scale).
 */
export class QuantizedDense implements DenseIndex {
  readonly codes: QuantizedVectors;
  readonly costs: CodeScanCosts = { scanNs: 2, simdScanNs: 0.2 };
  private bits = new Uint8Array(16);
  private liveCount = 0;
  private readonly space: 'ip' | 'l2';
  /** Live labels in ascending order, rebuilt on demand after a change ({@link liveLabels}). */
  private allLive: Int32Array | undefined = new Int32Array(0);
  /** Bumped whenever a label becomes live or is removed (validity of {@link live} lists). */
  private epoch = 0;
  private readonly scratch: Float32Array;
  private readonly scanner = new CodeScanner();

  /** `params` only names the index's (unused) HNSW settings in snapshot headers. */
  constructor(readonly dimension: number, readonly metric: Metric, readonly params: HnswParams, initial = 1024, codes?: QuantizedVectors) {
    this.space = spaceOf(metric);
    this.codes = codes ?? new QuantizedVectors(dimension, Math.max(16, initial));
    this.scratch = new Float32Array(dimension);
  }

  /**
   * The index of codes read back from a snapshot (`QuantizedVectors.deserialize` of `labels`
   * entries): labels with a positive scale are live.
   */
  static fromCodes(codes: QuantizedVectors, labels: number, metric: Metric, params: HnswParams): QuantizedDense {
    const q = new QuantizedDense(codes.dimension, metric, params, 16, codes);
    if (labels > 0) q.mark(labels - 1, false);
    for (let l = 0; l < labels; l++) if (codes.scale[l] > 0) q.mark(l, true);
    return q;
  }

  /** Sizes the live bits for `label`; sets its bit when `on`. */
  private mark(label: number, on: boolean): void {
    if (label >= this.bits.length) this.bits = grownBytes(this.bits, doubledFor(this.bits.length, label));
    if (on && !this.bits[label]) {
      this.bits[label] = 1;
      this.liveCount++;
      this.epoch++;
      this.allLive = undefined;
    }
  }

  get size(): number {
    return this.liveCount;
  }
  get tombstones(): number {
    return 0;
  }
  /** Always 0: no graph for a snapshot to read (same interface as {@link HnswDense}). */
  readonly saving = 0;
  /** Always 0: writes take effect at once (same interface as {@link HnswDense}). */
  get pending(): number {
    return 0;
  }
  /** Highest live label + 1 (entries of the codes worth saving). */
  get labelSpan(): number {
    for (let i = this.bits.length - 1; i >= 0; i--) if (this.bits[i]) return i + 1;
    return 0;
  }
  /** `current`: every write is in the codes (snapshot header). */
  coveredSeq(current: number): number {
    return current;
  }
  *labels(): Generator<number> {
    const b = this.bits;
    for (let i = 0; i < b.length; i++) if (b[i]) yield i;
  }

  /** Changes whenever a label becomes live or is removed: a {@link live} list stays valid while it does not. */
  get liveEpoch(): number {
    return this.epoch;
  }

  /** Every live label, ascending (cached until the next add of a new label or remove). */
  liveLabels(): Int32Array {
    if (this.allLive) return this.allLive;
    const out = new Int32Array(this.liveCount);
    const b = this.bits;
    for (let i = 0, m = 0; i < b.length; i++) if (b[i]) out[m++] = i;
    return (this.allLive = out);
  }

  /** The live points among `labels`, as a list for {@link scan}. Stays valid while {@link liveEpoch} is unchanged. */
  live(labels: Iterable<number>): Int32Array {
    const bits = this.bits;
    const out: number[] = [];
    for (const l of labels) if (l < bits.length && bits[l] === 1) out.push(l);
    return Int32Array.from(out);
  }

  add(label: number, v: ArrayLike<number>): void {
    const stored = storedFormInto(this.metric, v, this.scratch);
    this.mark(label, true);
    this.codes.set(label, stored);
  }

  /** {@link add} (the write path's call; nothing is queued here). */
  enqueue(label: number, v: ArrayLike<number>, _seq: number): void {
    this.add(label, v);
  }

  /** Nothing to insert: returns 0. */
  indexPending(_deadline = Infinity): number {
    return 0;
  }

  /** Always false: nothing to insert (same interface as {@link HnswDense}). */
  readonly insertable = false;

  /** Nothing to insert: undefined (same interface as {@link HnswDense}). */
  indexBatch(_maxElements: number, _threads: number): Promise<void> | undefined {
    return undefined;
  }

  /** Resolves at once: no batch insertion ever runs. */
  async idle(): Promise<void> {}

  remove(label: number): void {
    if (!this.has(label)) return;
    this.bits[label] = 0;
    this.liveCount--;
    this.codes.scale[label] = 0;
    this.epoch++;
    this.allLive = undefined;
  }

  has(label: number): boolean {
    return label < this.bits.length && this.bits[label] === 1;
  }

  /** The `k` best live points accepted by `filter`, ranked by the codes (approximate distances). */
  search(q: ArrayLike<number>, k: number, filter?: (label: number) => boolean): Neighbor[] {
    const all = this.liveLabels();
    return this.scan(q, k, filter ? all.filter((l) => filter(l)) : all);
  }

  /**
   * The `n` best of `labels[0..count)` (all live: {@link liveLabels} or a {@link live} list)
   * ranked by the 8-bit codes, distances approximate (as {@link HnswDense.scan}: `ip` 1 − dot,
   * `l2` squared Euclidean); callers re-rank on the original vectors. See {@link CodeScanner}.
   */
  scan(q: ArrayLike<number>, n: number, labels: Int32Array, count = labels.length): Neighbor[] {
    return this.scanner.scan(this.codes, this.metric, this.costs, q, n, labels, count);
  }

  /** Estimated cost of {@link scan} over `count` candidates (ns per dimension). */
  scanCost(count: number): number {
    return (this.codes.simd ? this.costs.simdScanNs : this.costs.scanNs) * count;
  }
}

/** A namespace's dense part: the HNSW graph, or the codes alone (`"quantization": "int8"`). */
export type NamespaceDense = HnswDense | QuantizedDense;

/** Brute-force exact index: stored-form vectors in one growing Float32Array. */
export class FlatDense implements DenseIndex {
  private data: Float32Array;
  private alive: Uint8Array;
  private count = 0;
  private readonly space: 'ip' | 'l2';

  constructor(readonly dimension: number, readonly metric: Metric, initial = 1024) {
    this.space = spaceOf(metric);
    this.data = new Float32Array(initial * dimension);
    this.alive = new Uint8Array(initial);
  }

  get size(): number {
    return this.count;
  }
  get tombstones(): number {
    return 0;
  }

  add(label: number, v: ArrayLike<number>): void {
    if (label >= this.alive.length) {
      const cap = doubledFor(this.alive.length, label);
      const d = new Float32Array(cap * this.dimension);
      d.set(this.data);
      this.data = d;
      this.alive = grownBytes(this.alive, cap);
    }
    storedFormInto(this.metric, v, this.data.subarray(label * this.dimension, (label + 1) * this.dimension));
    if (!this.alive[label]) this.count++;
    this.alive[label] = 1;
  }

  remove(label: number): void {
    if (label < this.alive.length && this.alive[label]) {
      this.alive[label] = 0;
      this.count--;
    }
  }

  has(label: number): boolean {
    return label < this.alive.length && this.alive[label] === 1;
  }

  private dist(sq: number[], label: number): number {
    const d = this.dimension;
    return distance(this.space, sq, this.data.subarray(label * d, label * d + d));
  }

  search(q: ArrayLike<number>, k: number, filter?: (label: number) => boolean): Neighbor[] {
    const sq = storedForm(this.metric, q);
    const self = this;
    function* gen(): Generator<Neighbor> {
      for (let label = 0; label < self.alive.length; label++) {
        if (!self.alive[label] || (filter && !filter(label))) continue;
        yield { label, distance: self.dist(sq, label) };
      }
    }
    return topK(gen(), k);
  }

  /** Exact `k` nearest among `labels` (the filtered-recall oracle of tests and benches). */
  exact(q: ArrayLike<number>, k: number, labels: Iterable<number>): Neighbor[] {
    const sq = storedForm(this.metric, q);
    const self = this;
    function* gen(): Generator<Neighbor> {
      for (const label of labels) if (self.has(label)) yield { label, distance: self.dist(sq, label) };
    }
    return topK(gen(), k);
  }
}

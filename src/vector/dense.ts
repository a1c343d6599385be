/**
 * Dense nearest-neighbour indexes behind one interface: {@link HnswDense}
 * (`hnswlib-node`, approximate) and {@link FlatDense} (brute force, exact; the recall oracle).
 *
 * Labels are the records' range positions (integers). Vectors are kept in "stored form": unit
 * length for COSINE (so COSINE is inner product on normalized vectors), as
 * given otherwise. Distances: `ip` -> `1 - dot`, `l2` -> squared Euclidean; smaller is nearer.
 * Final scores are computed elsewhere from the original vectors (scores.ts).
 */
import hnswlib from 'hnswlib-node';
import type { Metric } from './definitions.js';

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
  /** Exact `k` nearest among `labels` (the selective-filter path). */
  exact(q: ArrayLike<number>, k: number, labels: Iterable<number>): Neighbor[];
}

/** hnswlib space for a metric. */
export function spaceOf(metric: Metric): 'ip' | 'l2' {
  return metric === 'EUCLIDEAN' ? 'l2' : 'ip';
}

/** `v` in stored form as a plain array (hnswlib-node accepts only arrays). */
export function storedForm(metric: Metric, v: ArrayLike<number>): number[] {
  const out = Array.from(v);
  if (metric !== 'COSINE') return out;
  let n = 0;
  for (const x of out) n += x * x;
  n = Math.sqrt(n);
  if (n > 0) for (let i = 0; i < out.length; i++) out[i] /= n;
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

/** HNSW graph (hnswlib-node). Vectors live once, inside the native index; live labels in a bitmap. */
export class HnswDense implements DenseIndex {
  readonly index: hnswlib.HierarchicalNSW;
  private bits = new Uint8Array(1024);
  private liveCount = 0;
  private readonly space: 'ip' | 'l2';
  private dead = 0;

  constructor(readonly dimension: number, readonly metric: Metric, readonly params: HnswParams, initial = 1024) {
    this.space = spaceOf(metric);
    this.index = new hnswlib.HierarchicalNSW(this.space, dimension);
    this.index.initIndex({ maxElements: Math.max(16, initial), m: params.m, efConstruction: params.efConstruction, randomSeed: 100 });
    this.index.setEf(params.efSearch);
  }

  /** Loads a graph written by `writeIndexSync` (every label in it counts as live until removed). */
  static load(file: string, dimension: number, metric: Metric, params: HnswParams): HnswDense {
    const h = new HnswDense(dimension, metric, params, 16);
    h.index.readIndexSync(file, false);
    h.index.setEf(params.efSearch);
    for (const label of h.index.getIdsList()) h.mark(label);
    return h;
  }

  private mark(label: number): void {
    if (label >= this.bits.length) {
      let cap = this.bits.length;
      while (cap <= label) cap *= 2;
      const b = new Uint8Array(cap);
      b.set(this.bits);
      this.bits = b;
    }
    if (!this.bits[label]) {
      this.bits[label] = 1;
      this.liveCount++;
    }
  }

  get size(): number {
    return this.liveCount;
  }
  get tombstones(): number {
    return this.dead;
  }
  *labels(): Generator<number> {
    const b = this.bits;
    for (let i = 0; i < b.length; i++) if (b[i]) yield i;
  }

  add(label: number, v: ArrayLike<number>): void {
    const stored = storedForm(this.metric, v);
    if (!this.has(label)) {
      const cap = this.index.getMaxElements();
      if (this.index.getCurrentCount() >= cap) this.index.resizeIndex(cap * 2);
    }
    this.index.addPoint(stored, label, false);
    this.mark(label);
  }

  remove(label: number): void {
    if (!this.has(label)) return;
    this.bits[label] = 0;
    this.liveCount--;
    try {
      this.index.markDelete(label);
    } catch {
      /* already deleted in a loaded snapshot */
    }
    this.dead++;
  }

  has(label: number): boolean {
    return label < this.bits.length && this.bits[label] === 1;
  }

  search(q: ArrayLike<number>, k: number, filter?: (label: number) => boolean, ef?: number): Neighbor[] {
    if (this.liveCount === 0 || k <= 0) return [];
    const kk = Math.min(k, this.liveCount);
    const want = Math.max(this.params.efSearch, ef ?? 0, kk);
    if (this.index.getEf() !== want) this.index.setEf(want);
    const r = this.index.searchKnn(storedForm(this.metric, q), kk, filter);
    const out: Neighbor[] = new Array(r.neighbors.length);
    for (let i = 0; i < r.neighbors.length; i++) out[i] = { label: r.neighbors[i], distance: r.distances[i] };
    return out;
  }

  exact(q: ArrayLike<number>, k: number, labels: Iterable<number>): Neighbor[] {
    const sq = storedForm(this.metric, q);
    const space = this.space;
    const idx = this.index;
    const self = this;
    function* gen(): Generator<Neighbor> {
      for (const label of labels) {
        if (!self.has(label)) continue;
        yield { label, distance: distance(space, sq, idx.getPoint(label)) };
      }
    }
    return topK(gen(), k);
  }
}

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
      let cap = this.alive.length;
      while (cap <= label) cap *= 2;
      const d = new Float32Array(cap * this.dimension);
      d.set(this.data);
      const a = new Uint8Array(cap);
      a.set(this.alive);
      this.data = d;
      this.alive = a;
    }
    this.data.set(storedForm(this.metric, v), label * this.dimension);
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

  exact(q: ArrayLike<number>, k: number, labels: Iterable<number>): Neighbor[] {
    const sq = storedForm(this.metric, q);
    const self = this;
    function* gen(): Generator<Neighbor> {
      for (const label of labels) if (self.has(label)) yield { label, distance: self.dist(sq, label) };
    }
    return topK(gen(), k);
  }
}

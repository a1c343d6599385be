/**
 * Sparse inverted index of one namespace: exact inner product over matching
 * non-zero dimensions, optional IDF weighting with N = sparse vectors in the namespace and n(q) =
 * vectors with a non-zero at q. Records with no overlapping dimension are not returned.
 */
import { idf, byScore, type Scored } from './scores.js';
import type { SparseVector } from './store.js';

const f = Math.fround;

export class SparseIndex {
  /** dimension -> (label -> value). */
  private readonly postings = new Map<number, Map<number, number>>();
  /** label -> its dimensions (to unlink on replace/delete). */
  private readonly dims = new Map<number, Int32Array>();

  get size(): number {
    return this.dims.size;
  }

  has(label: number): boolean {
    return this.dims.has(label);
  }

  add(label: number, v: SparseVector): void {
    this.remove(label);
    for (let i = 0; i < v.indices.length; i++) {
      let p = this.postings.get(v.indices[i]);
      if (!p) this.postings.set(v.indices[i], (p = new Map()));
      p.set(label, v.values[i]);
    }
    this.dims.set(label, v.indices);
  }

  remove(label: number): void {
    const d = this.dims.get(label);
    if (!d) return;
    for (const i of d) {
      const p = this.postings.get(i);
      p?.delete(label);
      if (p && p.size === 0) this.postings.delete(i);
    }
    this.dims.delete(label);
  }

  /**
   * Top `k` labels by `Σ (q_i · IDF(i)) · d_i`, among labels accepted by `filter`, in float32.
   */
  search(q: SparseVector, k: number, useIdf: boolean, filter?: (label: number) => boolean): Scored[] {
    const acc = new Map<number, number>();
    const total = this.dims.size;
    for (let i = 0; i < q.indices.length; i++) {
      const p = this.postings.get(q.indices[i]);
      if (!p) continue;
      // float32 arithmetic in this order reproduces the reference literals.
      const w = useIdf ? f(q.values[i] * f(idf(total, p.size))) : q.values[i];
      for (const [label, v] of p) acc.set(label, f((acc.get(label) ?? 0) + f(w * v)));
    }
    const out: Scored[] = [];
    for (const [label, score] of acc) if (!filter || filter(label)) out.push({ label, score });
    return out.sort(byScore).slice(0, k);
  }
}

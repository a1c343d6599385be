/**
 * Scores: dense scores normalized to 0..1 per metric, computed in
 * float32 arithmetic on the original vectors (so identical COSINE vectors score exactly 1 and the
 * reference's float32 literals are reproduced) — HNSW hits are scored from the graph distance
 * instead, within a float32 step of this (`query/execute.ts` `scoreHits`); sparse inner product with optional IDF; hybrid
 * fusion with RRF (K = 60, 0-based rank) or DBSF (mean ± 3 sample standard deviations).
 */
import type { Metric } from '../definitions.js';

const f = Math.fround;

/**
 * Dense score of `a` against `b` (same length):
 * COSINE `(1 + dot/(sqrt|a|²·sqrt|b|²))/2`, EUCLIDEAN `1/(1 + |a-b|²)`, DOT_PRODUCT `(1 + dot)/2`.
 * A zero vector has cosine 0. `aNorm2` = {@link norm2F32}(a) when the caller scores many vectors
 * against one `a` (same result, computed once).
 */
export function denseScore(metric: Metric, a: ArrayLike<number>, b: ArrayLike<number>, aNorm2?: number): number {
  if (metric === 'EUCLIDEAN') {
    let s = 0;
    for (let i = 0; i < a.length; i++) {
      const d = f(a[i] - b[i]);
      s = f(s + f(d * d));
    }
    return f(1 / f(1 + s));
  }
  let dot = 0;
  for (let i = 0; i < a.length; i++) dot = f(dot + f(a[i] * b[i]));
  if (metric === 'DOT_PRODUCT') return f(f(1 + dot) / 2);
  const na = aNorm2 ?? norm2F32(a);
  const nb = norm2F32(b);
  const den = f(f(Math.sqrt(na)) * f(Math.sqrt(nb)));
  // Identical vectors (dot = |a|² = |b|² bit for bit) score exactly 1, which the rounding of
  // sqrt·sqrt alone does not guarantee.
  const cos = den === 0 ? 0 : dot === na && na === nb ? 1 : Math.min(1, Math.max(-1, f(dot / den)));
  return f(f(1 + cos) / 2);
}

/** Squared norm of `v` summed in float32 arithmetic, in index order (as {@link denseScore}). */
export function norm2F32(v: ArrayLike<number>): number {
  let n = 0;
  for (let i = 0; i < v.length; i++) n = f(n + f(v[i] * v[i]));
  return n;
}

/** `IDF(q) = ln((N − n + 0.5)/(n + 0.5) + 1)` (the `+1` form the SDK tests reproduce). */
export function idf(total: number, withTerm: number): number {
  return Math.log((total - withTerm + 0.5) / (withTerm + 0.5) + 1);
}

export interface Scored {
  label: number;
  score: number;
}

/** Sorts by score descending (ties by label ascending, deterministic). */
export function byScore(a: Scored, b: Scored): number {
  return b.score - a.score || a.label - b.label;
}

/** RRF: each list (sorted best first) contributes `1/(rank + 60)`, rank 0-based; sums per label. */
export function fuseRrf(lists: Scored[][]): Scored[] {
  const acc = new Map<number, number>();
  for (const list of lists) {
    list.forEach((s, rank) => acc.set(s.label, f((acc.get(s.label) ?? 0) + f(1 / (rank + 60)))));
  }
  return [...acc].map(([label, score]) => ({ label, score })).sort(byScore);
}

/**
 * DBSF: per list, `(s − (μ − 3σ)) / ((μ + 3σ) − (μ − 3σ))` with σ the sample standard deviation
 * (n − 1); σ = 0 (or one item) gives 0.5; sums per label. float32 arithmetic.
 */
export function fuseDbsf(lists: Scored[][]): Scored[] {
  const acc = new Map<number, number>();
  for (const list of lists) {
    if (list.length === 0) continue;
    let mean = 0;
    for (const s of list) mean = f(mean + s.score);
    mean = f(mean / list.length);
    let v = 0;
    for (const s of list) v = f(v + f(f(s.score - mean) * f(s.score - mean)));
    const sigma = list.length > 1 ? f(Math.sqrt(f(v / (list.length - 1)))) : 0;
    const lo = f(mean - f(3 * sigma));
    const hi = f(mean + f(3 * sigma));
    for (const s of list) {
      const n = sigma === 0 ? 0.5 : f(f(s.score - lo) / f(hi - lo));
      acc.set(s.label, f((acc.get(s.label) ?? 0) + n));
    }
  }
  return [...acc].map(([label, score]) => ({ label, score })).sort(byScore);
}

/**
 * Small numeric helpers shared by the bench scripts: percentiles over latency samples and the
 * number formats used in the printed tables (thousands separators, ms with adaptive precision,
 * ratios such as `1.23x`).
 */

/**
 * The `p`-th percentile (0..100) of `values` by the nearest-rank method (the same rule wrk's and
 * HdrHistogram's percentile queries follow). `values` need not be sorted. NaN for an empty input.
 */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.ceil((Math.min(Math.max(p, 0), 100) / 100) * sorted.length);
  return sorted[Math.max(0, rank - 1)];
}

/** Arithmetic mean; NaN for an empty input. */
export function mean(values: readonly number[]): number {
  return values.length ? values.reduce((a, b) => a + b, 0) / values.length : NaN;
}

/** An integer with thousands separators (`1234567.8` -> `1,234,568`); `-` for NaN/undefined. */
export function fmtInt(n: number | undefined): string {
  if (n === undefined || !Number.isFinite(n)) return '-';
  return Math.round(n).toLocaleString('en-US');
}

/** Milliseconds with precision that suits the magnitude (`0.071`, `1.84`, `12.3`, `140`). */
export function fmtMs(ms: number | undefined): string {
  if (ms === undefined || !Number.isFinite(ms)) return '-';
  if (ms < 1) return ms.toFixed(3);
  if (ms < 10) return ms.toFixed(2);
  if (ms < 100) return ms.toFixed(1);
  return ms.toFixed(0);
}

/** `a / b` as `1.23x`; `n/a` when either side is missing or `b` is 0. */
export function fmtRatio(a: number | undefined, b: number | undefined): string {
  if (a === undefined || b === undefined || !Number.isFinite(a) || !Number.isFinite(b) || b === 0) return 'n/a';
  const r = a / b;
  return `${r < 0.1 ? r.toFixed(3) : r.toFixed(2)}x`;
}

/** recall@10: the share of the exact top-10 labels (`truth`, per query) found in `got` (per query). */
export function recallOf(got: number[][], truth: number[][]): number {
  let hit = 0;
  got.forEach((g, i) => {
    const t = new Set(truth[i]);
    for (const x of g) if (t.has(x)) hit++;
  });
  return hit / (truth.length * 10);
}

/**
 * Runs `fn(0..n-1)` with `clients` calls in flight (each client a sequential loop); returns the
 * calls per second and the results in index order.
 */
export async function load<T>(n: number, clients: number, fn: (i: number) => Promise<T>): Promise<{ qps: number; results: T[] }> {
  const results: T[] = new Array(n);
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (next < n) {
        const i = next++;
        results[i] = await fn(i);
      }
    }),
  );
  return { qps: (n / (performance.now() - t0)) * 1000, results };
}

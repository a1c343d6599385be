/**
 * Interleaved A/B runs for the benches (e.g. svc with `SVC_METRICS=false` vs `true`, or Node 20
 * vs 24): on a shared machine the load of other jobs drifts within minutes, so the two variants
 * run alternately (A B, B A, A B, ...: each round swaps which goes first) and each side is
 * summarised by its median and its range; the paired ratio of each round (B / A of the same round)
 * is summarised too, since both halves of a round saw nearly the same load.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fmtInt } from './stats.js';

/** CPU time (user + system, ms) process `pid` has used so far (`/proc/<pid>/stat`, 100 Hz ticks). */
export function cpuMs(pid: number): number {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100; // utime, stime (fields 14, 15)
}

/** Median (mean of the middle two for an even count); NaN for none. */
export function median(xs: readonly number[]): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** The order of the two variants in round `round` (0-based): A first in even rounds, B first in odd ones. */
export function abOrder<T>(round: number, a: T, b: T): [T, T] {
  return round % 2 === 0 ? [a, b] : [b, a];
}

/** `median (min-max)` of `xs`, numbers formatted by `fmt` (default: integer with separators). */
export function fmtSpread(xs: readonly number[], fmt: (n: number) => string = fmtInt): string {
  if (xs.length === 0) return '-';
  return `${fmt(median(xs))} (${fmt(Math.min(...xs))}-${fmt(Math.max(...xs))})`;
}

/**
 * Summary of one A/B cell: `b / a` of the medians, and the median and range of the per-round
 * ratios `b[i] / a[i]` (rounds with a missing side are skipped), as `0.98x (0.95-1.02x)`.
 */
export function abRatios(a: readonly number[], b: readonly number[]): { ofMedians: string; paired: string } {
  const r = a.map((x, i) => b[i] / x).filter((x) => Number.isFinite(x));
  const f = (x: number) => x.toFixed(3);
  return {
    ofMedians: `${f(median(b) / median(a))}x`,
    paired: r.length ? `${f(median(r))}x (${f(Math.min(...r))}-${f(Math.max(...r))}x)` : '-',
  };
}

/** One side of an A/B run of svc: the Node.js binary, the checkout it runs, extra environment. */
export interface SvcVariant {
  name: string;
  /** Node.js binary that runs `<root>/bin/svc.js`. */
  node: string;
  /** Checkout whose `bin/svc.js` runs (its `node_modules` built for `node`: native addons follow the Node ABI). */
  root: string;
  env: Record<string, string>;
}

/**
 * The two sides of an A/B run, or undefined for none:
 * - `--metrics-ab` (or `BENCH_METRICS_AB=1`): `SVC_METRICS=false` vs `true`, this Node.js and `root`;
 * - `BENCH_AB_NODE=<node binary>` with `BENCH_AB_ROOT=<checkout>`: this Node.js on `root` vs that
 *   Node.js on that checkout (e.g. a copy whose `node_modules` was installed with Node 24).
 * @throws Error when `BENCH_AB_NODE` is set without `BENCH_AB_ROOT`
 */
export function abVariants(root: string): [SvcVariant, SvcVariant] | undefined {
  const env = process.env;
  if (env.BENCH_AB_NODE) {
    if (!env.BENCH_AB_ROOT) throw new Error('BENCH_AB_NODE needs BENCH_AB_ROOT (a checkout with node_modules built for that Node.js)');
    const other = execFileSync(env.BENCH_AB_NODE, ['-v'], { encoding: 'utf8' }).trim();
    return [
      { name: `Node ${process.version}`, node: process.execPath, root, env: {} },
      // the two sides are told apart by name: the same version twice (e.g. two checkouts) gets the path
      { name: other === process.version ? `Node ${other} (${env.BENCH_AB_ROOT})` : `Node ${other}`, node: env.BENCH_AB_NODE, root: path.resolve(env.BENCH_AB_ROOT), env: {} },
    ];
  }
  if (env.BENCH_METRICS_AB === '1' || process.argv.includes('--metrics-ab')) {
    return [
      { name: 'metrics off', node: process.execPath, root, env: { SVC_METRICS: 'false' } },
      { name: 'metrics on', node: process.execPath, root, env: { SVC_METRICS: 'true' } },
    ];
  }
  return undefined;
}

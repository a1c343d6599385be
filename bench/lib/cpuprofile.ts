/**
 * Summarises a V8 `.cpuprofile` (written by `node --cpu-prof`) into the functions with the most
 * self time, and the files/packages they live in: the first thing to read when a bench shows a
 * server slower than its target. Format: Chrome DevTools Protocol `Profiler.Profile` (nodes with
 * `callFrame` and `hitCount`, plus `samples`/`timeDeltas` in microseconds).
 */
import fs from 'node:fs';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  hitCount?: number;
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples?: number[];
}

export interface HotSpot {
  /** `functionName (file:line)`. */
  name: string;
  /** Share of all samples, 0..100. */
  selfPct: number;
}

/** Shortens a script URL to `node_modules/<pkg>/...` or a path relative to the repo. */
function shortUrl(url: string): string {
  const u = url.replace(/^file:\/\//, '');
  const nm = u.lastIndexOf('node_modules/');
  if (nm >= 0) return u.slice(nm + 'node_modules/'.length);
  const src = u.search(/\/(src|bench|bin)\//);
  return src >= 0 ? u.slice(src + 1) : u || '(native)';
}

/** Package or area a file belongs to (`fastify`, `src/kv`, `node:internal`, `(native)`). */
function bucketOf(url: string): string {
  if (!url) return '(native/V8)';
  if (url.startsWith('node:')) return url.split('/')[0];
  const s = shortUrl(url);
  if (url.includes('node_modules/')) return s.startsWith('@') ? s.split('/').slice(0, 2).join('/') : s.split('/')[0];
  const m = /^(src\/[^/]+)/.exec(s);
  return m ? m[1] : s;
}

/**
 * Reads `file` and returns the top `n` functions by self time plus self time per package/folder,
 * as shares of the busy (non-idle) samples.
 * @throws Error when the file is not a readable V8 CPU profile.
 */
export function summarizeCpuProfile(file: string, n = 20): { functions: HotSpot[]; buckets: HotSpot[]; totalSamples: number } {
  const prof = JSON.parse(fs.readFileSync(file, 'utf8')) as Profile;
  // Idle samples (the process waiting for I/O) are left out: shares are of busy time.
  const busy = prof.nodes.filter((nd) => nd.callFrame.functionName !== '(idle)');
  const total = busy.reduce((a, nd) => a + (nd.hitCount ?? 0), 0) || 1;
  const byFn = new Map<string, number>();
  const byBucket = new Map<string, number>();
  for (const nd of busy) {
    const hits = nd.hitCount ?? 0;
    if (!hits) continue;
    const f = nd.callFrame;
    const key = `${f.functionName || '(anonymous)'} (${shortUrl(f.url)}:${f.lineNumber + 1})`;
    byFn.set(key, (byFn.get(key) ?? 0) + hits);
    const b = f.functionName === '(garbage collector)' ? '(gc)' : f.functionName === '(program)' ? '(program)' : bucketOf(f.url);
    byBucket.set(b, (byBucket.get(b) ?? 0) + hits);
  }
  const top = (m: Map<string, number>, k: number) =>
    [...m.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, k)
      .map(([name, hits]) => ({ name, selfPct: (100 * hits) / total }));
  return { functions: top(byFn, n), buckets: top(byBucket, n), totalSamples: total };
}

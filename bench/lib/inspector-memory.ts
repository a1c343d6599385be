/**
 * Memory of a child Node process after a forced full garbage collection, through the V8 inspector
 * (Chrome DevTools Protocol over WebSocket: `HeapProfiler.collectGarbage`, then
 * `Runtime.evaluate('process.memoryUsage()')`). The child must run with `--inspect=127.0.0.1:0`;
 * {@link inspectorUrl} finds the `ws://` URL it prints on stderr. A forced GC makes RSS samples
 * comparable between runs: without it, the figure depends on when V8 last collected (the vector
 * bench saw 1.1–2.9× raw for the same build).
 */
import type { Readable } from 'node:stream';
import { WebSocket } from 'undici';

/** `process.memoryUsage()` of the child, in bytes. */
export interface ChildMemory {
  rss: number;
  heapTotal: number;
  heapUsed: number;
  external: number;
  arrayBuffers: number;
}

/**
 * Resolves to the inspector WebSocket URL the child prints on `stderr` ("Debugger listening on
 * ws://..."); other stderr text is passed to `forward`. @throws Error after `timeoutMs`.
 */
export function inspectorUrl(stderr: Readable, forward: (text: string) => void, timeoutMs = 15_000): Promise<string> {
  return new Promise((resolve, reject) => {
    let found = false;
    const timer = setTimeout(() => reject(new Error('no inspector URL on stderr')), timeoutMs);
    stderr.on('data', (b: Buffer) => {
      const text = b.toString();
      const m = /Debugger listening on (ws:\/\/\S+)/.exec(text);
      if (m && !found) {
        found = true;
        clearTimeout(timer);
        resolve(m[1]);
      }
      const rest = text
        .split('\n')
        .filter((l) => l && !/Debugger (listening|ending) on|For help, see: https:\/\/nodejs.org|Debugger attached|Waiting for the debugger/.test(l))
        .join('\n');
      if (rest) forward(rest + '\n');
    });
  });
}

/** Wait between the forced GCs and the sample (ms): svc's `malloc_trim` after a major GC runs meanwhile. */
const AFTER_GC_MS = 500;

/**
 * Forces `rounds` full GCs in the child at `wsUrl` and returns its `process.memoryUsage()`
 * {@link AFTER_GC_MS} later.
 * @throws Error when the inspector cannot be reached or answers an error (10 s timeout).
 */
export async function memoryAfterGc(wsUrl: string, rounds = 2): Promise<ChildMemory> {
  const ws = new WebSocket(wsUrl);
  const pending = new Map<number, { resolve: (v: any) => void; reject: (e: Error) => void }>();
  let seq = 0;
  ws.addEventListener('message', (ev) => {
    const msg = JSON.parse(String(ev.data)) as { id?: number; result?: unknown; error?: { message: string } };
    const p = msg.id !== undefined ? pending.get(msg.id) : undefined;
    if (!p) return;
    pending.delete(msg.id!);
    if (msg.error) p.reject(new Error(msg.error.message));
    else p.resolve(msg.result);
  });
  await new Promise<void>((resolve, reject) => {
    ws.addEventListener('open', () => resolve());
    ws.addEventListener('error', () => reject(new Error(`inspector ${wsUrl} unreachable`)));
  });
  const call = (method: string, params: object = {}) =>
    new Promise<any>((resolve, reject) => {
      const id = ++seq;
      const timer = setTimeout(() => reject(new Error(`inspector ${method} timed out`)), 10_000);
      pending.set(id, {
        resolve: (v) => (clearTimeout(timer), resolve(v)),
        reject: (e) => (clearTimeout(timer), reject(e)),
      });
      ws.send(JSON.stringify({ id, method, params }));
    });
  try {
    for (let i = 0; i < rounds; i++) await call('HeapProfiler.collectGarbage');
    // svc hands what a major GC after a write burst freed back to the kernel (malloc_trim on the
    // thread pool, vector/index.ts): sample once it has
    await new Promise((r) => setTimeout(r, AFTER_GC_MS));
    const r = await call('Runtime.evaluate', { expression: 'JSON.stringify(process.memoryUsage())', returnByValue: true });
    return JSON.parse(r.result.value) as ChildMemory;
  } finally {
    ws.close();
  }
}

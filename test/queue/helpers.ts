/**
 * Test helpers for the queue area: a real local HTTP destination ("sink") that records every
 * request and answers with a programmable response, a running queue area with an SDK client, and
 * a poll-with-deadline helper (no fixed sleeps).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { AddressInfo } from 'node:net';
import { Client, Receiver } from '@upstash/qstash';
import { createLogger } from '../../src/logger.js';
import { createContext } from '../../src/main.js';
import { createQueueServer } from '../../src/queue/server.js';
import { openSqliteQueueStore } from '../../src/queue/store/sqlite.js';
import { queueDatabaseEnv, startTestSvc, tempDir, testConfig } from '../helpers/env.js';
import { waitFor } from '../helpers/wait.js';

export interface SinkRequest {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  time: number;
}

export type Responder = (req: SinkRequest, nth: number) => { status?: number; headers?: Record<string, string>; body?: string | Buffer; delayMs?: number } | undefined;

export interface Sink {
  url: string;
  requests: SinkRequest[];
  /** Requests received for a path (pathname + search). */
  at(path: string): SinkRequest[];
  respond: Responder;
  close(): Promise<void>;
}

/** Starts a node:http destination on port 0; `respond` decides the answer (default 200 "ok"). */
export async function startSink(respond: Responder = () => undefined): Promise<Sink> {
  const requests: SinkRequest[] = [];
  const counts = new Map<string, number>();
  const timers = new Set<NodeJS.Timeout>();
  const sink: Sink = {
    url: '',
    requests,
    at: (p) => requests.filter((r) => r.url === p),
    respond,
    close: () =>
      new Promise<void>((resolve) => {
        for (const t of timers) clearTimeout(t);
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const r: SinkRequest = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks), time: Date.now() };
      requests.push(r);
      const n = (counts.get(r.url) ?? 0) + 1;
      counts.set(r.url, n);
      const out = sink.respond(r, n) ?? {};
      const send = () => {
        if (res.destroyed) return;
        res.writeHead(out.status ?? 200, out.headers ?? {});
        res.end(out.body ?? 'ok');
      };
      if (out.delayMs) {
        const t = setTimeout(() => {
          timers.delete(t);
          send();
        }, out.delayMs);
        timers.add(t);
      }
      else send();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  sink.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return sink;
}

export { waitFor };

/** A running queue area with an SDK client, its token and signing keys. */
export async function startQueue(env: Record<string, string> = {}, dataDir?: string) {
  const svc = await startTestSvc(['queue'], { env, dataDir });
  const url = svc.urls.queue!;
  const token = svc.ctx.credentials.get('queue.token');
  const keys = () => ({
    currentSigningKey: svc.ctx.credentials.get('queue.currentSigningKey'),
    nextSigningKey: svc.ctx.credentials.get('queue.nextSigningKey'),
  });
  const client = new Client({ baseUrl: url, token, retry: false });
  const receiver = () => new Receiver(keys());
  const api = (path: string, init: RequestInit = {}) =>
    fetch(url + path, { ...init, headers: { authorization: `Bearer ${token}`, ...(init.headers ?? {}) } });
  return { svc, url, token, client, receiver, keys, api, close: () => svc.close() };
}

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/**
 * Starts svc's queue area as a real child process (`node bin/svc.js serve`, SVC_AREAS=queue, port
 * 0) on `dataDir` with extra `env`, and resolves once the banner names its URL (30 s deadline).
 * Used by the kill -9 tests, which SIGKILL the child and start another on the same data dir.
 */
export async function spawnQueueSvc(dataDir: string, env: Record<string, string>): Promise<{ child: ChildProcess; url: string; output: () => string }> {
  const child = spawn(process.execPath, [path.join(ROOT, 'bin/svc.js'), 'serve'], {
    cwd: ROOT,
    env: { ...process.env, SVC_AREAS: 'queue', SVC_QUEUE_PORT: '0', SVC_HOST: '127.0.0.1', SVC_DATA_DIR: dataDir, SVC_LOG_LEVEL: 'warn', ...queueDatabaseEnv(dataDir), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const url = await waitFor('svc banner', () => /^queue\s+(http:\/\/\S+)/m.exec(out)?.[1], 30_000).catch((err) => {
    child.kill('SIGKILL');
    throw new Error(`${(err as Error).message}\n${out}`);
  });
  return { child, url, output: () => out };
}

/**
 * A queue server (in this process, port 0) on a real SQLite store whose first `failCompletes`
 * outcome writes (`complete`, i.e. DELIVERED) fail as on a full disk — fault injection into the
 * real store, everything else real. `recordRetryMs`: the dispatcher's waits between tries of a
 * failing outcome write. `failures()` counts the failed writes.
 */
export async function startQueueWithFailingOutcomes(failCompletes: number, recordRetryMs: readonly number[]) {
  const tmp = tempDir('svc-q-fail-');
  const config = testConfig(tmp.dir, { SVC_AREAS: 'queue' });
  const actx = createContext(config, { logger: createLogger('fatal'), env: {} });
  const real = openSqliteQueueStore(path.join(tmp.dir, 'queue.sqlite'));
  let failures = 0;
  const store = new Proxy(real, {
    get(target, prop, receiver) {
      if (prop === 'complete' && failures < failCompletes) {
        return () => {
          failures++;
          return Promise.reject(new Error('SQLITE_FULL: database or disk is full'));
        };
      }
      const v = Reflect.get(target, prop, receiver) as unknown;
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
  const server = await createQueueServer(actx, { store, recordRetryMs });
  const url = await server.listen();
  const token = actx.credentials.get('queue.token');
  return {
    client: new Client({ baseUrl: url, token, retry: false }),
    api: (p: string) => fetch(url + p, { headers: { authorization: `Bearer ${token}` } }),
    failures: () => failures,
    close: async () => {
      await server.close();
      tmp.cleanup();
    },
  };
}

/**
 * Helpers for the management API tests: Basic headers and authenticated requests against a
 * running svc started with `startTestSvc([..., 'mgmt'])`, and svc as a child process whose memory
 * can be measured ({@link spawnSvc}).
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { RunningSvc } from '../../src/main.js';
import { tempDir } from '../helpers/env.js';
import { waitFor } from '../helpers/wait.js';

/** `Basic base64(user:password)`. */
export function basic(user: string, password: string): string {
  return `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
}

/** The management account of a running svc (as stored). */
export function account(svc: RunningSvc): { user: string; password: string } {
  return { user: svc.ctx.credentials.get('mgmt.user'), password: svc.ctx.credentials.get('mgmt.password') };
}

/** A request to the management port; `auth` = Authorization header value (default: the right one). */
export async function mgmt(
  svc: RunningSvc,
  path: string,
  opts: { method?: string; auth?: string | null; body?: string; headers?: Record<string, string> } = {},
): Promise<{ status: number; headers: Headers; body: any }> {
  const { user, password } = account(svc);
  const headers: Record<string, string> = { ...opts.headers };
  const auth = opts.auth === undefined ? basic(user, password) : opts.auth;
  if (auth !== null) headers.authorization = auth;
  const res = await fetch(svc.urls.mgmt + path, { method: opts.method ?? 'GET', headers, body: opts.body });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    /* keep the text */
  }
  return { status: res.status, headers: res.headers, body };
}

/**
 * Status of a request with a Bearer token (for checking other areas' credentials); `token` null
 * sends no Authorization header (for query-parameter tokens).
 */
export async function bearerStatus(url: string, token: string | null, init: { method?: string; body?: string } = {}): Promise<number> {
  const headers: Record<string, string> = init.body ? { 'content-type': 'application/json' } : {};
  if (token !== null) headers.authorization = `Bearer ${token}`;
  const res = await fetch(url, { method: init.method ?? 'GET', headers, body: init.body });
  await res.arrayBuffer();
  return res.status;
}

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** A svc started as its own process (`node bin/svc.js serve`), so that its memory can be measured apart from the test's. */
export interface SvcProcess {
  pid: number;
  /** Base URL of each started area, from the banner. */
  urls: Record<string, string>;
  dataDir: string;
  /** The credential store as the process wrote it (`credentials.json`). */
  credentials(): Record<string, string>;
  /** Resident set size now, in bytes (`VmRSS`). */
  rss(): number;
  /** Peak resident set size since start or the last {@link SvcProcess.resetPeak}, in bytes (`VmHWM`). */
  peakRss(): number;
  /** Resets the peak to the current RSS (`/proc/<pid>/clear_refs` = 5). */
  resetPeak(): void;
  output(): string;
  close(): Promise<void>;
}

function procStatusBytes(pid: number, field: string): number {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m) throw new Error(`no ${field} in /proc/${pid}/status`);
  return Number(m[1]) * 1024;
}

/**
 * Starts svc with `areas` as a child process on a fresh data dir (every port 0, 127.0.0.1, kv in the
 * main process, log level `warn`), plus `env`; resolves once the banner names every area's URL
 * (60 s deadline).
 */
export async function spawnSvc(areas: string[], env: Record<string, string> = {}): Promise<SvcProcess> {
  const tmp = tempDir('svc-proc-');
  const child = spawn(process.execPath, [path.join(ROOT, 'bin/svc.js'), 'serve'], {
    cwd: ROOT,
    env: {
      ...process.env,
      SVC_AREAS: areas.join(','),
      SVC_HOST: '127.0.0.1',
      SVC_QUEUE_PORT: '0',
      SVC_KV_PORT: '0',
      SVC_VECTOR_PORT: '0',
      SVC_MGMT_PORT: '0',
      SVC_KV_WORKERS: '0',
      SVC_DATA_DIR: tmp.dir,
      SVC_LOG_LEVEL: 'warn',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const urls: Record<string, string> = {};
  try {
    await waitFor('svc banner', () => {
      for (const a of areas) {
        const m = new RegExp(`^${a}\\s+(http://\\S+)`, 'm').exec(out);
        if (m) urls[a] = m[1];
      }
      return areas.every((a) => urls[a]) && /svc is running/.test(out);
    }, 60_000);
  } catch (err) {
    child.kill('SIGKILL');
    tmp.cleanup();
    throw new Error(`${(err as Error).message}\n${out}`);
  }
  const pid = child.pid!;
  return {
    pid,
    urls,
    dataDir: tmp.dir,
    credentials: () => JSON.parse(fs.readFileSync(path.join(tmp.dir, 'credentials.json'), 'utf8')) as Record<string, string>,
    rss: () => procStatusBytes(pid, 'VmRSS'),
    peakRss: () => procStatusBytes(pid, 'VmHWM'),
    resetPeak: () => fs.writeFileSync(`/proc/${pid}/clear_refs`, '5'),
    output: () => out,
    async close() {
      child.kill('SIGTERM');
      const killer = setTimeout(() => child.kill('SIGKILL'), 20_000);
      await exited;
      clearTimeout(killer);
      tmp.cleanup();
    },
  };
}

/** What {@link sendLargeBody} saw: the answer's status (undefined when none came) and the body bytes the socket took. */
export interface LargeBodyOutcome {
  status: number | undefined;
  sent: number;
}

/**
 * One raw HTTP/1.1 request on its own connection to `base` + `reqPath` declaring a body of
 * `bodyBytes` bytes and sending it in 64 KiB chunks as fast as the connection takes them (never
 * more buffered in this process than one chunk). Resolves when the server closed the connection,
 * or once a complete answer arrived after the whole body was sent, or after `timeoutMs`.
 */
export function sendLargeBody(base: string, reqPath: string, headers: Record<string, string>, bodyBytes: number, timeoutMs = 180_000): Promise<LargeBodyOutcome> {
  const u = new URL(base);
  const chunk = Buffer.alloc(64 * 1024, 0x61);
  return new Promise((resolve) => {
    const sock = net.connect(Number(u.port), u.hostname);
    let answer = Buffer.alloc(0);
    let sent = 0;
    let finished = false;
    let status: number | undefined;
    const done = () => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      sock.destroy();
      resolve({ status, sent });
    };
    const timer = setTimeout(done, timeoutMs);
    /** True once a whole answer (headers + Content-Length bytes) is in. */
    const complete = (): boolean => {
      const end = answer.indexOf('\r\n\r\n');
      if (end < 0) return false;
      const len = /\r\ncontent-length:\s*(\d+)/i.exec(answer.subarray(0, end).toString('latin1'));
      return answer.length - end - 4 >= Number(len?.[1] ?? 0);
    };
    sock.on('data', (d: Buffer) => {
      answer = Buffer.concat([answer, d]);
      status ??= Number(/^HTTP\/1\.[01] (\d{3})/.exec(answer.toString('latin1'))?.[1]) || undefined;
      if (sent >= bodyBytes && complete()) done();
    });
    sock.on('error', () => undefined); // EPIPE / ECONNRESET once refused: 'close' follows
    sock.on('close', done);
    sock.on('connect', async () => {
      const head = Object.entries({ host: `${u.hostname}:${u.port}`, 'content-length': String(bodyBytes), ...headers })
        .map(([k, v]) => `${k}: ${v}\r\n`)
        .join('');
      sock.write(`POST ${reqPath} HTTP/1.1\r\n${head}\r\n`);
      while (sent < bodyBytes && !finished && !sock.destroyed) {
        const n = Math.min(chunk.length, bodyBytes - sent);
        const ok = sock.write(n === chunk.length ? chunk : chunk.subarray(0, n));
        sent += n;
        if (!ok) await new Promise<void>((r) => { sock.once('drain', r); sock.once('close', r); });
      }
      if (complete()) done();
    });
  });
}

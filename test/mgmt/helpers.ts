/**
 * Helpers for the management API tests: Basic headers and authenticated requests against a
 * running svc started with `startTestSvc([..., 'mgmt'])`, and svc as a child process whose memory
 * can be measured ({@link spawnSvc}).
 */
import net from 'node:net';
import type { RunningSvc } from '../../src/main.js';

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

export { spawnSvc, type SvcProcess } from '../helpers/svc-process.js';

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

/** The env of a test svc whose vector indexes stay in SQLite whatever the run points `SVC_VECTOR_DATABASE_URL` at (runtime-created indexes need it). */
export const LOCAL_VECTOR_STORE = { SVC_VECTOR_DATABASE_URL: '' };

/** Init of a JSON POST of `body`. */
export const post = (body: unknown) => ({ method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });

/** The message an SDK call rejects with, or `no error`. */
export async function sdkError(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    return (err as Error).message;
  }
  return 'no error';
}

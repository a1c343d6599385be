/**
 * Listening so that new connections are still accepted while the event loop is saturated
 * (shared plumbing; used by the queue area's front, `SVC_QUEUE_ACCEPT_HANDLES` and
 * `SVC_QUEUE_LISTEN_BACKLOG`).
 *
 * Why: since libuv 1.45 (Node 20 and later) a listening handle accepts **one** connection per
 * event-loop iteration (libuv/libuv#3696 "unix: don't accept() connections in a loop"; it relies on
 * level-triggered polling to be told again at the next iteration). When keep-alive clients keep
 * the loop busy, an iteration serves hundreds of requests and takes tens of milliseconds or more,
 * so new connections pile up in the kernel's accept queue: their handshake completed, but nobody
 * takes them. Past the listen backlog (Node's default: 511) the kernel drops SYNs and clients wait
 * out SYN retransmissions (1, 3, 7, 15 s). Measurements: `docs/readme/queue-bench.md`
 * ("New connections under saturation").
 *
 * What this does:
 * - listens with an explicit `backlog` (Linux caps it at `net.core.somaxconn`, 4096 by default
 *   since 5.4);
 * - gives the loop `acceptHandles` listening handles on the ONE socket: more file descriptors for
 *   the same listening socket (duplicated by sending the handle to a short-lived helper process and
 *   back over the IPC channel, `SCM_RIGHTS`), each with its own poll watcher. Each handle accepts
 *   one connection per iteration, so an iteration accepts up to `acceptHandles`. The extra handles
 *   emit their connections on the original server, so its `'connection'` listener serves them all;
 *   `server.close()` closes the extra handles too.
 *
 * Cost: when one connection arrives, every handle is woken and all but one get `EAGAIN` from
 * `accept()` (a few microseconds per connection for 8 handles). If the helper cannot be started
 * (or does not answer within `timeoutMs`), the server keeps working with the handles it has; the
 * returned count says how many.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import { baseUrl } from './raw.js';

export interface AcceptOptions {
  /** `listen(2)` backlog: completed handshakes waiting to be accepted (the kernel may cap it). */
  backlog: number;
  /** Listening handles on the socket (1 = Node's usual single handle); each accepts one connection per loop iteration. */
  acceptHandles: number;
  /** Options for the extra `net.Server`s (must equal the original server's, e.g. `allowHalfOpen`). */
  serverOptions?: net.ServerOpts;
  /** Give up waiting for the duplicated handles after this many ms (default 10 000). */
  timeoutMs?: number;
}

/** The helper: sends the listening handle it is given back `argv[1]` times, then exits when the parent disconnects. */
const HELPER = "process.on('message',(m,h)=>{for(let i=0;i<Number(process.argv[1]);i++)process.send('dup',h)})";

/** An internal libuv TCP handle as carried over an IPC channel (`net.Server#_handle`). */
type RawHandle = { close(): void };

/**
 * Listens `server` on `host:port` with `opts.backlog`, then adds `opts.acceptHandles - 1` more
 * listening handles for the same socket (not on Windows, whose libuv accepts differently).
 * Resolves to the base URL (`baseUrl` in `raw.ts`, e.g. `http://127.0.0.1:8080`) and the number of
 * listening handles in use (at least 1).
 * @throws Error when the port cannot be bound (e.g. `EADDRINUSE`).
 */
export async function listenAccepting(server: net.Server, host: string, port: number, opts: AcceptOptions): Promise<{ url: string; handles: number }> {
  await new Promise<void>((resolve, reject) => {
    const onError = (err: Error) => reject(err);
    server.once('error', onError);
    server.listen({ port, host, backlog: opts.backlog }, () => {
      server.off('error', onError);
      resolve();
    });
  });
  const addr = server.address();
  const url = baseUrl(host, typeof addr === 'object' && addr ? addr.port : port);
  const want = opts.acceptHandles - 1;
  const raw = (server as unknown as { _handle?: RawHandle })._handle;
  if (want <= 0 || process.platform === 'win32' || raw === undefined) return { url, handles: 1 };
  const dups = await duplicateHandle(raw, want, opts.timeoutMs ?? 10_000);
  if (!server.listening) {
    for (const h of dups) h.close();
    return { url, handles: 1 };
  }
  const extras: net.Server[] = [];
  for (const h of dups) {
    const extra = net.createServer(opts.serverOptions ?? {});
    extra.on('connection', (socket: net.Socket) => server.emit('connection', socket));
    // accept errors (EMFILE...) surface on the original server, as they would for its own handle
    extra.on('error', (err) => server.emit('error', err));
    // positional backlog: the `{ handle, backlog }` form would re-listen with Node's default 511
    extra.listen(h as never, opts.backlog);
    extras.push(extra);
  }
  const close = server.close;
  server.close = function (this: net.Server, cb?: (err?: Error) => void) {
    for (const e of extras.splice(0)) e.close();
    return close.call(this, cb);
  };
  return { url, handles: 1 + extras.length };
}

/** `count` duplicates of `handle` (fewer when the helper fails or `timeoutMs` passes). */
function duplicateHandle(handle: RawHandle, count: number, timeoutMs: number): Promise<RawHandle[]> {
  return new Promise((resolve) => {
    const got: RawHandle[] = [];
    let done = false;
    const env = { ...process.env };
    delete env.NODE_OPTIONS; // no loaders, inspectors or preloads in the helper
    let child: ChildProcess;
    try {
      child = spawn(process.execPath, ['-e', HELPER, String(count)], { stdio: ['ignore', 'ignore', 'ignore', 'ipc'], env });
    } catch {
      return resolve(got);
    }
    const finish = () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      if (child.connected) child.disconnect();
      if (child.exitCode === null) child.kill();
      resolve(got);
    };
    const timer = setTimeout(finish, timeoutMs);
    child.on('message', (_m, h: RawHandle | undefined) => {
      if (h === undefined) return;
      if (done) return h.close();
      got.push(h);
      if (got.length >= count) finish();
    });
    child.on('error', finish);
    child.on('exit', finish);
    child.send('listen', handle as never, (err) => err && finish());
  });
}

/**
 * The listening socket of an area that loads stored state after binding its port (kv: the
 * database; vector: the indexes). Start-up binds every area's port before any area opens its
 * files (`src/main.ts`), so a start that cannot bind (the port is taken) fails before it has
 * created or changed anything stored; while the area then loads, its port answers every request
 * `503` with `Retry-After` and `Connection: close` (the client's retry opens a new connection,
 * which reaches the loaded area). See `docs/architecture.md` ("The area contract").
 */
import http from 'node:http';
import net from 'node:net';

/** Seconds a client is asked to wait (`Retry-After`) while the area loads. */
export const STARTING_RETRY_AFTER_S = 1;

/** The listening server of an area whose handler is attached once it has loaded. */
export interface StartingGate {
  /** The server to bind (`listenRaw`); accepts sockets paused, with `noDelay` and `allowHalfOpen`. */
  readonly server: net.Server;
  /**
   * Hands every connection accepted from now on to `accept` (the socket arrives paused and unread:
   * `accept` resumes it, or passes it on as it is).
   */
  open(accept: (socket: net.Socket) => void): void;
  /** Stops accepting and ends the connections that got the 503; resolves when the server closed. */
  close(): Promise<void>;
}

/**
 * Creates the gate; until {@link StartingGate.open} every request gets `503`, `Retry-After:
 * {@link STARTING_RETRY_AFTER_S}`, `Connection: close` and the JSON `body` (the area's error shape).
 */
export function startingGate(body: string): StartingGate {
  const responder = http.createServer((_req, res) => {
    res.shouldKeepAlive = false;
    res.writeHead(503, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body), 'retry-after': String(STARTING_RETRY_AFTER_S) });
    res.end(body);
  });
  responder.on('clientError', (_err, socket) => socket.destroy());
  let accept: ((socket: net.Socket) => void) | undefined;
  const server = net.createServer({ pauseOnConnect: true, noDelay: true, allowHalfOpen: true }, (socket) => {
    if (accept) return accept(socket);
    responder.emit('connection', socket);
    socket.resume();
  });
  return {
    server,
    open(a) {
      accept = a;
    },
    async close() {
      const closed = server.listening ? new Promise<void>((resolve) => server.close(() => resolve())) : undefined;
      responder.closeAllConnections();
      await closed;
    },
  };
}

/**
 * Closing a connection after a final answer without losing that answer (the "lingering close" of
 * other servers), for the minimal HTTP/1.1 front (`fast.ts`) and for `node:http`/Fastify servers.
 *
 * A refusal decided from a request's head (a wrong token, a deadline, the connection cap) is
 * answered with `Connection: close` while the client may still be sending the body it announced.
 * Destroying the socket at once then resets the connection (TCP RST: data arriving on a closed
 * socket), and a client that had not read the answer yet loses it ("connection reset" instead of
 * 401). So the close is staged as HTTP/1.1's connection tear-down describes (RFC 9112 §9.6:
 * half-close first, close later): the write side is ended (FIN after the answer), at most
 * {@link LINGER_DISCARD_MAX} more bytes are read and dropped (to see the client's own close; past
 * them reading stops and what the client sends waits in the kernel's buffers), and the socket is
 * destroyed when the client closes its side, or {@link LINGER_MS} ms later at the latest.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import net from 'node:net';

/** How long a closed connection is drained at most after its answer, in ms. */
export const LINGER_MS = 2_000;
/** Bytes read and discarded meanwhile; past them reading stops. */
const LINGER_DISCARD_MAX = 64 * 1024;
const EMPTY = Buffer.alloc(0);

/**
 * Ends `socket` with `bytes` (a complete response with `Connection: close`, or nothing when the
 * answer was already written) and stages the close as described in the module comment. Removes
 * every `'data'` and `'end'` listener (an HTTP parser's too): nothing more is served on it.
 */
export function closeWith(socket: net.Socket, bytes: string | Buffer): void {
  socket.removeAllListeners('data');
  socket.removeAllListeners('end');
  socket.on('error', () => undefined);
  socket.setTimeout(0);
  let budget = LINGER_DISCARD_MAX;
  socket.on('data', (chunk: Buffer) => {
    budget -= chunk.length;
    if (budget < 0) socket.pause();
  });
  socket.once('end', () => socket.destroy());
  socket.end(bytes);
  if (socket.readableEnded) net.Socket.prototype.destroySoon.call(socket);
  else socket.resume();
  const timer = setTimeout(() => socket.destroy(), LINGER_MS);
  timer.unref();
  socket.once('close', () => clearTimeout(timer));
}

/**
 * Marks the answer being prepared on `res` (for `req`, a `node:http` request) as the last on its
 * connection and stages the close ({@link closeWith}) once Node has written it. Call before the
 * answer is sent. The request body is left unread.
 */
export function closeAfterAnswer(req: IncomingMessage, res: ServerResponse): void {
  res.setHeader('Connection', 'close');
  // Take the body as "being consumed" and leave it unread: Node then stops reading the socket once
  // the request's small buffer is full, instead of reading and discarding the rest at line rate.
  req.pause();
  req.read(0);
  const sock = req.socket as net.Socket;
  // Node's http server calls destroySoon() once a `Connection: close` answer is written
  sock.destroySoon = () => closeWith(sock, EMPTY);
}

/**
 * Closing the connection of a request refused before its body was read, without losing the answer.
 *
 * The answer goes out with `Connection: close`. Node then ends and destroys the socket as soon as
 * the answer is written; while the client is still sending the body it announced, that destroy
 * resets the connection (TCP RST: data arriving on a closed socket), and a client that had not read
 * the answer yet loses it ("connection reset" instead of 401). So the close is staged as HTTP/1.1's
 * connection tear-down describes (RFC 9112 §9.6: half-close first, close later): the socket's
 * write side is ended (FIN after the answer) and it stops reading (beyond one small buffer the body
 * is neither read nor kept: the client's sending stalls once the TCP window is full); the socket is
 * destroyed when the client closes its side (as it does on the FIN), or after `lingerMs` at the
 * latest — by then the client has had the answer.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

/** How long a refused connection is drained at most after its answer, in ms. */
export const DEFAULT_LINGER_MS = 2_000;

/**
 * Marks the answer being prepared on `res` (for `req`) as the last on its connection and stages
 * the close as described in the module comment. Call before the answer is sent.
 */
export function closeAfterAnswer(req: IncomingMessage, res: ServerResponse, lingerMs = DEFAULT_LINGER_MS): void {
  res.setHeader('Connection', 'close');
  // Take the body as "being consumed" and leave it unread: Node then stops reading the socket once
  // the request's small buffer is full (its backpressure), instead of reading and discarding the
  // rest (what it does for a body nobody consumes: at line rate, for as long as the client sends).
  req.pause();
  req.read(0);
  const sock = req.socket as Socket & { destroySoon?: () => void };
  // Node's http server calls destroySoon() once a `Connection: close` answer is written: end instead
  sock.destroySoon = () => {
    sock.end();
  };
  res.once('finish', () => {
    const timer = setTimeout(() => sock.destroy(), lingerMs);
    timer.unref();
    sock.once('close', () => clearTimeout(timer));
  });
}

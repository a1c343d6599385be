/**
 * Server-sent events on a raw Node response (used by kv `/subscribe`, `/psubscribe`, `/monitor`).
 * Sends `data: <line>\n\n` events and `: heartbeat` comments, and reports when the client goes away.
 */
import type { FastifyReply } from 'fastify';

export interface SseStream {
  /** Sends one event: each line of `data` as a `data:` line, then a blank line. */
  send(data: string): void;
  /** Sends a comment line (`: text`), e.g. a heartbeat. */
  comment(text: string): void;
  /** Ends the stream from the server side. */
  close(): void;
  /** True once the client disconnected or {@link SseStream.close} ran. */
  readonly closed: boolean;
}

/**
 * Hijacks `reply` and starts an SSE response (status 200, `text/event-stream`, no buffering).
 * `extraHeaders` are added to the response head (e.g. CORS, sync token). A heartbeat comment is sent
 * every `heartbeatMs` ms (default 15 000). `onClose` runs once when the client disconnects or the
 * stream is closed.
 */
export function startSse(
  reply: FastifyReply,
  onClose: () => void,
  opts: { heartbeatMs?: number; extraHeaders?: Record<string, string> } = {},
): SseStream {
  reply.hijack();
  const res = reply.raw;
  res.writeHead(200, {
    ...opts.extraHeaders,
    'Content-Type': 'text/event-stream',
    'Cache-Control': 'no-cache',
    Connection: 'keep-alive',
    'X-Accel-Buffering': 'no',
  });
  res.flushHeaders?.();
  let closed = false;
  const finish = () => {
    if (closed) return;
    closed = true;
    clearInterval(timer);
    try {
      onClose();
    } catch {
      /* ignore */
    }
  };
  const timer = setInterval(() => {
    if (!closed) res.write(': heartbeat\n\n');
  }, opts.heartbeatMs ?? 15_000);
  timer.unref();
  res.on('close', finish);
  reply.request.raw.on('close', () => {
    if (res.writableEnded || res.destroyed) finish();
  });
  return {
    send(data: string) {
      if (closed) return;
      res.write(data.split('\n').map((l) => `data: ${l}\n`).join('') + '\n');
    },
    comment(text: string) {
      if (!closed) res.write(`: ${text}\n\n`);
    },
    close() {
      if (!closed) res.end();
      finish();
    },
    get closed() {
      return closed;
    },
  };
}

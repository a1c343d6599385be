/**
 * Server-sent event streams of the kv gateway (spec "Key-value REST interface"): `/subscribe/<channel>`, `/psubscribe/<pattern>`, `/monitor`. Each stream has its own Redis
 * connection (authenticated as the token's ACL user), closed when the client disconnects; payloads
 * are sent raw (never base64). Heartbeat comments every 15 s (`startRawSse` in `src/http/raw.ts`).
 *
 * Lines: `subscribe,<ch>,<n>`, `message,<ch>,<msg>`, `psubscribe,<pat>,<n>`,
 * `pmessage,<pat>,<ch>,<msg>`; monitor: `"OK"`, then Redis MONITOR lines with the client address
 * masked as `0.0.0.0:0`.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { startRawSse, type SseOutputLimit } from '../http/raw.js';
import type { Logger } from '../logger.js';
import { redisReplyError } from './errors.js';
import type { KvGateway } from './gateway.js';
import { decodePiece } from './request.js';
import { RespError, SimpleString, type Reply } from './resp.js';
import type { Identity } from './tokens.js';

const text = (r: Reply): string =>
  Buffer.isBuffer(r) ? r.toString('utf8') : r instanceof SimpleString ? r.value : r === null ? '' : String(r);

let heartbeatMs = 15_000;
let outputLimit: Omit<SseOutputLimit, 'onExceeded'> = { hardBytes: 32 * 1024 * 1024, softBytes: 8 * 1024 * 1024, softMs: 60_000 };

/** Sets the heartbeat comment interval in ms (default 15 000; tests shorten it). */
export function setHeartbeatMs(ms: number): void {
  heartbeatMs = ms;
}

/**
 * Sets the per-stream output limit (`SVC_KV_SSE_HARD_LIMIT_BYTES`, `SVC_KV_SSE_SOFT_LIMIT_BYTES`,
 * `SVC_KV_SSE_SOFT_LIMIT_MS`; defaults 32 MiB, 8 MiB, 60 000 ms, as Redis's pubsub class).
 */
export function setOutputLimit(limit: Omit<SseOutputLimit, 'onExceeded'>): void {
  outputLimit = limit;
}

/** Headers of an SSE response: CORS and the read-your-writes token (both names). */
export function commonHeaders(gw: KvGateway): Record<string, string> {
  const t = gw.syncToken;
  return {
    'access-control-allow-origin': '*',
    'access-control-expose-headers': 'upstash-sync-token, svc-sync-token',
    'upstash-sync-token': t,
    'svc-sync-token': t,
  };
}

/** Masks the client address of a MONITOR line: `[0 127.0.0.1:5000]` -> `[0 0.0.0.0:0]` (not `[0 lua]`). */
export function maskMonitorLine(line: string): string {
  return line.replace(/^(\d+\.\d+ \[\d+ )(?!lua\])[^\]]*\]/, '$10.0.0.0:0]');
}

/** Opens one SSE stream; errors before the stream starts are answered as JSON. */
export async function openStream(
  req: IncomingMessage,
  res: ServerResponse,
  gw: KvGateway,
  id: Identity,
  kind: 'subscribe' | 'psubscribe' | 'monitor',
  rawTarget: string | undefined,
  streams: Set<() => void>,
  logger: Logger,
): Promise<void> {
  const conn = await gw.dedicated(id);
  const target = rawTarget === undefined ? undefined : decodePiece(rawTarget);
  let first: Reply;
  try {
    first = await conn.send(kind === 'monitor' ? ['MONITOR'] : [kind.toUpperCase(), target!]);
  } catch (err) {
    conn.close();
    throw err;
  }
  if (first instanceof RespError) {
    conn.close();
    throw redisReplyError(first.message);
  }
  if (res.destroyed || req.socket?.destroyed) {
    conn.close(); // the client left while we were subscribing
    return;
  }
  const stop = () => conn.close();
  const sse = startRawSse(req, res, () => {
    streams.delete(stop);
    conn.close();
  }, {
    extraHeaders: commonHeaders(gw),
    heartbeatMs,
    outputLimit: {
      ...outputLimit,
      onExceeded: (limit, unsent) => logger.warn({ kind, limit, unsent }, 'kv: SSE stream closed: the client does not read fast enough (output limit)'),
    },
  });
  streams.add(stop);
  conn.onClose(() => sse.close());
  if (kind === 'monitor') {
    sse.send('"OK"');
    conn.onPush = (r) => sse.send(maskMonitorLine(text(r)));
  } else {
    if (Array.isArray(first)) sse.send(first.map(text).join(','));
    conn.onPush = (r) => {
      if (Array.isArray(r)) sse.send(r.map(text).join(','));
    };
  }
}

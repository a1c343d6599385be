/**
 * Relays an area's server-sent event stream (kv `/subscribe/<channel>`, `/psubscribe/<pattern>`,
 * `/monitor`) to the browser as it comes, under the same slow-reader rule as the kv port's own
 * streams (`outputLimitChecker` in `src/http/raw.ts`; the limits are `SVC_KV_SSE_HARD_LIMIT_BYTES`,
 * `SVC_KV_SSE_SOFT_LIMIT_BYTES`, `SVC_KV_SSE_SOFT_LIMIT_MS`): the upstream is read at once and
 * written to the browser; when the browser's unsent output passes the hard limit, or stays above
 * the soft limit for the soft time, both sides are dropped (the browser's socket destroyed, its
 * buffered output freed, the connection to the area closed). When the browser goes, the
 * connection to the area is closed with it, so the area ends its Redis subscription; when the
 * area ends the stream, the browser's ends too.
 */
import type { ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { outputLimitChecker, type SseOutputLimit } from '../../http/raw.js';

/**
 * Pipes `upstream` (an SSE body) into `res`, whose status and headers the caller has written.
 * `onExceeded` is told when the output limit dropped the stream (which limit, unsent bytes).
 */
export function relayStream(upstream: Readable, res: ServerResponse, limit: SseOutputLimit): void {
  const check = outputLimitChecker(limit);
  let done = false;
  const stop = () => {
    if (done) return;
    done = true;
    upstream.destroy();
    if (!res.destroyed) res.destroy();
  };
  upstream.on('data', (chunk: Buffer) => {
    if (done) return;
    res.write(chunk);
    const unsent = res.writableLength;
    const exceeded = check(unsent);
    if (exceeded === undefined) return;
    limit.onExceeded?.(exceeded, unsent);
    stop(); // not end(): that would keep the unsent output until the browser reads it
  });
  upstream.on('end', () => {
    if (done) return;
    done = true;
    res.end();
  });
  upstream.on('error', stop);
  res.on('close', stop);
}

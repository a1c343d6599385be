/**
 * The publish hot path on the shared fast HTTP/1.1 front (`src/http/fast.ts`): plain
 * `POST /v2/publish/...` requests are parsed and answered without Fastify (Fastify plus Node's
 * `http` parser were about a quarter of svc's CPU per delivered message in the queue bench profile,
 * `docs/readme/queue-bench.md`). Everything else — other routes, chunked or oversized bodies,
 * repeated header names, HTTP/1.0, malformed heads — goes to the Fastify instance behind it, which
 * serves that connection from then on with the same routes and error handler.
 *
 * Same contract as the Fastify route (`api/publish.ts` `publishRequest`):
 * token from `Authorization: Bearer` or the `svc_token`/`qstash_token` query parameter (401
 * otherwise), `{"error": ...}` bodies with the error's status, 500 (logged) for unexpected errors,
 * `application/json; charset=utf-8` answers.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastHandler, FastResponse } from '../../http/fast.js';
import type { Logger } from '../../logger.js';
import { errors } from '../errors.js';
import type { QueueApiContext } from './context.js';
import { publishRequest } from './publish.js';

const JSON_TYPE = 'application/json; charset=utf-8';
const PREFIX = '/v2/publish/';
const QUERY_TOKENS = ['svc_token', 'qstash_token'];

/** The request token: bearer header first, then the first query token parameter (as `requestToken`). */
function tokenOf(authorization: string | string[] | undefined, url: string): string | undefined {
  if (typeof authorization === 'string') {
    const m = /^Bearer\s+(.+)$/i.exec(authorization.trim());
    if (m) return m[1].trim();
  }
  const q = url.indexOf('?');
  if (q < 0) return undefined;
  const params = new URLSearchParams(url.slice(q + 1));
  for (const n of QUERY_TOKENS) {
    const v = params.get(n);
    if (v) return v;
  }
  return undefined;
}

/**
 * Constant-time token check with the same rule as `src/http/auth.ts` `constantTimeEqual` (both
 * sides hashed to 32 bytes, then compared, then lengths): the valid token's digest is computed
 * once per token value instead of once per request.
 */
function tokenChecker(token: () => string): (candidate: string) => boolean {
  let known: string | undefined;
  let knownDigest: Buffer | undefined;
  return (candidate) => {
    const valid = token();
    if (valid !== known || !knownDigest) {
      known = valid;
      knownDigest = createHash('sha256').update(valid).digest();
    }
    const digest = createHash('sha256').update(candidate).digest();
    return timingSafeEqual(digest, knownDigest) && candidate.length === valid.length;
  };
}

/**
 * The {@link FastHandler} for `POST /v2/publish/*`. `token()` is read per request (credential
 * rotations apply at once); `logger` records 500s.
 */
export function fastPublishHandler(ctx: QueueApiContext, token: () => string, logger: Logger): FastHandler {
  const valid = tokenChecker(token);
  const fail = (out: FastResponse, status: number, message: string) => out.send(status, JSON_TYPE, JSON.stringify({ error: message }), '');
  return {
    accepts: (method, path) => method === 'POST' && path.startsWith(PREFIX),
    handle(head, body, out) {
      const t = tokenOf(head.headers.authorization, head.url);
      if (!t || !valid(t)) {
        const e = errors.unauthorized();
        return fail(out, e.statusCode, e.message);
      }
      publishRequest(ctx, head.url, head.headers, body ?? Buffer.alloc(0), out.remoteAddress).then(
        ({ status, payload }) => out.send(status, JSON_TYPE, JSON.stringify(payload), ''),
        (err: Error & { statusCode?: number }) => {
          const status = err.statusCode ?? 500;
          if (status >= 500) {
            logger.error({ err, url: head.url }, 'queue: request failed');
            return fail(out, 500, 'internal error');
          }
          fail(out, status, err.message);
        },
      );
    },
  };
}

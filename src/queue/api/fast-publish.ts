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
 * otherwise), `{"error": ...}` bodies with the error's status, 507 + `Retry-After` for a full disk, 500 (logged) for unexpected errors,
 * `application/json; charset=utf-8` answers.
 */
import { sameSecret } from '../../http/auth.js';
import type { FastHandler, FastHead, FastResponse } from '../../http/fast.js';
import { rawRequestToken } from '../../http/raw.js';
import type { ErrorLog } from '../../logger.js';
import { errorAnswer, queueError } from '../errors.js';
import { TOKEN_QUERY_PARAMS, type QueueApiContext } from './context.js';
import { publishRequest } from './publish.js';

const JSON_TYPE = 'application/json; charset=utf-8';
const PREFIX = '/v2/publish/';
const UNAUTHORIZED = queueError('unauthorized');


/**
 * Constant-time check of a presented token against the current queue tokens (every one compared,
 * {@link sameSecret}: no digest per request).
 */
function tokenChecker(tokens: () => readonly string[]): (candidate: string) => boolean {
  return (candidate) => {
    let ok = false;
    for (const t of tokens()) ok = sameSecret(candidate, t) || ok;
    return ok;
  };
}

/**
 * The {@link FastHandler} for `POST /v2/publish/*`. `tokens()` (the valid queue tokens) is read per request (credential
 * rotations apply at once); `logger` records 500s (the server passes its collapsing `repeatedErrorLog`).
 */
export function fastPublishHandler(ctx: QueueApiContext, tokens: () => readonly string[], logger: ErrorLog): FastHandler {
  const valid = tokenChecker(tokens);
  const fail = (out: FastResponse, status: number, message: string) => out.send(status, JSON_TYPE, JSON.stringify({ error: message }), '');
  const authorized = (head: FastHead): boolean => {
    const q = head.url.indexOf('?');
    const t = rawRequestToken(head.headers, q < 0 ? undefined : head.url.slice(q + 1), TOKEN_QUERY_PARAMS);
    return t !== undefined && t !== '' && valid(t);
  };
  return {
    accepts: (method, path) => method === 'POST' && path.startsWith(PREFIX),
    // a publish with a body and a wrong token is refused from its head (the connection then closes)
    precheck(head) {
      if (authorized(head)) {
        head.auth = true;
        return undefined;
      }
      return { status: UNAUTHORIZED.statusCode, type: JSON_TYPE, body: JSON.stringify({ error: UNAUTHORIZED.message }), extraHeaders: '' };
    },
    handle(head, body, out) {
      if (head.auth !== true && !authorized(head)) return fail(out, UNAUTHORIZED.statusCode, UNAUTHORIZED.message);
      publishRequest(ctx, head.url, head.headers, body ?? Buffer.alloc(0), out.remoteAddress).then(
        ({ status, payload }) => out.send(status, JSON_TYPE, JSON.stringify(payload), ''),
        (err: Error & { statusCode?: number }) => {
          const a = errorAnswer(err);
          if (a.log) logger.error({ err, url: head.url }, 'queue: request failed');
          out.send(a.status, JSON_TYPE, JSON.stringify({ error: a.message }), a.retryAfterS === undefined ? '' : `Retry-After: ${a.retryAfterS}\r\n`);
        },
      );
    },
  };
}

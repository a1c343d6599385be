/**
 * The vector port's fast front: a {@link FastHandler} for `src/http/fast.ts` (the shared minimal
 * HTTP/1.1 server) that serves every plain keep-alive request — GET/POST/PUT/DELETE with a
 * `Content-Length` body of at most 1 MiB (`FAST_BODY_MAX`), i.e. every query — through the same
 * routing and handlers as the `node:http` front (`routes.ts`). Everything else (HEAD, other
 * methods, chunked or larger upsert bodies, HTTP/1.0, malformed heads) is handed to the
 * `node:http` server with its full parser. Answers `application/json; charset=utf-8`.
 *
 * Measured on the 2-core bench machine (docs/readme/vector-bench.md): node:http's request/response
 * objects, streams and `writev` cost about as much per request as a 128-d HNSW search.
 */
import { isAscii } from 'node:buffer';
import type { FastHandler } from '../../http/fast.js';
import { endRequestSpan, requestSpan } from '../../tracing.js';
import { errorBody, VECTOR_ERRORS, vectorMessage } from '../errors.js';
import { answer, answerHeaders, isAnswer, nameVectorSpan, routeRequest, type Answer, type RouteDeps, type Routed } from './routes.js';

const JSON_TYPE = 'application/json; charset=utf-8';
const METHODS: readonly string[] = ['DELETE'];
const INTERNAL = VECTOR_ERRORS.internal.status;
const INTERNAL_BODY = errorBody(INTERNAL, vectorMessage('internal'));
const UNAUTHORIZED = VECTOR_ERRORS.unauthorized.status;

/** Body bytes as text (UTF-8; invalid sequences become U+FFFD as in the node:http front's decoder). */
function bodyText(body: Buffer | undefined): string {
  if (body === undefined || body.length === 0) return '';
  // ASCII (the usual JSON body) decodes fastest as latin1 (one-byte string, same characters)
  return isAscii(body) ? body.toString('latin1') : body.toString('utf8');
}

/**
 * The fast handler of the vector port. Never throws: every request is answered once with a JSON
 * body (errors as `{error, status}`; unexpected failures 500, logged). A request with a body is
 * routed and authenticated from its head first (`precheck`): without a valid token it is answered
 * 401 and the connection closed before the body is read.
 */
export function vectorFastHandler(deps: RouteDeps): FastHandler {
  return {
    methods: METHODS,
    accepts: (method) => method !== 'HEAD',
    precheck(head) {
      const r = routeRequest(deps, head.method, head.url, head.headers);
      if (isAnswer(r) && r.status === UNAUTHORIZED) return { status: r.status, type: JSON_TYPE, body: r.body, extraHeaders: answerHeaders(r.status) };
      head.auth = r;
      return undefined;
    },
    handle(head, body, out) {
      const start = performance.now();
      let meter = deps.metrics.route(undefined);
      const span = requestSpan('vector', head.headers); // undefined unless tracing is on
      const send = (status: number, text: string): void => {
        out.send(status, JSON_TYPE, text, answerHeaders(status));
        meter.done(status, start);
        endRequestSpan(span, status);
      };
      try {
        const r = (head.auth as Routed | Answer | undefined) ?? routeRequest(deps, head.method, head.url, head.headers);
        if (isAnswer(r)) return send(r.status, r.body);
        meter = deps.metrics.route(r.endpoint);
        if (span) nameVectorSpan(span, r);
        const a = answer(deps, r, bodyText(body));
        if (a instanceof Promise) a.then((x) => send(x.status, x.body));
        else send(a.status, a.body);
      } catch (err) {
        deps.logger.error({ err }, 'vector request failed');
        send(INTERNAL, INTERNAL_BODY);
      }
    },
  };
}

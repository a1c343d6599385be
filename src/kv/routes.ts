/**
 * HTTP surface of the kv gateway (spec "Key-value REST interface", "Errors"; kv-wire.md §A):
 * one catch-all route that authenticates, reads the format headers and dispatches to the path
 * form, the JSON body form, `/pipeline`, `/multi-exec` or an SSE stream (`sse.ts`).
 *
 * Status codes: 200; 400 (syntax, refused/unsupported command, Redis error, bad format header,
 * request too large, daily limit); 401 (token); 405 (method); 503 (database down, fast).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { requestToken } from '../http/auth.js';
import { svcHeader } from '../http/headers.js';
import { errorJson, itemJson } from './encode.js';
import { KvError, type KvGateway } from './gateway.js';
import {
  commandFromJson,
  commandsFromJson,
  parseJsonBody,
  pathSegments,
  queryArgs,
  RequestError,
} from './request.js';
import { encodeError, RespError, type Arg } from './resp.js';
import { openStream } from './sse.js';
import type { Identity } from './tokens.js';

const CORS_HEADERS: Record<string, string> = {
  'access-control-allow-origin': '*',
  'access-control-expose-headers': 'upstash-sync-token, svc-sync-token',
};
const PREFLIGHT_HEADERS: Record<string, string> = {
  ...CORS_HEADERS,
  'access-control-allow-methods': 'GET, HEAD, POST, PUT, OPTIONS',
  'access-control-allow-headers': [
    'authorization', 'content-type', 'upstash-encoding', 'upstash-sync-token', 'upstash-response-format',
    'upstash-telemetry-sdk', 'upstash-telemetry-runtime', 'upstash-telemetry-platform', 'upstash-telemetry-retry',
    'svc-encoding', 'svc-sync-token', 'svc-response-format',
  ].join(', '),
  'access-control-max-age': '86400',
};
const ALLOWED = new Set(['GET', 'HEAD', 'POST', 'PUT']);
const JSON_TYPE = 'application/json';
const RAW_TYPE = 'application/octet-stream';

function send(reply: FastifyReply, gw: KvGateway, status: number, body: string | Buffer, type = JSON_TYPE): FastifyReply {
  const t = gw.syncToken;
  return reply
    .code(status)
    .header('content-type', type)
    .header('access-control-allow-origin', '*')
    .header('access-control-expose-headers', 'upstash-sync-token, svc-sync-token')
    .header('upstash-sync-token', t)
    .header('svc-sync-token', t)
    .send(body);
}

/** Output format from `Svc-Encoding` / `Svc-Response-Format` (and `Upstash-` aliases). @throws RequestError */
function formatOf(req: FastifyRequest): { b64: boolean; resp2: boolean } {
  const enc = svcHeader(req.headers, 'Encoding');
  const b64 = enc !== undefined && enc.trim().toLowerCase() === 'base64';
  // the public docs misspell the header "Upstash-Reponse-Format"; accept that too
  const fmt = svcHeader(req.headers, 'Response-Format') ?? svcHeader(req.headers, 'Reponse-Format');
  let resp2 = false;
  if (fmt !== undefined) {
    const f = fmt.trim().toLowerCase();
    if (f === 'resp2') resp2 = true;
    else if (f !== 'json') throw new RequestError(`ERR invalid response format '${fmt}': expected json or resp2`);
  }
  if (resp2 && b64) throw new RequestError('ERR resp2 response format cannot be combined with base64 encoding');
  return { b64, resp2 };
}

/** Registers parsers, the error handler and the catch-all route on the area's Fastify instance. */
export function registerKvRoutes(app: FastifyInstance, gw: KvGateway, streams: Set<() => void>): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));

  app.setErrorHandler((err: Error & { code?: string; statusCode?: number }, _req, reply) => {
    if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return send(reply, gw, 400, errorJson('ERR max request size exceeded'));
    const status = err.statusCode && err.statusCode >= 400 && err.statusCode < 500 ? 400 : 500;
    return send(reply, gw, status, errorJson(`ERR ${err.message}`));
  });
  app.setNotFoundHandler((req, reply) => {
    if (!ALLOWED.has(req.method)) return send(reply, gw, 405, errorJson(`ERR method ${req.method} not allowed`));
    return send(reply, gw, 404, errorJson('ERR not found'));
  });

  const handler = async (req: FastifyRequest, reply: FastifyReply) => {
    const method = req.method;
    if (!ALLOWED.has(method)) {
      if (method === 'OPTIONS' && req.headers['access-control-request-method']) {
        return reply.code(204).headers(PREFLIGHT_HEADERS).send();
      }
      return send(reply, gw, 405, errorJson(`ERR method ${method} not allowed`));
    }
    const id = gw.tokens.resolve(requestToken(req, ['_token']));
    if (!id) return send(reply, gw, 401, errorJson('WRONGPASS invalid or missing auth token'));
    try {
      return await dispatch(req, reply, id);
    } catch (err) {
      if (err instanceof RequestError) return send(reply, gw, 400, errorJson(err.message));
      if (err instanceof KvError) return send(reply, gw, err.status, errorJson(err.message));
      req.log.error({ err }, 'kv: unexpected error');
      return send(reply, gw, 500, errorJson(`ERR internal error: ${(err as Error).message}`));
    }
  };

  const dispatch = async (req: FastifyRequest, reply: FastifyReply, id: Identity) => {
    const url = req.raw.url ?? '/';
    const qi = url.indexOf('?');
    const path = qi < 0 ? url : url.slice(0, qi);
    const fmt = formatOf(req);
    const body = req.body as Buffer | undefined;
    const hasBody = (req.method === 'POST' || req.method === 'PUT') && Buffer.isBuffer(body);

    if (path === '/' || path === '') {
      if (!hasBody) throw new RequestError('ERR no command: send a JSON array body or put the command in the path');
      return single(reply, id, commandFromJson(parseJsonBody(body)), fmt);
    }
    const segs = pathSegments(path);
    const first = typeof segs[0] === 'string' ? segs[0].toLowerCase() : '';
    if (segs.length === 1 && first === 'pipeline') return pipeline(reply, id, commandsFromJson(parseJsonBody(body)), fmt);
    if (segs.length === 1 && first === 'multi-exec') return multiExec(reply, id, commandsFromJson(parseJsonBody(body)), fmt.b64);
    if (first === 'monitor' && segs.length === 1) return openStream(req, reply, gw, id, 'monitor', undefined, streams);
    if ((first === 'subscribe' || first === 'psubscribe') && segs.length >= 2) {
      const target = path.slice(path.indexOf('/', 1) + 1);
      return openStream(req, reply, gw, id, first, target, streams);
    }
    const args: Arg[] = segs;
    if (hasBody && body!.length > 0) args.push(body!);
    if (qi >= 0) for (const a of queryArgs(url.slice(qi + 1))) args.push(a);
    return single(reply, id, args, fmt);
  };

  const single = async (reply: FastifyReply, id: Identity, args: Arg[], fmt: { b64: boolean; resp2: boolean }) => {
    const { reply: r, raw } = await gw.single(id, args, fmt.resp2);
    const status = r instanceof RespError ? 400 : 200;
    if (fmt.resp2) return send(reply, gw, status, raw ?? (r instanceof RespError ? encodeError(r.message) : Buffer.alloc(0)), RAW_TYPE);
    return send(reply, gw, status, itemJson(r, fmt.b64));
  };

  const pipeline = async (reply: FastifyReply, id: Identity, cmds: Arg[][], fmt: { b64: boolean; resp2: boolean }) => {
    const { replies, raws } = await gw.pipeline(id, cmds, fmt.resp2);
    if (fmt.resp2) {
      const parts = replies.map((r, i) => raws?.[i] ?? encodeError(r instanceof RespError ? r.message : 'ERR no reply'));
      return send(reply, gw, 200, Buffer.concat(parts), RAW_TYPE);
    }
    let s = '[';
    for (let i = 0; i < replies.length; i++) s += (i ? ',' : '') + itemJson(replies[i], fmt.b64);
    return send(reply, gw, 200, s + ']');
  };

  const multiExec = async (reply: FastifyReply, id: Identity, cmds: Arg[][], b64: boolean) => {
    const replies = await gw.multi(id, cmds);
    let s = '[';
    for (let i = 0; i < replies.length; i++) s += (i ? ',' : '') + itemJson(replies[i], b64);
    return send(reply, gw, 200, s + ']');
  };

  const methods = ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'] as const;
  app.route({ method: [...methods], url: '/', exposeHeadRoute: false, handler });
  app.route({ method: [...methods], url: '/*', exposeHeadRoute: false, handler });
}

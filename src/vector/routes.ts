/**
 * HTTP routing of the vector port (vector-wire.md §C checklist 1): any of GET/POST/PUT/DELETE on
 * `[/<index>]/<endpoint>[/<namespace…>]` (namespace URL-decoded, may contain `/`), `reset?all`,
 * bodies `[]`, `null`, `{}` or empty. Answers `{"result": …}` or `{"error", "status"}`.
 * Order of checks: index by first path segment (else the default index), bearer token (401),
 * endpoint (404), method (405), read-only token (401), JSON body (400), handler.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { CredentialStore } from '../credentials.js';
import { matchesAny, requestToken } from '../http/auth.js';
import type { Logger } from '../logger.js';
import type { VectorIndex } from './engine.js';
import { MESSAGES, VectorError } from './errors.js';
import { HANDLERS, READONLY_ENDPOINTS } from './handlers.js';
import type { ResumableQueries } from './resumable.js';

export interface RouteDeps {
  indexes: Map<string, VectorIndex>;
  credentials: CredentialStore;
  resumable: ResumableQueries;
  logger: Logger;
}

const METHODS = new Set(['GET', 'POST', 'PUT', 'DELETE']);

function sendError(reply: FastifyReply, status: number, error: string): FastifyReply {
  return reply.code(status).header('content-type', 'application/json; charset=utf-8').send(JSON.stringify({ error, status }));
}

/** Registers the catch-all route, body parser and error handlers on the vector app. */
export function registerRoutes(app: FastifyInstance, deps: RouteDeps): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'string' }, (_req, body, done) => done(null, body));
  app.setErrorHandler((err: Error & { statusCode?: number }, _req, reply) => {
    if (err instanceof VectorError) return sendError(reply, err.status, err.message);
    const status = err.statusCode && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 500;
    if (status === 500) deps.logger.error({ err }, 'vector request failed');
    return sendError(reply, status, status === 500 ? 'Internal server error' : err.message);
  });
  app.setNotFoundHandler((req, reply) => handle(req, reply, deps));
  app.all('/', (req, reply) => handle(req, reply, deps));
  app.all('/*', (req, reply) => handle(req, reply, deps));
}

async function handle(req: FastifyRequest, reply: FastifyReply, deps: RouteDeps): Promise<FastifyReply> {
  const raw = req.raw.url ?? '/';
  const q = raw.indexOf('?');
  const pathname = q >= 0 ? raw.slice(0, q) : raw;
  const search = new URLSearchParams(q >= 0 ? raw.slice(q + 1) : '');
  const segments = pathname.replace(/^\/+/, '').split('/');
  let indexName = 'default';
  if (segments.length > 0 && segments[0] !== 'default' && deps.indexes.has(segments[0])) indexName = segments.shift()!;
  const index = deps.indexes.get(indexName)!;

  const token = requestToken(req);
  const full = deps.credentials.get(`vector.${indexName}.token`);
  const ro = deps.credentials.get(`vector.${indexName}.readonlyToken`);
  const isFull = token !== undefined && matchesAny(token, [full]);
  const isRo = !isFull && token !== undefined && matchesAny(token, [ro]);
  if (!isFull && !isRo) return sendError(reply, 401, MESSAGES.unauthorized);

  const endpoint = segments[0] ?? '';
  const handler = Object.prototype.hasOwnProperty.call(HANDLERS, endpoint) ? HANDLERS[endpoint] : undefined;
  if (!handler) return sendError(reply, 404, `Endpoint not found: /${endpoint}`);
  if (!METHODS.has(req.method)) return sendError(reply, 405, `Method ${req.method} is not allowed; use GET, POST, PUT or DELETE`);
  if (isRo && !READONLY_ENDPOINTS.has(endpoint)) return sendError(reply, 401, MESSAGES.readonly);

  let ns: string;
  try {
    ns = decodeURIComponent(segments.slice(1).join('/'));
  } catch {
    return sendError(reply, 400, 'Invalid namespace: bad percent-encoding');
  }
  let body: unknown;
  const text = typeof req.body === 'string' ? req.body : undefined;
  if (text !== undefined && text.trim() !== '') {
    try {
      body = JSON.parse(text);
    } catch (err) {
      return sendError(reply, 400, `Invalid JSON body: ${(err as Error).message}`);
    }
  }
  try {
    const result = await handler({ index, ns, body, search, resumable: deps.resumable });
    return reply.code(200).header('content-type', 'application/json; charset=utf-8').send(JSON.stringify({ result }));
  } catch (err) {
    if (err instanceof VectorError) return sendError(reply, err.status, err.message);
    deps.logger.error({ err, endpoint, index: indexName }, 'vector request failed');
    return sendError(reply, 500, 'Internal server error');
  }
}

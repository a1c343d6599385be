/**
 * The management API's vector index routes (shaped after the hosted developer API's vector-index
 * endpoints; JSON in and out, management error shape). They call the vector area through
 * `ctx.vectorIndexes` (`src/area.ts` VectorIndexAdmin), which validates and does the work.
 *
 *   GET    /v2/vector/index                      [index]
 *   POST   /v2/vector/index                      {name, similarity_function, dimension_count, type?, embedding_model?,
 *                                                sparse_embedding_model?, hnsw?, quantization?, embedder?} -> index
 *   GET    /v2/vector/index/:id                  index with vector_count and index_size
 *   POST   /v2/vector/index/:id/rename           {name} -> index
 *   POST   /v2/vector/index/:id/reset-password   index with its new token and read_only_token
 *   DELETE /v2/vector/index/:id                  {id, name, deleted: true}
 *
 * Errors: `vectorIndexInvalid` 400 (message names the field), `unknownVectorIndex` 404,
 * `vectorIndexFixed` 409, `vectorIndexesStarting` 503,
 * `areaNotRunning` 503 (no vector area in this process). Answers carry tokens: `Cache-Control: no-store`.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { AreaContext, VectorIndexResult } from '../area.js';
import { sendError } from './errors.js';

/** Parses the raw body as JSON (`{}` when empty); undefined = not JSON. */
function jsonBody(req: FastifyRequest): { value: unknown } | undefined {
  const raw = Buffer.isBuffer(req.body) ? req.body.toString('utf8').trim() : '';
  if (!raw) return { value: {} };
  try {
    return { value: JSON.parse(raw) as unknown };
  } catch {
    return undefined;
  }
}

/** Sends a {@link VectorIndexResult}: the value with `no-store`, or its refusal as a catalogue error. */
function send<T>(reply: FastifyReply, r: VectorIndexResult<T>, id?: string): FastifyReply {
  if (r.ok) return reply.header('Cache-Control', 'no-store').send(r.value);
  switch (r.code) {
    case 'invalid':
      return sendError(reply, 'vectorIndexInvalid', r.message);
    case 'notFound':
      return sendError(reply, 'unknownVectorIndex', id ?? '');
    case 'fixed':
      return sendError(reply, 'vectorIndexFixed', r.message);
    case 'unavailable':
      return sendError(reply, 'vectorIndexesStarting');
  }
}

/**
 * Registers the routes of the module doc on `app` under `prefix` (Basic auth is the `auth.ts`
 * hook, as for every route). The console registers them too, under `/console/api/vector-indexes`
 * (its session and CSRF checks apply), with `readonly` refusing every change (`consoleReadonly`,
 * 403) and `decorate` adding its security headers.
 */
export function registerVectorIndexRoutes(
  app: FastifyInstance,
  ctx: AreaContext,
  opts: { prefix?: string; readonly?: boolean; decorate?: (reply: FastifyReply) => FastifyReply } = {},
): void {
  const prefix = opts.prefix ?? '/v2/vector/index';
  const decorate = opts.decorate ?? ((r: FastifyReply) => r);
  /** The admin interface, or undefined after refusing (read-only console for a change, no vector area). */
  const admin = (reply: FastifyReply, change = true) => {
    decorate(reply);
    if (change && opts.readonly) {
      sendError(reply, 'consoleReadonly');
      return undefined;
    }
    if (!ctx.vectorIndexes) {
      sendError(reply, 'areaNotRunning', 'vector');
      return undefined;
    }
    return ctx.vectorIndexes;
  };
  type WithId = { Params: { id: string } };

  app.get(prefix, async (_req, reply) => {
    const a = admin(reply, false);
    return a ? send(reply, await a.list()) : reply;
  });

  app.post(prefix, async (req, reply) => {
    const a = admin(reply);
    if (!a) return reply;
    const body = jsonBody(req);
    if (!body) return sendError(reply, 'vectorIndexInvalid', 'expected a JSON body {name, similarity_function, dimension_count, …}');
    return send(reply, await a.create(body.value));
  });

  app.get<WithId>(`${prefix}/:id`, async (req, reply) => {
    const a = admin(reply, false);
    return a ? send(reply, await a.get(req.params.id), req.params.id) : reply;
  });

  app.post<WithId>(`${prefix}/:id/rename`, async (req, reply) => {
    const a = admin(reply);
    if (!a) return reply;
    const body = jsonBody(req);
    if (!body) return sendError(reply, 'vectorIndexInvalid', 'expected a JSON body {"name": "<new name>"}');
    return send(reply, await a.rename(req.params.id, body.value), req.params.id);
  });

  app.post<WithId>(`${prefix}/:id/reset-password`, async (req, reply) => {
    const a = admin(reply);
    if (!a) return reply;
    const r = await a.resetPassword(req.params.id);
    if (r.ok) ctx.logger.info({ credential: `vector.${req.params.id}` }, 'management API: vector index tokens reset');
    return send(reply, r, req.params.id);
  });

  app.delete<WithId>(`${prefix}/:id`, async (req, reply) => {
    const a = admin(reply);
    if (!a) return reply;
    const r = await a.delete(req.params.id);
    return send(reply, r.ok ? { ok: true, value: { ...r.value, deleted: true } } : r, req.params.id);
  });
}

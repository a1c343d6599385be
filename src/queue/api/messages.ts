/**
 * Messages: `GET /v2/messages/{id}`, `DELETE /v2/messages/{id}` (`{cancelled}`;
 * 404 when unknown or finished), bulk `DELETE /v2/messages` by `messageIds` / filter query
 * parameters (SDK >= 2.10) or the older JSON body `{"messageIds": [...]}` (SDK <= 2.8).
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { queueError } from '../errors.js';
import { messageJson } from '../message-json.js';
import type { QueueApiContext } from './context.js';
import { checkQueryFields, parseFilter, QUERY_FIELDS, type Query } from './query.js';

/**
 * Parses an optional JSON object body (`{messageIds}` / `{dlqIds}` of bulk requests, queue
 * upserts, URL-group endpoints); {} when empty. `null` fields are kept: a bulk list sent as
 * `null` is refused (400), never read as "no list" (which would select every message).
 */
export function jsonBody(req: FastifyRequest): Record<string, unknown> {
  const raw = req.body as Buffer | undefined;
  if (!raw || raw.length === 0) return {};
  let v: unknown;
  try {
    v = JSON.parse(raw.toString('utf8'));
  } catch (err) {
    throw queueError('invalidJson', (err as Error).message);
  }
  if (!v || typeof v !== 'object' || Array.isArray(v)) throw queueError('bodyNotObject');
  return v as Record<string, unknown>;
}

/**
 * `o` without the fields whose value is JSON `null`: an optional field sent as `null` is the
 * same as one left out. The Python SDKs serialise every unset optional field that way (qstash-py's
 * batch entries always carry `"queue": null` when no queue is set, `"body": null` without a body).
 */
export function withoutNulls(o: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(o)) if (v !== null) out[k] = v;
  return out;
}

/** A string array field of a JSON body, or undefined. */
export function stringList(body: Record<string, unknown>, name: string): string[] | undefined {
  const v = body[name];
  if (v === undefined) return undefined;
  if (!Array.isArray(v) || !v.every((x) => typeof x === 'string')) throw queueError('notStringArray', name);
  return v as string[];
}

export function registerMessageRoutes(app: FastifyInstance, ctx: QueueApiContext): void {
  app.get('/v2/messages/:id', async (req: FastifyRequest<{ Params: { id: string } }>) => {
    const m = await ctx.store.getMessage(req.params.id);
    if (!m) throw queueError('messageNotFound', req.params.id);
    return messageJson(m);
  });

  app.delete('/v2/messages/:id', async (req: FastifyRequest<{ Params: { id: string } }>) => {
    const m = await ctx.store.getMessage(req.params.id);
    if (!m) throw queueError('messageNotFound', req.params.id);
    const cancelled = await ctx.store.cancel({ messageIds: [req.params.id] }, ctx.clock.now());
    return { cancelled };
  });

  app.delete('/v2/messages', async (req: FastifyRequest) => {
    const body = jsonBody(req);
    const ids = stringList(body, 'messageIds');
    const q = req.query as Query;
    checkQueryFields(q, QUERY_FIELDS.messages);
    const filter = ids ? { messageIds: ids } : parseFilter(q, 'messages');
    if (filter.messageIds?.length === 0) return { cancelled: 0 };
    const cancelled = await ctx.store.cancel(filter, ctx.clock.now());
    return { cancelled };
  });
}

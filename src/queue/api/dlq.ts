/**
 * Dead-letter queue (spec "List DLQ messages"):
 *   GET    /v2/dlq                 list with filters, `count` (default/max 100), `cursor`, `order`;
 *                                  a page ends early when its bodies pass `SVC_QUEUE_MAX_PAGE_BYTES`
 *   GET    /v2/dlq/{dlqId}         one entry (404 when absent)
 *   DELETE /v2/dlq/{dlqId}         404 when absent
 *   DELETE /v2/dlq                 bulk: `dlqIds` or filter (+ `count`, default 100), or JSON `{dlqIds}`
 *   POST   /v2/dlq/retry/{dlqId}   new message from the entry (201 `{messageId}`), entry removed
 *   POST   /v2/dlq/retry           bulk retry -> `{responses: [{messageId}], cursor?}`
 * Retries accept override headers (`Upstash-Retries`, `-Delay`, `-Retry-Delay`, `-Timeout`, ...).
 * `cursor` is omitted when nothing is left.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { svcHeadersWithPrefix } from '../../http/headers.js';
import { newMessageId } from '../build.js';
import { queueError } from '../errors.js';
import type { DlqEntry, MessageFilter, NewMessage, PublishOptions } from '../model.js';
import { dlqJson } from '../message-json.js';
import type { QueueApiContext } from './context.js';
import { jsonBody, stringList } from './messages.js';
import { parseOptions } from '../options.js';
import { parseFilter, parsePage, type Query } from './query.js';

const MAX_COUNT = 100;

/** A new message from a DLQ entry, with the overrides the retry request's headers carry. */
function retriedMessage(e: DlqEntry, cfg: Record<string, string>, over: PublishOptions, now: number): NewMessage {
  const m = e.message;
  const has = (k: string) => cfg[k] !== undefined;
  const dueAt = over.notBefore ?? (over.delayMs ? now + over.delayMs : now);
  return {
    ...m,
    id: newMessageId(),
    createdAt: now,
    dueAt,
    notBefore: has('not-before') || has('delay') ? dueAt : undefined,
    maxRetries: has('retries') ? over.maxRetries : m.maxRetries,
    retryDelay: has('retry-delay') ? over.retryDelay : m.retryDelay,
    timeoutMs: has('timeout') ? over.timeoutMs : m.timeoutMs,
    callback: has('callback') ? over.callback : m.callback,
    callbackOptions: has('callback') ? over.callbackOptions : m.callbackOptions,
    failureCallback: has('failure-callback') ? over.failureCallback : m.failureCallback,
    failureCallbackOptions: has('failure-callback') ? over.failureCallbackOptions : m.failureCallbackOptions,
    labels: has('label') ? over.labels : m.labels,
    flowControlKey: has('flow-control-key') ? over.flowControlKey : m.flowControlKey,
    flowControl: has('flow-control-key') ? over.flowControl : m.flowControl,
    dedupKey: undefined,
  };
}

function bulkFilter(req: FastifyRequest): { filter: MessageFilter; limit: number } {
  const q = req.query as Query;
  const body = jsonBody(req);
  const bodyIds = stringList(body, 'dlqIds');
  const filter = parseFilter(q, 'dlq');
  const ids = bodyIds ?? filter.dlqIds;
  const page = parsePage(q, Number.MAX_SAFE_INTEGER, MAX_COUNT);
  // dlqIds given: other filters are ignored.
  if (ids) return { filter: { dlqIds: ids }, limit: Math.max(ids.length, 1) };
  return { filter, limit: page.count };
}

export function registerDlqRoutes(app: FastifyInstance, ctx: QueueApiContext): void {
  app.get('/v2/dlq', async (req: FastifyRequest) => {
    const q = req.query as Query;
    if (q.source === 'workflow' && ctx.workflows) return ctx.workflows.listDlq(q); // failed workflow runs
    const { source: _source, ...rest } = q;
    let filter = parseFilter(rest, 'dlq');
    if (filter.dlqIds) filter = { dlqIds: filter.dlqIds };
    const page = await ctx.store.listDlq(filter, { ...parsePage(q, MAX_COUNT), maxBytes: ctx.config.maxPageBytes });
    const messages = await Promise.all(page.items.map(async (e) => ({ ...dlqJson(e), ...(await ctx.workflows?.dlqFields(e)) })));
    return { messages, ...(page.cursor ? { cursor: page.cursor } : {}) };
  });

  app.get('/v2/dlq/:dlqId', async (req: FastifyRequest<{ Params: { dlqId: string } }>) => {
    const e = await ctx.store.getDlq(req.params.dlqId);
    if (!e) throw queueError('dlqMessageNotFound', req.params.dlqId);
    return { ...dlqJson(e), ...(await ctx.workflows?.dlqFields(e)) };
  });

  app.delete('/v2/dlq/:dlqId', async (req: FastifyRequest<{ Params: { dlqId: string } }>) => {
    const r = await ctx.store.deleteDlq({ dlqIds: [req.params.dlqId] }, 1);
    if (r.deleted === 0) throw queueError('dlqMessageNotFound', req.params.dlqId);
    return { deleted: 1 };
  });

  app.delete('/v2/dlq', async (req: FastifyRequest) => {
    const { filter, limit } = bulkFilter(req);
    const r = await ctx.store.deleteDlq(filter, limit);
    return { deleted: r.deleted, ...(r.more ? { cursor: String(r.deleted) } : {}) };
  });

  const retry = async (req: FastifyRequest, filter: MessageFilter, limit: number) => {
    const now = ctx.clock.now();
    const cfg = svcHeadersWithPrefix(req.headers, '');
    const over = parseOptions(cfg, undefined, now, { blockPrivate: ctx.config.blockPrivateDestinations, maxRetries: ctx.config.maxRetries });
    const r = await ctx.store.retryDlq(filter, limit, now, (e) => retriedMessage(e, cfg, over, now));
    if (r.messageIds.length) ctx.dispatcher.notify(now + (over.delayMs ?? 0));
    return r;
  };

  app.post('/v2/dlq/retry/:dlqId', async (req: FastifyRequest<{ Params: { dlqId: string } }>, reply) => {
    const r = await retry(req, { dlqIds: [req.params.dlqId] }, 1);
    if (r.messageIds.length === 0) throw queueError('dlqMessageNotFound', req.params.dlqId);
    reply.code(201);
    return { messageId: r.messageIds[0] };
  });

  app.post('/v2/dlq/retry', async (req: FastifyRequest) => {
    const { filter, limit } = bulkFilter(req);
    const r = await retry(req, filter, limit);
    return { responses: r.messageIds.map((messageId) => ({ messageId })), ...(r.more ? { cursor: String(r.messageIds.length) } : {}) };
  });
}

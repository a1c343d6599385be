/**
 * The event log (spec "List events"):
 *   GET /v2/events -> `{cursor?, events}`, count default/max 1000
 *   GET /v2/logs   -> `{cursor?, logs}`,   count default/max 100
 * Filters: messageId(s), state (incl. IN_PROGRESS), url, topicName, scheduleId, queueName, label,
 * flowControlKey, callerIp, host, path, fromDate, toDate; `order` (default latestFirst).
 * A page also ends before the bodies it carries pass `SVC_QUEUE_MAX_PAGE_BYTES` (at least one entry;
 * the cursor continues there), so a page of large messages stays small and quick to build.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { logJson } from '../message-json.js';
import type { QueueApiContext } from './context.js';
import { parseFilter, parsePage, type Query } from './query.js';

export function registerLogRoutes(app: FastifyInstance, ctx: QueueApiContext): void {
  const list = (field: 'events' | 'logs', max: number) => async (req: FastifyRequest) => {
    const q = req.query as Query;
    const page = await ctx.store.listLogs(parseFilter(q, 'logs'), { ...parsePage(q, max), maxBytes: ctx.config.maxPageBytes });
    return { [field]: page.items.map(logJson), ...(page.cursor ? { cursor: page.cursor } : {}) };
  };
  app.get('/v2/events', list('events', 1000));
  app.get('/v2/logs', list('logs', 100));
}

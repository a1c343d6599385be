/**
 * Schedules: `POST /v2/schedules/{destination}`
 * with `Upstash-Cron` (every publish header applies to the messages it creates;
 * `Upstash-Schedule-Id` upserts; `Upstash-Queue-Name` targets a queue; the destination may be a
 * URL group) -> `{scheduleId}`; `GET /v2/schedules`, `GET|DELETE /v2/schedules/{id}`;
 * `POST|PATCH /v2/schedules/{id}/pause|resume` (SDK PATCH, OpenAPI POST).
 */
import { randomBytes } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { svcHeadersWithPrefix } from '../../http/headers.js';
import { queueError } from '../errors.js';
import { parseCron } from '../schedules/cron.js';
import type { Scheduler } from '../schedules/scheduler.js';
import type { ScheduleStore, ScheduleRecord } from '../store/resource-types.js';
import { bodyFields } from '../message-json.js';
import type { QueueApiContext } from './context.js';
import { DEFAULT_FLOW_PERIOD_S, parseOptions } from '../options.js';
import { destinationFromRawUrl, targetsFor } from './publish.js';
import { checkName } from './topics.js';

const STATE: Record<string, string> = { pending: 'IN_PROGRESS', delivered: 'SUCCESS', failed: 'FAIL', cancelled: 'FAIL' };

/** The wire `Schedule`. */
export async function scheduleJson(s: ScheduleRecord, schedules: ScheduleStore): Promise<Record<string, unknown>> {
  const o = s.options;
  const statuses = await schedules.messageStatuses(s.lastMessageIds);
  const states: Record<string, string> = {};
  for (const [id, st] of Object.entries(statuses)) states[id] = STATE[st] ?? 'IN_PROGRESS';
  return {
    scheduleId: s.id,
    cron: s.cron,
    createdAt: s.createdAt,
    destination: s.destination,
    method: o.method,
    header: o.headers,
    ...bodyFields(s.body),
    retries: o.maxRetries,
    ...(o.delayMs ? { delay: Math.round(o.delayMs / 1000) } : {}),
    ...(o.callback ? { callback: o.callback } : {}),
    ...(o.failureCallback ? { failureCallback: o.failureCallback } : {}),
    ...(o.retryDelay ? { retryDelayExpression: o.retryDelay } : {}),
    ...(o.timeoutMs ? { timeout: Math.round(o.timeoutMs / 1000) } : {}),
    ...(s.callerIp ? { callerIp: s.callerIp, callerIP: s.callerIp } : {}),
    isPaused: s.paused,
    ...(s.queueName ? { queueName: s.queueName } : {}),
    ...(o.flowControlKey ? { flowControlKey: o.flowControlKey, parallelism: o.flowControl?.parallelism, rate: o.flowControl?.rate, period: o.flowControl?.period ?? DEFAULT_FLOW_PERIOD_S } : {}),
    ...(o.labels?.length ? { label: o.labels[0], labels: o.labels } : {}),
    ...(s.lastTime !== undefined ? { lastScheduleTime: s.lastTime } : {}),
    ...(s.nextTime !== undefined ? { nextScheduleTime: s.nextTime } : {}),
    ...(s.lastMessageIds.length ? { lastScheduleStates: states } : {}),
  };
}

export function registerScheduleRoutes(app: FastifyInstance, ctx: QueueApiContext, schedules: ScheduleStore, scheduler: Scheduler): void {
  type P = FastifyRequest<{ Params: { id: string } }>;

  app.post('/v2/schedules/*', async (req: FastifyRequest) => {
    const dest = destinationFromRawUrl(req.raw.url ?? '', '/v2/schedules/');
    if (!dest) throw queueError('missingDestination', dest);
    const cfg = svcHeadersWithPrefix(req.headers, '');
    if (cfg['cron'] === undefined) throw queueError('cronRequired');
    const cron = parseCron(cfg['cron']);
    const body = (req.body as Buffer | undefined) ?? Buffer.alloc(0);
    if (body.length > ctx.config.maxMessageBytes) throw queueError('messageTooLarge', body.length, ctx.config.maxMessageBytes);
    const now = ctx.clock.now();
    const opts = parseOptions(cfg, req.headers['content-type'], now, { blockPrivate: ctx.config.blockPrivateDestinations, maxRetries: ctx.config.maxRetries });
    delete opts.deduplicationId;
    delete opts.contentBasedDeduplication;
    delete opts.notBefore;
    await targetsFor(ctx, dest); // validates the URL / that the URL group exists
    const queueName = cfg['queue-name'];
    if (queueName !== undefined) checkName('queue', queueName);
    const id = cfg['schedule-id'] ?? `scd_${randomBytes(16).toString('base64url')}`;
    if (!id || id.length > 256) throw queueError('invalidScheduleId', id);
    const old = await schedules.getSchedule(id);
    await schedules.upsertSchedule({
      id,
      cron: cron.text,
      destination: dest,
      options: opts,
      body,
      queueName,
      callerIp: req.ip,
      paused: old?.paused ?? false,
      createdAt: old?.createdAt ?? now,
      nextTime: old?.paused ? undefined : cron.next(now),
      lastMessageIds: old?.lastMessageIds ?? [],
    });
    scheduler.poke();
    return { scheduleId: id };
  });

  app.get('/v2/schedules', async () => Promise.all((await schedules.listSchedules()).map((s) => scheduleJson(s, schedules))));

  app.get('/v2/schedules/:id', async (req: P) => {
    const s = await schedules.getSchedule(req.params.id);
    if (!s) throw queueError('scheduleNotFound', req.params.id);
    return scheduleJson(s, schedules);
  });

  app.delete('/v2/schedules/:id', async (req: P, reply) => {
    if (!(await schedules.deleteSchedule(req.params.id))) throw queueError('scheduleNotFound', req.params.id);
    return reply.code(200).send();
  });

  for (const action of ['pause', 'resume'] as const) {
    const handler = async (req: P, reply: import('fastify').FastifyReply) => {
      const s = await schedules.getSchedule(req.params.id);
      if (!s) throw queueError('scheduleNotFound', req.params.id);
      const next = action === 'pause' ? undefined : parseCron(s.cron).next(ctx.clock.now());
      await schedules.setSchedulePaused(s.id, action === 'pause', next);
      scheduler.poke();
      return reply.code(200).send();
    };
    app.post(`/v2/schedules/:id/${action}`, handler);
    app.patch(`/v2/schedules/:id/${action}`, handler);
  }
}

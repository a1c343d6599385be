/**
 * The user-managed resources of the queue — URL groups, queues, flow-control keys, schedules —
 * wired into the queue server: URL-group destination resolution, the admission gate (queues +
 * flow control) as the enqueue service's admission hook and as a dispatcher listener, the
 * scheduler, and the routes of `api/{topics,queues,schedules,flow-control}.ts`.
 */
import type { FastifyInstance } from 'fastify';
import type { CounterCell } from '../metrics.js';
import type { Logger } from '../logger.js';
import type { QueueApiContext } from './api/context.js';
import { registerFlowControlRoutes } from './api/flow-control.js';
import { registerQueueRoutes } from './api/queues.js';
import { registerScheduleRoutes } from './api/schedules.js';
import { registerTopicRoutes, resolveUrlGroup } from './api/topics.js';
import { targetsFor } from './api/publish.js';
import { buildMessage } from './build.js';
import { AdmissionGate } from './flow-control/gate.js';
import { Scheduler } from './schedules/scheduler.js';
import type { QueueStore } from './store/types.js';

export interface QueueResources {
  gate: AdmissionGate;
  scheduler: Scheduler;
  /** Starts the gate and the scheduler (after the dispatcher started). */
  start(): void;
  stop(): void;
}

/**
 * Extends `ctx` (resolveDestination, admission), hooks the dispatcher and registers the routes.
 * Call before the server listens. `shared`: the store is shared by several nodes (PostgreSQL);
 * `scheduleFires` counts fired schedule occurrences (metrics).
 */
export function attachResources(
  app: FastifyInstance,
  ctx: QueueApiContext,
  store: QueueStore,
  logger: Logger,
  opts: { shared?: boolean; scheduleFires?: CounterCell } = {},
): QueueResources {
  const previous = ctx.resolveDestination;
  ctx.resolveDestination = async (dest) => (await resolveUrlGroup(store.urlGroups(), dest)) ?? previous(dest);

  const queues = store.queues();
  const flows = store.flowControl();
  const gate = new AdmissionGate({
    queues,
    flows,
    clock: ctx.clock,
    logger,
    onRelease: (now) => ctx.dispatcher.notify(now),
    owner: opts.shared ? ctx.dispatcher.owner : undefined,
  });
  ctx.enqueue.admission = gate;
  ctx.dispatcher.addStartListener((m, at) => gate.onStart(m, at));
  // every started attempt ends once, recorded or not (a running count must not leak)
  ctx.dispatcher.addEndListener((m, at) => {
    gate.onEnd(m, at);
    if (m.queueName !== undefined || m.flowControlKey !== undefined) gate.kick();
  });

  const scheduler = new Scheduler({
    schedules: store.schedules(),
    clock: ctx.clock,
    logger,
    maxSleepMs: opts.shared ? 1000 : undefined,
    async build(s, now) {
      let targets;
      try {
        targets = (await targetsFor(ctx, s.destination)).targets;
      } catch (err) {
        logger.warn({ err, scheduleId: s.id }, 'queue: schedule destination no longer resolves; firing skipped');
        return [];
      }
      const msgs = targets.map((t) => buildMessage(s.options, { ...t, scheduleId: s.id, queueName: s.queueName }, s.body, now, { callerIp: s.callerIp }));
      await ctx.enqueue.prepare(msgs, now);
      return msgs;
    },
    fired(msgs, now) {
      opts.scheduleFires?.inc();
      ctx.enqueue.stored(msgs, now);
    },
  });

  registerTopicRoutes(app, ctx, store.urlGroups());
  registerQueueRoutes(app, ctx, queues, gate);
  registerScheduleRoutes(app, ctx, store.schedules(), scheduler);
  registerFlowControlRoutes(app, ctx, flows, gate);

  return {
    gate,
    scheduler,
    start() {
      gate.start();
      scheduler.start();
    },
    stop() {
      scheduler.stop();
      gate.stop();
    },
  };
}

/**
 * Flow control: `GET /v2/flowControl` (list, `search`
 * substring), `GET /v2/flowControl/{key}`, `POST /v2/flowControl/{key}/pause|resume|pin|unpin|
 * resetRate|reset`, `GET /v2/globalParallelism`. Key shape (SDK `FlowControlInfo`):
 * `{flowControlKey, waitListSize, parallelismMax, parallelismCount, rateMax, rateCount,
 * ratePeriod (s), ratePeriodStart (ms), isPaused, isPinnedParallelism, isPinnedRate}`.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { parseDuration } from '../delivery/backoff.js';
import { queueError } from '../errors.js';
import { MAX_FLOW_CONTROL_NUMBER } from '../options.js';
import { effectiveLimits, type AdmissionGate } from '../flow-control/gate.js';
import type { FlowKeyState, FlowControlStore } from '../store/resource-types.js';
import type { QueueApiContext } from './context.js';

type Q = Record<string, string | string[] | undefined>;
const one = (q: Q, k: string) => (Array.isArray(q[k]) ? (q[k] as string[])[0] : (q[k] as string | undefined));

function positiveInt(q: Q, k: string): number | undefined {
  const v = one(q, k);
  if (v === undefined || v === '') return undefined;
  if (!/^\d+$/.test(v) || Number(v) <= 0 || Number(v) > MAX_FLOW_CONTROL_NUMBER) throw queueError('invalidPinNumber', k, v);
  return Number(v);
}

export function registerFlowControlRoutes(app: FastifyInstance, ctx: QueueApiContext, flows: FlowControlStore, gate: AdmissionGate): void {
  type P = FastifyRequest<{ Params: { key: string }; Querystring: Q }>;

  const info = async (k: FlowKeyState) => {
    const lim = effectiveLimits(k);
    const rate = await gate.sharedRateState(k.key, lim.periodS, ctx.clock.now());
    return {
      flowControlKey: k.key,
      waitListSize: k.waiting,
      parallelismMax: lim.parallelism ?? 0,
      parallelismCount: k.admitted,
      rateMax: lim.rate ?? 0,
      rateCount: rate.count,
      ratePeriod: lim.periodS,
      ratePeriodStart: rate.periodStart,
      isPaused: k.paused,
      isPinnedParallelism: k.pinnedParallelism !== undefined,
      isPinnedRate: k.pinnedRate !== undefined,
    };
  };
  const known = async (key: string) => {
    const k = await flows.getFlowKey(key);
    if (!k) throw queueError('flowControlKeyNotFound', key);
    return k;
  };

  app.get('/v2/flowControl', async (req: FastifyRequest<{ Querystring: Q }>) => Promise.all((await flows.listFlowKeys(one(req.query, 'search'))).map(info)));
  app.get('/v2/flowControl/:key', async (req: P) => info(await known(req.params.key)));
  app.get('/v2/globalParallelism', async () => ({ parallelismMax: ctx.config.maxConcurrentDeliveries, parallelismCount: ctx.dispatcher.busy }));

  for (const action of ['pause', 'resume'] as const) {
    app.post(`/v2/flowControl/:key/${action}`, async (req: P, reply) => {
      if (!(await flows.setFlowPaused(req.params.key, action === 'pause', ctx.clock.now()))) throw queueError('flowControlKeyNotFound', req.params.key);
      gate.kick();
      return reply.code(200).send();
    });
  }

  app.post('/v2/flowControl/:key/pin', async (req: P, reply) => {
    const parallelism = positiveInt(req.query, 'parallelism');
    const rate = positiveInt(req.query, 'rate');
    const p = one(req.query, 'period');
    let periodS: number | undefined;
    if (p !== undefined && p !== '') {
      const ms = /^\d+$/.test(p) ? Number(p) * 1000 : parseDuration(p);
      if (ms === undefined || ms <= 0 || Math.round(ms / 1000) > MAX_FLOW_CONTROL_NUMBER) throw queueError('invalidPinPeriod', p);
      periodS = Math.round(ms / 1000);
    }
    if (parallelism === undefined && rate === undefined) throw queueError('emptyPin');
    if (!(await flows.pinFlow(req.params.key, { parallelism, rate, periodS }, ctx.clock.now()))) throw queueError('flowControlKeyNotFound', req.params.key);
    gate.resetRate(req.params.key); // pin resets the rate state
    return reply.code(200).send();
  });

  app.post('/v2/flowControl/:key/unpin', async (req: P, reply) => {
    const flag = (k: string) => one(req.query, k) === 'true';
    if (!(await flows.unpinFlow(req.params.key, { parallelism: flag('parallelism'), rate: flag('rate') }, ctx.clock.now()))) {
      throw queueError('flowControlKeyNotFound', req.params.key);
    }
    gate.kick();
    return reply.code(200).send();
  });

  for (const action of ['resetRate', 'reset'] as const) {
    app.post(`/v2/flowControl/:key/${action}`, async (req: P, reply) => {
      await known(req.params.key);
      gate.resetRate(req.params.key);
      return reply.code(200).send();
    });
  }
}

/**
 * Queues: `POST /v2/enqueue/{queue}/{destination}` (a publish into
 * a queue, created if missing: `publishTo` of `api/publish.ts`, same answer), `POST /v2/queues` (upsert `{queueName,
 * parallelism, paused}`), `GET /v2/queues`, `GET|DELETE /v2/queues/{name}`,
 * `POST /v2/queues/{name}/pause|resume`. Ordering and parallelism are enforced by the admission
 * gate (`flow-control/gate.ts`).
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { queueError } from '../errors.js';
import type { AdmissionGate } from '../flow-control/gate.js';
import type { QueueAdmissionStore } from '../store/resource-types.js';
import type { QueueApiContext } from './context.js';
import { jsonBody, withoutNulls } from './messages.js';
import { destinationFromRawUrl, publishTo, tryDecode } from './publish.js';
import { checkName } from './topics.js';

/** Largest queue parallelism accepted (QStash plans cap it; ours is a sanity bound). */
export const MAX_QUEUE_PARALLELISM = 1000;

export function registerQueueRoutes(app: FastifyInstance, ctx: QueueApiContext, queues: QueueAdmissionStore, gate: AdmissionGate): void {
  type P = FastifyRequest<{ Params: { name: string } }>;

  app.post('/v2/enqueue/*', async (req: FastifyRequest, reply) => {
    const raw = req.raw.url ?? '';
    const rest = raw.slice(raw.indexOf('/v2/enqueue/') + '/v2/enqueue/'.length);
    const slash = rest.indexOf('/');
    if (slash <= 0) throw queueError('enqueuePath');
    const queueName = tryDecode(rest.slice(0, slash));
    if (queueName === undefined) throw queueError('queueNameEncoding', rest.slice(0, slash));
    checkName('queue', queueName);
    const dest = destinationFromRawUrl(raw, `/v2/enqueue/${rest.slice(0, slash)}/`);
    const body = (req.body as Buffer | undefined) ?? Buffer.alloc(0);
    const { status, payload } = await publishTo(ctx, dest, req.headers, body, req.ip, queueName);
    reply.code(status);
    return payload;
  });

  app.post('/v2/queues', async (req: FastifyRequest, reply) => {
    const b = withoutNulls(jsonBody(req)); // `"paused": null` = not given
    const name = b.queueName;
    if (typeof name !== 'string' || !name) throw queueError('queueNameRequired');
    checkName('queue', name);
    const p = b.parallelism;
    if (p !== undefined && (typeof p !== 'number' || !Number.isInteger(p) || p < 1 || p > MAX_QUEUE_PARALLELISM)) {
      throw queueError('invalidParallelism', MAX_QUEUE_PARALLELISM);
    }
    if (b.paused !== undefined && typeof b.paused !== 'boolean') throw queueError('pausedNotBoolean');
    await queues.upsertQueue(name, { parallelism: p as number | undefined, paused: b.paused as boolean | undefined }, ctx.clock.now());
    gate.kick();
    return reply.code(200).send();
  });

  app.get('/v2/queues', async () => queues.listQueues());

  app.get('/v2/queues/:name', async (req: P) => {
    const q = await queues.getQueue(req.params.name);
    if (!q) throw queueError('queueNotFound', req.params.name);
    return q;
  });

  app.delete('/v2/queues/:name', async (req: P, reply) => {
    gate.forgetQueue(req.params.name);
    if (!(await queues.deleteQueue(req.params.name, ctx.clock.now()))) throw queueError('queueNotFound', req.params.name);
    return reply.code(200).send();
  });

  for (const action of ['pause', 'resume'] as const) {
    app.post(`/v2/queues/:name/${action}`, async (req: P, reply) => {
      if (!(await queues.setQueuePaused(req.params.name, action === 'pause', ctx.clock.now()))) throw queueError('queueNotFound', req.params.name);
      if (action === 'resume') gate.kick();
      return reply.code(200).send();
    });
  }
}

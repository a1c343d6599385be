/**
 * Workflow-run endpoints (spec "Restart / Resume / Delete a failed workflow run",
 * workflow-js `src/client/index.ts`, `src/client/dlq.ts`, `src/workflow-requests.ts`):
 *
 *   POST   /v2/dlq/restart/{dlqId}, /v2/workflows/dlq/restart/{dlqId}     -> {workflowRunId, workflowCreatedAt}
 *   GET|POST /v2/dlq/resume/{dlqId}, POST /v2/workflows/dlq/resume/{dlqId} -> same
 *   POST   /v2/workflows/dlq/restart|resume?dlqIds=..|filters             -> {workflowRuns, cursor?} (SDK client.dlq)
 *   GET    /v2/workflows/dlq, GET /v2/workflows/dlq/{dlqId}               failed runs (also GET /v2/dlq?source=workflow)
 *   DELETE /v2/workflows/dlq/{dlqId}                                      -> {deleted: 1}; 400 malformed id,
 *                                                                          404 unknown, 400 not a workflow run
 *   DELETE /v2/workflows/dlq?dlqIds=..|filters                            -> {deleted, cursor?}
 *   DELETE /v2/workflows/runs/{id}?cancel=true|false                      end of a run (SDK) / cancel
 *   DELETE /v2/workflows/runs?workflowRunIds=..|filters                   bulk cancel -> {cancelled}
 *   GET    /v2/workflows/runs/{id}                                        step list (lazy fetch); 404 when ended;
 *                                                                          never cut: the SDK replays the run from it
 *                                                                          (its getSteps reads one array, no cursor)
 *   POST   /v2/workflows/dlq/callback/{dlqId}                             re-run a failed failure function
 *   GET    /v2/workflows/events, /v2/workflows/logs                       -> {runs, cursor?}
 * Override headers of restart/resume: `Svc-`/`Upstash-` `Workflow-RunId`, `Retries`,
 * `Flow-Control-Key`, `Flow-Control-Value`.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { queueTokenUserId } from '../../credentials.js';
import { svcHeadersWithPrefix } from '../../http/headers.js';
import { queueError } from '../errors.js';
import type { RunFilter, RunState, WorkflowRun } from '../store/workflow-types.js';
import { dlqJson } from '../message-json.js';
import { rawSteps, triggerId, type WorkflowEngine } from '../workflows/run-engine.js';
import { deleteFailedRun, DLQ_ID, failedRun, recoverRun, retryFailureCallback, type RecoveredRun } from '../workflows/recovery.js';
import { runLogJson, workflowDlqFields } from '../workflows/run-json.js';
import { notify, wait, waitersJson, webhookEventData } from '../workflows/events.js';
import { sdkQueueToken } from '../token.js';
import { CREDENTIALS, type QueueApiContext } from './context.js';
import { checkQueryFields, QUERY_FIELDS, queryValues, UNSUPPORTED_FIELDS, type Query } from './query.js';

const RUN_STATES: RunState[] = ['RUN_STARTED', 'RUN_SUCCESS', 'RUN_FAILED', 'RUN_CANCELED'];
/** At most this many runs per bulk restart/resume request. */
const MAX_BULK_RECOVER = 50;

function int(q: Query, name: string): number | undefined {
  const v = queryValues(q, name)?.[0];
  if (v === undefined) return undefined;
  if (!/^\d+$/.test(v)) throw queueError('invalidInteger', name, v);
  return Number(v);
}

/** Query -> {@link RunFilter} for the workflow DLQ, logs and bulk endpoints. */
export function parseRunFilter(q: Query, kind: 'dlq' | 'logs' | 'cancel'): RunFilter {
  checkQueryFields(q, QUERY_FIELDS.runs[kind], UNSUPPORTED_FIELDS.runs);
  const f: RunFilter = {
    runIds: queryValues(q, 'workflowRunId', 'workflowRunIds'),
    label: queryValues(q, 'label'),
    flowControlKey: queryValues(q, 'flowControlKey'),
    callerIp: queryValues(q, 'callerIp', 'callerIP'),
    createdAt: int(q, 'workflowCreatedAt'),
    fromDate: int(q, 'fromDate'),
    toDate: int(q, 'toDate'),
  };
  const urls = queryValues(q, 'workflowUrl', ...(kind === 'dlq' ? ['url'] : []));
  if (urls) {
    const exact = kind !== 'cancel' || queryValues(q, 'workflowUrlExactMatch')?.[0] === 'true';
    if (exact) f.url = urls;
    else f.urlPrefix = urls[0];
  }
  if (kind === 'dlq') {
    f.inDlq = true;
    f.dlqIds = queryValues(q, 'dlqIds', 'dlqId');
    f.failureState = queryValues(q, 'failureFunctionState')?.[0];
  }
  if (kind === 'logs') {
    const st = queryValues(q, 'state');
    if (st) {
      const up = st.map((s) => s.toUpperCase());
      const bad = up.find((s) => !RUN_STATES.includes(s as RunState));
      if (bad) throw queueError('invalidState', bad, RUN_STATES.join(', '));
      f.states = up as RunState[];
    }
  }
  return f;
}

function page(q: Query, def: number, max: number): { count: number; cursor?: number } {
  const c = int(q, 'count');
  if (c !== undefined && c < 1) throw queueError('invalidCount');
  return { count: Math.min(max, c ?? def), cursor: int(q, 'cursor') };
}

/** One page of the runs matching `f` (newest first): `count` from `q` (default `def`, at most 100), `cursor` when more follow. */
async function runPage(engine: WorkflowEngine, q: Query, f: RunFilter, def: number): Promise<{ runs: WorkflowRun[]; cursor?: string }> {
  const p = page(q, def, 100);
  const runs = await engine.runs.listRuns(f, p.count + 1, p.cursor);
  const take = runs.slice(0, p.count);
  return { runs: take, ...(runs.length > p.count ? { cursor: String(take[take.length - 1].seq) } : {}) };
}

/** Registers the workflow routes; `engine` is the area's {@link WorkflowEngine}. */
export function registerWorkflowRoutes(app: FastifyInstance, ctx: QueueApiContext, engine: WorkflowEngine): void {
  const cfgOf = (req: FastifyRequest) => svcHeadersWithPrefix(req.headers, '');

  const single = (mode: 'restart' | 'resume') => async (req: FastifyRequest<{ Params: { dlqId: string } }>) => {
    const r = await recoverRun(ctx.store, engine, mode, req.params.dlqId, cfgOf(req), ctx.clock.now());
    ctx.dispatcher.notify(ctx.clock.now());
    return r;
  };
  app.post('/v2/dlq/restart/:dlqId', single('restart'));
  app.post('/v2/workflows/dlq/restart/:dlqId', single('restart'));
  app.post('/v2/dlq/resume/:dlqId', single('resume'));
  app.get('/v2/dlq/resume/:dlqId', single('resume'));
  app.post('/v2/workflows/dlq/resume/:dlqId', single('resume'));

  /** Failed runs selected by `dlqIds` or filters, with a cursor when more remain. */
  const selectFailed = async (q: Query, max: number) => {
    const f = parseRunFilter(q, 'dlq');
    const p = page(q, 100, max);
    const runs = await engine.runs.listRuns(f, p.count + 1, p.cursor);
    const more = runs.length > p.count;
    const take = runs.slice(0, p.count);
    return { runs: take, cursor: more ? String(take[take.length - 1].seq) : undefined };
  };

  const bulk = (mode: 'restart' | 'resume') => async (req: FastifyRequest) => {
    const { runs, cursor } = await selectFailed(req.query as Query, MAX_BULK_RECOVER);
    const cfg = cfgOf(req);
    const out: RecoveredRun[] = [];
    for (const run of runs) {
      if (!run.dlqId) continue;
      if (!(await ctx.store.getDlq(run.dlqId))) continue;
      out.push(await recoverRun(ctx.store, engine, mode, run.dlqId, cfg, ctx.clock.now()));
    }
    if (out.length) ctx.dispatcher.notify(ctx.clock.now());
    return { workflowRuns: out, ...(cursor ? { cursor } : {}) };
  };
  app.post('/v2/workflows/dlq/callback/:dlqId', async (req: FastifyRequest<{ Params: { dlqId: string } }>) => {
    const now = ctx.clock.now();
    const r = await retryFailureCallback(ctx.store, engine, req.params.dlqId, now);
    ctx.dispatcher.notify(now);
    return r;
  });
  app.post('/v2/workflows/dlq/restart', bulk('restart'));
  app.post('/v2/workflows/dlq/resume', bulk('resume'));

  const entryJson = async (run: WorkflowRun) => {
    const e = run.dlqId ? await ctx.store.getDlq(run.dlqId) : undefined;
    return e ? { ...dlqJson(e), ...workflowDlqFields(e, run) } : undefined;
  };

  const listFailed = async (req: FastifyRequest) => {
    const { runs, cursor } = await selectFailed(req.query as Query, 100);
    const messages = (await Promise.all(runs.map(entryJson))).filter((x) => x !== undefined);
    return { messages, ...(cursor ? { cursor } : {}) };
  };
  app.get('/v2/workflows/dlq', listFailed);

  app.get('/v2/workflows/dlq/:dlqId', async (req: FastifyRequest<{ Params: { dlqId: string } }>) => {
    const { run } = await failedRun(ctx.store, engine, req.params.dlqId);
    return entryJson(run);
  });

  app.delete('/v2/workflows/dlq/:dlqId', async (req: FastifyRequest<{ Params: { dlqId: string } }>) => {
    await deleteFailedRun(ctx.store, engine, req.params.dlqId);
    return { deleted: 1 };
  });

  app.delete('/v2/workflows/dlq', async (req: FastifyRequest) => {
    const { runs, cursor } = await selectFailed(req.query as Query, 100);
    let deleted = 0;
    for (const run of runs) {
      if (run.dlqId) deleted += (await ctx.store.deleteDlq({ dlqIds: [run.dlqId] }, 1)).deleted;
    }
    return { deleted, ...(cursor ? { cursor } : {}) };
  });

  // End of a run (SDK `triggerWorkflowDelete`: cancel=false, body = JSON result) or cancel.
  app.delete('/v2/workflows/runs/:id', async (req: FastifyRequest<{ Params: { id: string }; Querystring: Query }>) => {
    const cancel = queryValues(req.query, 'cancel')?.[0] === 'true';
    const created = svcHeadersWithPrefix(req.headers, '')['workflow-createdat'];
    const run = await engine.runs.findRun(req.params.id, created && /^\d+$/.test(created) ? Number(created) : undefined);
    if (!run) throw queueError('workflowRunNotFound', req.params.id);
    if (run.state !== 'RUN_STARTED') return { workflowRunId: run.runId, state: run.state };
    const now = ctx.clock.now();
    if (cancel) {
      await cancelRun(run, now);
    } else {
      const raw = (req.body as Buffer | undefined)?.toString('utf8');
      await engine.finish(run, 'RUN_SUCCESS', now, { response: raw === undefined || raw === '' ? undefined : raw });
    }
    return { workflowRunId: run.runId, state: cancel ? 'RUN_CANCELED' : 'RUN_SUCCESS' };
  });

  const cancelRun = async (run: WorkflowRun, now: number) => {
    const ok = await engine.finish(run, 'RUN_CANCELED', now);
    if (!ok) return false;
    const ids = [triggerId(run), ...(await engine.runs.steps(run.seq)).map((s) => s.messageId)];
    await ctx.store.cancel({ messageIds: ids }, now);
    return true;
  };

  app.delete('/v2/workflows/runs', async (req: FastifyRequest) => {
    const q = req.query as Query;
    const f = parseRunFilter(q, 'cancel');
    f.states = ['RUN_STARTED'];
    const p = page(q, 100, 1000);
    const runs = await engine.runs.listRuns(f, p.count);
    const now = ctx.clock.now();
    let cancelled = 0;
    for (const run of runs) if (await cancelRun(run, now)) cancelled++;
    return { cancelled };
  });

  app.get('/v2/workflows/runs/:id', async (req: FastifyRequest<{ Params: { id: string } }>) => {
    const run = await engine.runs.findRun(req.params.id);
    if (!run || run.state !== 'RUN_STARTED') throw queueError('workflowRunNotFound', req.params.id);
    return rawSteps(run, await engine.runs.steps(run.seq), triggerId(run));
  });

  const logs = async (req: FastifyRequest) => {
    const q = req.query as Query;
    const f = parseRunFilter(q, 'logs');
    const messageId = queryValues(q, 'messageId')?.[0];
    const { runs, cursor } = await runPage(engine, q, f, 10);
    const out: Record<string, unknown>[] = [];
    // a page ends before the run that would pass SVC_QUEUE_MAX_PAGE_BYTES of JSON (at least one
    // run): 100 runs of many large steps would otherwise be built into one answer of gigabytes
    let bytes = 0;
    let seen: WorkflowRun | undefined;
    for (const run of runs) {
      if (out.length > 0 && bytes >= ctx.config.maxPageBytes) return { runs: out, cursor: String(seen!.seq) };
      seen = run;
      const steps = await engine.runs.steps(run.seq);
      if (messageId && triggerId(run) !== messageId && !steps.some((s) => s.messageId === messageId)) continue;
      // one run of many steps is cut too (its oldest steps left out, `stepsOmitted`)
      const json = runLogJson(run, steps, ctx.config.maxPageBytes);
      bytes += JSON.stringify(json).length;
      out.push(json);
    }
    return { runs: out, ...(cursor ? { cursor } : {}) };
  };
  app.get('/v2/workflows/events', logs);
  app.get('/v2/workflows/logs', logs);
}

/** `GET /v2/dlq?source=workflow` and the workflow fields of plain DLQ listings (hook of `api/dlq.ts`). */
export function workflowDlqHooks(ctx: QueueApiContext, engine: WorkflowEngine) {
  return {
    async dlqFields(entry: Parameters<typeof workflowDlqFields>[0]) {
      if (!entry.message.workflow) return undefined;
      const run = DLQ_ID.test(entry.dlqId) ? await engine.runs.runByDlqId(entry.dlqId) : undefined;
      return workflowDlqFields(entry, run);
    },
    async listDlq(q: Query) {
      const f = parseRunFilter(q, 'dlq');
      const { runs, cursor } = await runPage(engine, q, f, 100);
      const messages: Record<string, unknown>[] = [];
      for (const run of runs) {
        const e = run.dlqId ? await ctx.store.getDlq(run.dlqId) : undefined;
        if (e) messages.push({ ...dlqJson(e), ...workflowDlqFields(e, run) });
      }
      return { messages, ...(cursor ? { cursor } : {}) };
    },
  };
}

/** Path prefix of the webhook URLs `context.createWebhook` builds: `{prefix}{userId}/{runId}/{eventId}`. */
export const WEBHOOK_PREFIX = '/v2/workflows/hooks/';

/**
 * Wait / notify routes: `POST /v2/wait/{eventId}`, `POST /v2/notify/{eventId}`,
 * `POST /v2/notify/{workflowRunId}/{eventId}` -> `[{waiter, messageId}]`,
 * `GET /v2/waiters/{eventId}` -> `Waiter[]`.
 */
export function registerWorkflowEventRoutes(app: FastifyInstance, ctx: QueueApiContext, engine: WorkflowEngine): void {
  app.post('/v2/wait/:eventId', async (req: FastifyRequest<{ Params: { eventId: string } }>) => {
    const runId = svcHeadersWithPrefix(req.headers, '')['workflow-runid'];
    await wait(engine, req.params.eventId, runId, (req.body as Buffer | undefined) ?? Buffer.alloc(0), ctx.clock.now());
    return { waiting: true };
  });
  const body = (req: FastifyRequest) => (req.body as Buffer | undefined) ?? Buffer.alloc(0);
  app.post('/v2/notify/:eventId', async (req: FastifyRequest<{ Params: { eventId: string } }>) =>
    notify(engine, req.params.eventId, undefined, body(req), ctx.clock.now()),
  );
  app.post('/v2/notify/:runId/:eventId', async (req: FastifyRequest<{ Params: { runId: string; eventId: string } }>) =>
    notify(engine, req.params.eventId, req.params.runId, body(req), ctx.clock.now()),
  );
  // context.createWebhook URLs: any method; the request becomes the event data of the run's
  // waitForWebhook (kept for the look-back window when it comes before the wait).
  app.all(`${WEBHOOK_PREFIX}:userId/:runId/:eventId`, async (req: FastifyRequest<{ Params: { userId: string; runId: string; eventId: string } }>) => {
    const { userId, runId, eventId } = req.params;
    const run = await engine.runs.findRun(runId);
    if (userId !== queueTokenUserId(sdkQueueToken(ctx.credentials.get(CREDENTIALS.token))) || run?.state !== 'RUN_STARTED') {
      throw queueError('webhookNotFound', runId);
    }
    const data = webhookEventData({
      proto: req.protocol,
      host: req.headers.host ?? '',
      url: req.url,
      method: req.method,
      headers: req.headers,
      body: Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0),
    });
    return notify(engine, eventId, runId, data, ctx.clock.now());
  });
  app.get('/v2/waiters/:eventId', async (req: FastifyRequest<{ Params: { eventId: string } }>) =>
    waitersJson(engine, req.params.eventId),
  );
}

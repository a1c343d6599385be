/**
 * Wait / notify of workflow runs (workflow-js `LazyWaitEventStep`,
 * `makeNotifyRequest`):
 *
 * - `wait` (`POST /v2/wait/{eventId}`, body `{url, timeout, timeoutUrl, timeoutHeaders, step}`,
 *   workflow headers of the run): registers a waiter until `now + timeout`.
 * - `notify` (`POST /v2/notify/{eventId}` or `/v2/notify/{runId}/{eventId}`, body = event data):
 *   every waiter of the event gets its Wait step appended with `out` = base64(event data),
 *   `waitTimeout: false`, and the run's next delivery; returns `[{waiter, messageId}]`.
 * - `sweep` (timer): waiters past their deadline get the step with `waitTimeout: true`.
 * A waiter is taken atomically (`takeWaiter`), so a notify racing the timeout appends one step.
 */
import { parseDuration } from '../delivery/backoff.js';
import { queueError } from '../errors.js';
import type { Waiter } from '../store/workflow-types.js';
import type { WorkflowEngine } from './run-engine.js';

/** Default wait timeout of the SDK (`7d`). */
const DEFAULT_TIMEOUT_MS = 7 * 86_400_000;
/**
 * Deepest nesting of a wait body (objects/arrays) that is accepted: the body is stored with
 * `JSON.stringify`, which overflows the stack near a few thousand levels (the SDK sends 2-3).
 */
export const MAX_WAIT_BODY_DEPTH = 64;

/** True when `v` nests objects/arrays deeper than `max` levels (iterative: no recursion on request data). */
export function nestedDeeperThan(v: unknown, max: number): boolean {
  const stack: [unknown, number][] = [[v, 1]];
  while (stack.length) {
    const [x, d] = stack.pop()!;
    if (x === null || typeof x !== 'object') continue;
    if (d > max) return true;
    for (const c of Object.values(x)) if (c !== null && typeof c === 'object') stack.push([c, d + 1]);
  }
  return false;
}

/**
 * Wire `Waiter` (`GET /v2/waiters/{eventId}`): deadline in seconds; `workflowRunId` (the waiting
 * run, undefined when it is gone) and `eventId` are read by upstash-workflow's Python client
 * (`get_waiters`), the JS SDK ignores them.
 */
export function waiterJson(w: Waiter, workflowRunId: string | undefined): Record<string, unknown> {
  return {
    workflowRunId,
    eventId: w.eventId,
    url: w.url,
    deadline: Math.floor(w.deadline / 1000),
    headers: w.timeoutHeaders ?? {},
    timeoutUrl: w.timeoutUrl,
    timeoutHeaders: w.timeoutHeaders,
  };
}

/**
 * Registers a waiter for the run named by `runId`.
 * @throws QueueError 400 bad body / timeout, 400 when the run is not active.
 */
export async function wait(engine: WorkflowEngine, eventId: string, runId: string | undefined, raw: Buffer, now: number): Promise<void> {
  let body: Record<string, unknown>;
  try {
    body = JSON.parse(raw.toString('utf8'));
  } catch (err) {
    throw queueError('invalidJson', (err as Error).message);
  }
  if (!body || typeof body !== 'object' || !body.step || typeof body.step !== 'object') throw queueError('invalidWaitBody');
  if (nestedDeeperThan(body, MAX_WAIT_BODY_DEPTH)) throw queueError('waitBodyTooDeep', MAX_WAIT_BODY_DEPTH);
  if (!runId) throw queueError('missingRunId');
  const run = await engine.runs.findRun(runId);
  if (!run || run.state !== 'RUN_STARTED') throw queueError('runNotActive', runId);
  const t = body.timeout === undefined ? DEFAULT_TIMEOUT_MS : parseDuration(String(body.timeout));
  if (t === undefined) throw queueError('invalidWaitTimeout', body.timeout);
  const waiter: Omit<Waiter, 'seq'> = {
    eventId,
    runSeq: run.seq,
    url: typeof body.url === 'string' ? body.url : run.url,
    deadline: now + t,
    step: body.step as Record<string, unknown>,
    timeoutUrl: typeof body.timeoutUrl === 'string' ? body.timeoutUrl : undefined,
    timeoutHeaders: body.timeoutHeaders as Waiter['timeoutHeaders'],
    createdAt: now,
  };
  await engine.serialEvent(eventId, async () => {
    const seq = await engine.runs.addWaiter(waiter);
    // A notify kept from the look-back window resumes the wait at once.
    const kept = engine.notifyLookbackMs > 0 ? await engine.runs.takeNotify(eventId, run.runId, now - engine.notifyLookbackMs) : undefined;
    if (kept) await release(engine, { ...waiter, seq }, kept.data, now);
  });
}

/** The waiters of `eventId` as `GET /v2/waiters/{eventId}` answers them ({@link waiterJson}). */
export async function waitersJson(engine: WorkflowEngine, eventId: string): Promise<Record<string, unknown>[]> {
  const out: Record<string, unknown>[] = [];
  for (const w of await engine.runs.waiters(eventId)) out.push(waiterJson(w, (await engine.runs.getRun(w.runSeq))?.runId));
  return out;
}

/** Resumes `w` with the event data (or its timeout when `data` is undefined); undefined when already taken. */
async function release(engine: WorkflowEngine, w: Waiter, data: Buffer | undefined, now: number): Promise<string | undefined> {
  if (!(await engine.runs.takeWaiter(w.seq))) return undefined;
  const run = await engine.runs.getRun(w.runSeq);
  if (!run || run.state !== 'RUN_STARTED') return undefined;
  const step = data === undefined ? { ...w.step, waitTimeout: true } : { ...w.step, out: data.toString('base64'), waitTimeout: false };
  return engine.appendServerStep(run, step, now);
}

/**
 * Notifies every waiter of `eventId` (of run `runId` only, when given). When it reaches none, the
 * notify is kept for the look-back window (`engine.notifyLookbackMs`): the first matching wait
 * registered within it is resumed with this data at once.
 */
export async function notify(engine: WorkflowEngine, eventId: string, runId: string | undefined, data: Buffer, now: number) {
  return engine.serialEvent(eventId, async () => {
    const out: Record<string, unknown>[] = [];
    for (const w of await engine.runs.waiters(eventId)) {
      const run = await engine.runs.getRun(w.runSeq);
      if (runId && run?.runId !== runId) continue;
      const messageId = await release(engine, w, data, now);
      // `workflowRunId` and `url` beside `waiter`: upstash-workflow's Python client reads them
      if (messageId) out.push({ waiter: waiterJson(w, run?.runId), messageId, workflowRunId: run?.runId, url: w.url });
    }
    if (out.length === 0 && engine.notifyLookbackMs > 0) await engine.runs.addNotify({ eventId, runId, data, createdAt: now });
    return out;
  });
}

/**
 * The event data of a webhook call (`context.createWebhook` URL,
 * `/v2/workflows/hooks/{userId}/{runId}/{eventId}`) as `waitForWebhook` decodes it: JSON
 * `{proto, host, url (path and query), method, header (Record<string, string[]>), body (base64)}`.
 */
export function webhookEventData(req: { proto: string; host: string; url: string; method: string; headers: Record<string, string | string[] | undefined>; body: Buffer }): Buffer {
  const header: Record<string, string[]> = {};
  for (const [k, v] of Object.entries(req.headers)) {
    if (v === undefined || k === 'authorization') continue;
    header[k] = Array.isArray(v) ? v : [v];
  }
  return Buffer.from(JSON.stringify({ proto: req.proto, host: req.host, url: req.url, method: req.method, header, body: req.body.toString('base64') }));
}

/** Times out expired waiters; returns how many. */
export async function sweep(engine: WorkflowEngine, now: number): Promise<number> {
  let n = 0;
  for (const w of await engine.runs.expiredWaiters(now, 100)) if (await release(engine, w, undefined, now)) n++;
  return n;
}

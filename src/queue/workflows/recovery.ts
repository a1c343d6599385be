/**
 * Failed workflow runs in the DLQ (spec "Restart / Resume / Delete a failed workflow run"): restart = a new run from the beginning with the original payload and settings
 * (earlier step results discarded); resume = a new run that keeps the completed steps and
 * re-delivers the failed step list. Override headers (prefix-less): `workflow-runid`, `retries`,
 * `flow-control-key`, `flow-control-value`. The DLQ entry leaves the DLQ in the same transaction
 * that stores the new run's first message (`QueueStore.retryDlq`).
 */
import { randomBytes } from 'node:crypto';
import { buildCallback, newMessageId } from '../build.js';
import { queueError } from '../errors.js';
import { parseFlowControl, parseRetries } from '../options.js';
import type { DlqEntry, NewMessage } from '../model.js';
import type { QueueStore } from '../store/types.js';
import type { RunConfig, WorkflowRun } from '../store/workflow-types.js';
import { workflowCallbackHooks } from './callback-fields.js';
import { stepsUpTo, triggerId, type RawStep, type WorkflowEngine } from './run-engine.js';

/** DLQ ids are `<unix ms>-<seq>` (dispatcher). */
export const DLQ_ID = /^\d{1,16}-\d{1,16}$/;

const NANO = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_';

/** `wfr_` + 21 random url-safe characters, the SDK's run-id shape. */
export function newRunId(): string {
  return `wfr_${[...randomBytes(21)].map((b) => NANO[b & 63]).join('')}`;
}

export interface RecoveredRun {
  workflowRunId: string;
  workflowCreatedAt: number;
}

/**
 * The DLQ entry and failed run for `dlqId`.
 * @throws QueueError 400 malformed id, 404 unknown entry, 400 entry that is not a workflow run.
 */
export async function failedRun(store: QueueStore, engine: WorkflowEngine, dlqId: string): Promise<{ entry: DlqEntry; run: WorkflowRun }> {
  if (!DLQ_ID.test(dlqId)) throw queueError('invalidDlqId', dlqId);
  const entry = await store.getDlq(dlqId);
  if (!entry) throw queueError('failedRunNotFound', dlqId);
  const run = await engine.runs.runByDlqId(dlqId);
  if (!run || !entry.message.workflow) throw queueError('notWorkflowRun', dlqId);
  return { entry, run };
}

/** `base` with the override headers of a restart/resume; `maxRetries` bounds `Retries` (412 above it). */
function overrides(cfg: Record<string, string>, base: RunConfig, maxRetries: number): RunConfig {
  const out: RunConfig = { ...base };
  if (cfg['retries'] !== undefined) out.retries = parseRetries(cfg['retries'], maxRetries);
  const key = cfg['flow-control-key'];
  const value = cfg['flow-control-value'];
  if (key !== undefined || value !== undefined) {
    const k = key ?? base.flowControlKey;
    if (!k) throw queueError('flowControlKeyRequired');
    out.flowControlKey = k;
    if (value !== undefined) out.flowControl = parseFlowControl(value);
    if (!out.flowControl) throw queueError('flowControlValueRequired');
  }
  return out;
}

/**
 * Restarts (`mode` 'restart') or resumes the failed run of DLQ entry `dlqId` with the override
 * headers `cfg`; returns the new run's id and creation time (ms).
 * @throws QueueError as {@link failedRun}; 400 bad override; 409 when the run id is active.
 */
export async function recoverRun(
  store: QueueStore,
  engine: WorkflowEngine,
  mode: 'restart' | 'resume',
  dlqId: string,
  cfg: Record<string, string>,
  now: number,
): Promise<RecoveredRun> {
  const { entry, run } = await failedRun(store, engine, dlqId);
  const runId = cfg['workflow-runid'] || (mode === 'resume' ? run.runId : newRunId());
  const active = await engine.runs.findRun(runId);
  if (active?.state === 'RUN_STARTED') throw queueError('runAlreadyRunning', runId);
  const config = overrides(cfg, run.config, engine.maxRetries);
  const createdAt = Math.max(now, run.createdAt + 1);
  const messageId = newMessageId();
  const seq = await engine.runs.createRun(
    {
      runId,
      createdAt,
      url: run.url,
      initialBody: run.initialBody,
      config: { ...config, triggerMessageId: mode === 'restart' ? messageId : triggerId(run), startMessageId: messageId },
      labels: run.labels,
      callerIp: run.callerIp,
      flowControlKey: config.flowControlKey,
    },
    now,
  );
  const newRun = (await engine.runs.getRun(seq))!;
  const old = entry.message;
  // The failed delivery was the callback of a context.call (its body is the call's result, not a
  // step list): resume re-delivers it after every stored step; restart starts from the trigger.
  const isCallback = old.kind === 'callback';
  let steps: { messageId: string; callType: string; body: Buffer }[] = [];
  if (mode === 'resume' && isCallback) {
    steps = (await engine.runs.steps(run.seq)).map((s) => ({ messageId: s.messageId, callType: s.callType, body: s.body }));
    await engine.runs.copySteps(seq, steps, now);
  } else if (mode === 'resume') {
    // The failed message's body is the step list it was delivered with: keep those steps.
    let list: RawStep[] | undefined;
    try {
      const parsed = JSON.parse(entry.message.body.toString('utf8'));
      if (Array.isArray(parsed)) list = parsed as RawStep[];
    } catch {
      /* empty body (lazy fetch): fall back to the stored steps */
    }
    steps = list
      ? list.slice(1).map((s) => ({ messageId: s.messageId, callType: s.callType, body: Buffer.from(s.body, 'base64') }))
      : stepsUpTo(await engine.runs.steps(run.seq), entry.message.id).map((s) => ({ messageId: s.messageId, callType: s.callType, body: s.body }));
    await engine.runs.copySteps(seq, steps, now);
  }
  const m: NewMessage = {
    ...old,
    ...(isCallback && mode === 'restart' ? { kind: 'message' as const, headers: { ...run.config.headers } } : {}),
    id: messageId,
    createdAt: now,
    dueAt: now,
    notBefore: undefined,
    maxRetries: config.retries ?? old.maxRetries,
    retryDelay: config.retryDelay ?? old.retryDelay,
    flowControlKey: config.flowControlKey,
    flowControl: config.flowControl,
    dedupKey: undefined,
    held: undefined,
    workflow: undefined,
  };
  engine.decorate(m, newRun, await engine.runs.steps(seq), triggerId(newRun));
  if (isCallback && mode === 'resume') m.body = old.body;
  // the prepare hooks (a run's flow-control key holds it like a published step), then the DLQ
  // entry leaves in the transaction that stores the message
  await engine.enqueue.prepare([m], now);
  const r = await store.retryDlq({ dlqIds: [dlqId] }, 1, now, () => m);
  if (r.messageIds.length) engine.enqueue.stored([m], now);
  if (r.messageIds.length === 0) {
    await engine.runs.finishRun(seq, 'RUN_CANCELED', now);
    throw queueError('failedRunNotFound', dlqId);
  }
  return { workflowRunId: runId, workflowCreatedAt: createdAt };
}

/** Removes the failed run of `dlqId` from the DLQ. @throws QueueError as {@link failedRun}. */
export async function deleteFailedRun(store: QueueStore, engine: WorkflowEngine, dlqId: string): Promise<void> {
  await failedRun(store, engine, dlqId);
  const r = await store.deleteDlq({ dlqIds: [dlqId] }, 1);
  if (r.deleted === 0) throw queueError('failedRunNotFound', dlqId);
}

/**
 * Calls the failure function of a failed run again (`client.dlq.retryFailureFunction`,
 * `POST /v2/workflows/dlq/callback/{dlqId}`): only when its last attempt failed
 * (`CALLBACK_FAIL`), else 400. Returns the run's id and creation time.
 */
export async function retryFailureCallback(store: QueueStore, engine: WorkflowEngine, dlqId: string, now: number): Promise<RecoveredRun> {
  const { entry, run } = await failedRun(store, engine, dlqId);
  if (run.failure?.state !== 'CALLBACK_FAIL') {
    throw queueError('failureNotFailed', dlqId, run.failure?.state ?? 'none');
  }
  const m = buildCallback(entry.message, 'failure_callback', entry.outcome, now, dlqId, workflowCallbackHooks);
  if (!m) throw queueError('noFailureCallback', dlqId);
  await engine.runs.updateRun(run.seq, now, { failure: { ...run.failure, state: 'CALLBACK_INPROGRESS', messageId: m.id } });
  // stored as built: a callback is never held for admission
  await engine.enqueue.enqueue([m], { now, prepare: false });
  return { workflowRunId: run.runId, workflowCreatedAt: run.createdAt };
}

/**
 * The workflow-run engine:
 *
 * - `prepare` (publish time, before messages are stored): a trigger message
 *   (`Upstash-Workflow-Init: true`) creates the run with its settings (retries, retry delay,
 *   timeout, flow control, failure callback, forwarded headers, labels); a later step message is
 *   appended to the run's step list and gets the run's settings where it has none of its own
 *   (WF_TriggerOnConfig: per field for retries/delay/timeout, all-or-nothing for flow control).
 *   Every message's delivered body becomes the step list `[{messageId, body (base64), callType}]`
 *   (the initial payload first), or empty when larger than the message limit (the SDK then
 *   lazy-fetches `GET /v2/workflows/runs/{id}`). A step for a run that is not active -> 400
 *   (the SDK reads 400 as "the run was finished").
 *   Also at publish: `context.call` requests (`call`), the SDK's re-trigger of a run svc started
 *   (`retrigger`), and `context.invoke` triggers (`invokeRequest`; the child's end reaches the
 *   parent through `finish`).
 * - `onOutcome` (after each recorded delivery attempt): keeps the "next step" state of the run,
 *   and when a step message fails for good (it is in the DLQ) the run becomes RUN_FAILED with its
 *   `dlqId`; failure-callback deliveries update the run's failure-function state.
 */
import type { Logger } from '../../logger.js';
import { buildMessage, newMessageId } from '../build.js';
import { crashPoint } from '../crash-point.js';
import type { EnqueueService } from '../enqueue.js';
import { queueError } from '../errors.js';
import { DEFAULT_MAX_RETRIES } from '../options.js';
import type { AttemptOutcome, HeaderMap, NewMessage, StoredMessage, WorkflowPublishInfo, WorkflowStepInfo } from '../model.js';
import type { QueueStore } from '../store/types.js';
import type { RunFailure } from '../store/types.js';
import type { FailureInfo, InvokerInfo, NextStepInfo, RunConfig, RunState, StepErrorInfo, WorkflowRun, WorkflowStep, WorkflowStore } from '../store/workflow-types.js';

/** The error of a run whose start reached an endpoint that is not a workflow endpoint. */
export const NON_WORKFLOW_DESTINATION =
  'detected a non-workflow destination for trigger/invoke. make sure you are sending the request to the correct endpoint';

/**
 * The error of a run started by `POST /v2/trigger` whose endpoint answered as a workflow endpoint
 * (`Upstash-Workflow-Sdk-Version`) without triggering the run itself: an SDK older than 1.0,
 * which does not know the trigger REST API (the text the workflow SDK's tests expect).
 */
export const TRIGGER_NEEDS_SDK_V1 = 'trigger rest api is only usable with sdk versions after v1.0.0 major version';

/** A raw step as delivered. */
export interface RawStep {
  messageId: string;
  body: string;
  callType: string;
}

/** The run's step list as the SDK reads it: initial payload first. */
export function rawSteps(run: WorkflowRun, steps: WorkflowStep[], triggerMessageId: string): RawStep[] {
  return [
    { messageId: triggerMessageId, body: run.initialBody.toString('base64'), callType: 'step' },
    ...steps.map((s) => ({ messageId: s.messageId, body: s.body.toString('base64'), callType: s.callType })),
  ];
}

/**
 * The steps of a run as of the step `messageId` (itself included): the list a delivery of that
 * step carries. Steps appended concurrently after it (another parallel branch's result) are left
 * out, so of the deliveries of a parallel group's results only the one recorded last sees the
 * group complete and continues the run; the others are discarded by the SDK
 * (`getParallelCallState`), as the lazy fetch cuts the list at `Upstash-Message-Id` too.
 */
export function stepsUpTo(steps: WorkflowStep[], messageId: string): WorkflowStep[] {
  const i = steps.findIndex((s) => s.messageId === messageId);
  return i < 0 ? steps : steps.slice(0, i + 1);
}

function headerOf(h: HeaderMap, lowerName: string): string | undefined {
  for (const [k, v] of Object.entries(h)) if (k.toLowerCase() === lowerName) return v[0];
  return undefined;
}

function withoutKeys(h: HeaderMap, lowerNames: string[]): HeaderMap {
  const out: HeaderMap = {};
  for (const [k, v] of Object.entries(h)) if (!lowerNames.includes(k.toLowerCase())) out[k] = v;
  return out;
}

const RUN_HEADERS = ['workflow-runid', 'workflow-createdat', 'workflow-url'].flatMap((n) => [`upstash-${n}`, `svc-${n}`]);

/** `h` with the run headers of `run` (replacing any), under both prefixes (`Svc-` / `Upstash-`). */
function withRunHeaders(h: HeaderMap, run: { runId: string; createdAt: number; url: string }): HeaderMap {
  const out: HeaderMap = withoutKeys(h, RUN_HEADERS);
  for (const p of ['Upstash', 'Svc']) {
    out[`${p}-Workflow-Runid`] = [run.runId];
    out[`${p}-Workflow-Createdat`] = [String(run.createdAt)];
    out[`${p}-Workflow-Url`] = [run.url];
  }
  return out;
}

export interface WorkflowEngineOptions {
  store: QueueStore;
  workflows: WorkflowStore;
  logger: Logger;
  maxMessageBytes: number;
  /** Stores messages the server itself creates (notify / wait-timeout / invoke-result steps, restarts). */
  enqueue: EnqueueService;
  /** How long (ms) a notify that reached no waiter is kept for a wait that comes after it. */
  notifyLookbackMs?: number;
  /** Largest `Retries` of a restart/resume override (`SVC_QUEUE_MAX_RETRIES`; default 20). */
  maxRetries?: number;
  /** Most steps of one run (`SVC_QUEUE_WORKFLOW_MAX_STEPS`; default {@link DEFAULT_MAX_STEPS}). */
  maxSteps?: number;
  /** Largest context of one run in bytes (`SVC_QUEUE_WORKFLOW_MAX_CONTEXT_BYTES`; default {@link DEFAULT_MAX_CONTEXT_BYTES}). */
  maxContextBytes?: number;
}

/** The hosted service's hard limits of one workflow run: 1000 steps, 100 MiB of context. */
export const DEFAULT_MAX_STEPS = 1000;
export const DEFAULT_MAX_CONTEXT_BYTES = 100 * 1024 * 1024;

/**
 * The byte length of `JSON.stringify(rawSteps(run, steps, triggerMessageId))`, computed without
 * building it (base64 lengths from the body lengths): a step list over the message limit is not
 * sent, so building it would be wasted work that grows with the run.
 */
export function rawStepsBytes(run: WorkflowRun, steps: WorkflowStep[], triggerMessageId: string): number {
  const item = (messageId: string, bodyBytes: number, callType: string): number =>
    '{"messageId":,"body":"","callType":}'.length + Buffer.byteLength(JSON.stringify(messageId)) + 4 * Math.ceil(bodyBytes / 3) + Buffer.byteLength(JSON.stringify(callType));
  let n = 2 + steps.length + item(triggerMessageId, run.initialBody.length, 'step'); // brackets and commas
  for (const s of steps) n += item(s.messageId, s.body.length, s.callType);
  return n;
}

export class WorkflowEngine {
  /** Serialises the outcome handling per run (failure before its failure callback). */
  private readonly chains = new Map<string, Promise<void>>();
  /** Serialises wait and notify per event id (a notify racing a wait is never lost). */
  private readonly eventChains = new Map<string, Promise<unknown>>();

  constructor(private readonly o: WorkflowEngineOptions) {}

  get runs(): WorkflowStore {
    return this.o.workflows;
  }

  /** The queue's enqueue service (`enqueue.ts`), which the engine's own messages go through. */
  get enqueue(): EnqueueService {
    return this.o.enqueue;
  }

  /** Largest retry count a restart/resume may set (412 above it). */
  get maxRetries(): number {
    return this.o.maxRetries ?? DEFAULT_MAX_RETRIES;
  }

  /** Look-back window of notifies (ms). */
  get notifyLookbackMs(): number {
    return this.o.notifyLookbackMs ?? 0;
  }

  /** Runs `fn` after every earlier `serialEvent` call for `eventId` has settled. */
  serialEvent<T>(eventId: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.eventChains.get(eventId) ?? Promise.resolve();
    const next = prev.then(fn, fn);
    const tail = next.catch(() => undefined);
    this.eventChains.set(eventId, tail);
    void tail.then(() => {
      if (this.eventChains.get(eventId) === tail) this.eventChains.delete(eventId);
    });
    return next;
  }

  /**
   * Ends `run` in `state` (`finishRun`); a run started by `context.invoke` then hands its result
   * to its parent as the parent's Invoke step: `out` = JSON `{body?, isFailed, isCanceled}`
   * (the SDK's `InvokeStepResponse`, both flags always present as the SDK's callers compare them
   * with `false`; `body` = the run's result, absent for a failed or cancelled child). A running
   * parent gets it delivered; a parent that already ended keeps it in its step list only (its
   * logs show the branch finished), without a delivery.
   * Returns false when the run had already ended.
   */
  async finish(run: WorkflowRun, state: RunState, now: number, fields: { response?: string; dlqId?: string } = {}): Promise<boolean> {
    if (!(await this.o.workflows.finishRun(run.seq, state, now, fields))) return false;
    await this.handToParent(run, state, now, fields.response);
    return true;
  }

  /** The invoking parent's side of {@link finish} (nothing for a run not started by `context.invoke`). */
  private async handToParent(run: WorkflowRun, state: RunState, now: number, response?: string): Promise<void> {
    const inv = run.config.invoker;
    if (!inv) return;
    const parent = await this.o.workflows.findRun(inv.runId, inv.createdAt);
    if (!parent) return;
    const result = {
      body: state === 'RUN_SUCCESS' ? response : undefined,
      isFailed: state === 'RUN_FAILED',
      isCanceled: state === 'RUN_CANCELED',
    };
    const step = { ...inv.step, out: JSON.stringify(result) };
    if (parent.state === 'RUN_STARTED') await this.appendServerStep(parent, step, now);
    else await this.o.workflows.addStep(parent.seq, newMessageId(), 'step', Buffer.from(JSON.stringify(step)), now);
  }

  /**
   * Puts run headers, settings and the step-list body on `m` for `run` (whose steps are `steps`).
   * Used at publish, restart and resume.
   */
  decorate(m: NewMessage, run: WorkflowRun, steps: WorkflowStep[], triggerMessageId: string): void {
    const wf = (h: HeaderMap): HeaderMap => withRunHeaders(h, run);
    m.headers = wf(m.headers);
    if (!headerOf(m.headers, 'upstash-workflow-sdk-version')) m.headers['Upstash-Workflow-Sdk-Version'] = ['1'];
    if (run.labels?.length && !headerOf(m.headers, 'upstash-label')) m.headers['Upstash-Label'] = [run.labels.join(',')];
    if (m.failureCallback && m.failureCallbackOptions) {
      m.failureCallbackOptions = { ...m.failureCallbackOptions, headers: wf(m.failureCallbackOptions.headers) };
    }
    m.body = rawStepsBytes(run, steps, triggerMessageId) > this.o.maxMessageBytes ? Buffer.alloc(0) : Buffer.from(JSON.stringify(rawSteps(run, steps, triggerMessageId)));
    if (!headerOf(m.headers, 'content-type')) m.headers['Content-Type'] = ['application/json'];
    m.workflow = this.messageInfo(run);
  }

  /** `workflow` of a message delivered to the workflow URL for `run`. */
  private messageInfo(run: WorkflowRun): WorkflowStepInfo {
    return { runSeq: run.seq, runId: run.runId, createdAt: run.createdAt, url: run.url, initialBody: run.initialBody.toString('base64') };
  }

  /** Applies the run's trigger settings to a step message that did not set them itself. */
  private applyConfig(m: NewMessage, cfg: RunConfig, explicit: WorkflowPublishInfo['explicit']): void {
    if (!explicit.retries && cfg.retries !== undefined) m.maxRetries = cfg.retries;
    if (!explicit.retryDelay && cfg.retryDelay !== undefined) m.retryDelay = cfg.retryDelay;
    if (!explicit.timeout && cfg.timeoutMs !== undefined) m.timeoutMs = cfg.timeoutMs;
    if (!explicit.flowControl && cfg.flowControlKey !== undefined) {
      m.flowControlKey = cfg.flowControlKey;
      m.flowControl = cfg.flowControl;
    }
    if (!explicit.failureCallback && cfg.failureCallback !== undefined) {
      m.failureCallback = cfg.failureCallback;
      m.failureCallbackOptions = cfg.failureCallbackOptions;
    }
    m.headers = { ...cfg.headers, ...m.headers };
  }

  /** Publish-time hook (see the module comment). @throws QueueError 400 for a step of an inactive run. */
  prepare(msgs: NewMessage[], now: number): Promise<void> | undefined {
    // no workflow headers (the common case): nothing to do, nothing awaited
    for (const m of msgs) if (m.workflowPublish) return this.prepareRuns(msgs, now);
    return undefined;
  }

  /** {@link prepare} when some of `msgs` carry workflow headers. */
  private async prepareRuns(msgs: NewMessage[], now: number): Promise<void> {
    for (const m of msgs) {
      const p = m.workflowPublish;
      if (!p) continue;
      delete m.workflowPublish;
      if (p.callType === 'toCallback') {
        await this.call(m, p);
        continue;
      }
      if (p.init) await this.trigger(m, p, now);
      else await this.step(m, p, now);
    }
  }

  /**
   * context.call: `m` is the request to a third party (an ordinary message); its callback goes to
   * the workflow URL as a delivery of the run (body wrapped by `workflowCallbackBody`) and the SDK
   * publishes the call's result step from it. The callback carries what a step delivery carries:
   * the run headers, the headers the run was triggered with, and the run's retries, retry delay
   * and failure callback where the call did not set its callback's own; it is a message of the
   * run (`workflow` of the callback, `workflowCallbackHooks`), so when it fails for good the
   * run ends RUN_FAILED with its DLQ entry.
   * @throws QueueError 400 when the run is not active.
   */
  private async call(m: NewMessage, p: WorkflowPublishInfo): Promise<void> {
    const run = await this.o.workflows.findRun(p.runId);
    if (!run || run.state !== 'RUN_STARTED') throw queueError('runNotActive', p.runId);
    const cfg = run.config;
    const cb = m.callbackOptions;
    if (m.callback && cb) {
      const ownFailure = cb.failureCallback !== undefined;
      const failureOptions = ownFailure ? cb.failureCallbackOptions : cfg.failureCallbackOptions;
      m.callbackOptions = {
        ...cb,
        headers: { ...cfg.headers, ...withRunHeaders(cb.headers, run), 'Upstash-Workflow-Sdk-Version': ['1'] },
        maxRetries: p.explicit.callbackRetries || cfg.retries === undefined ? cb.maxRetries : cfg.retries,
        retryDelay: cb.retryDelay ?? cfg.retryDelay,
        failureCallback: ownFailure ? cb.failureCallback : cfg.failureCallback,
        failureCallbackOptions: failureOptions && { ...failureOptions, headers: withRunHeaders(failureOptions.headers, run) },
      };
    }
    m.workflow = { runId: p.runId, call: true, callback: this.messageInfo(run) };
    inheritTrace(m, cfg);
  }

  private async trigger(m: NewMessage, p: WorkflowPublishInfo, now: number): Promise<void> {
    // A second trigger for an active run is deduplicated: the first one stored the dedup key of
    // the run's (id, creation time); a trigger after the run ended gets a new key and starts a
    // new run. The SDK's own trigger of a run svc started for it joins the run (`retrigger`).
    const active = await this.o.workflows.findRun(p.runId);
    if (active?.state === 'RUN_STARTED') {
      if (p.triggerBySdk) await this.retrigger(m, p, active, now);
      else m.dedupKey = `wfr:${p.runId}:${active.createdAt}`;
      return;
    }
    m.dedupKey = `wfr:${p.runId}:${now}`;
    const invoker = p.invoke ? invokeRequest(m) : undefined;
    const config = { ...triggerConfig(m, p), startMessageId: m.id, ...(invoker ? { invoker } : {}) };
    const run = {
      runId: p.runId,
      createdAt: now,
      url: p.url ?? m.url,
      initialBody: m.body,
      config,
      labels: m.labels,
      callerIp: m.callerIp,
      flowControlKey: m.flowControlKey,
    };
    const seq = await this.o.workflows.createRun(run, now);
    crashPoint('workflow-run-created');
    // Only this first delivery asks the SDK to trigger the run itself (never the run's headers).
    if (p.unknownSdk) m.headers = { ...m.headers, 'Upstash-Workflow-Unknown-Sdk': ['true'] };
    this.decorate(m, { ...run, seq, state: 'RUN_STARTED', updatedAt: now }, [], m.id);
    this.markTrigger(m, p);
    if (p.unknownSdk && m.workflow && !m.workflow.call) m.workflow.unknownSdk = true;
  }

  /**
   * The SDK's trigger (`Upstash-Workflow-Trigger-By-Sdk: true`) of `run`, which svc started with a
   * delivery marked `Upstash-Workflow-Unknown-Sdk`: the run takes this trigger's settings (the
   * SDK's retries, failure function, headers) and `m` is delivered as the run's start. Repeats of
   * it (the first delivery retried after the SDK published) are deduplicated.
   */
  private async retrigger(m: NewMessage, p: WorkflowPublishInfo, run: WorkflowRun, now: number): Promise<void> {
    m.dedupKey = `wfr:${p.runId}:${run.createdAt}:sdk`;
    // The SDK forwards every header of the delivery it answered (its "user headers"): keep the
    // user's, not the framing and delivery headers svc sets itself on each delivery.
    m.headers = withoutDeliveryHeaders(m.headers);
    inheritTrace(m, run.config);
    const config = { ...triggerConfig(m, p), triggerMessageId: triggerId(run), startMessageId: run.config.startMessageId, sdkTriggered: true };
    await this.o.workflows.updateRun(run.seq, now, { config });
    this.decorate(m, { ...run, config }, await this.o.workflows.steps(run.seq), triggerId(run));
    this.markTrigger(m, p);
  }

  /**
   * Marks the start of a run whose destination must prove to be a workflow endpoint (feature
   * `WF_DetectTrigger`, and runs started by `POST /v2/trigger/...`): see `stepOutcome`.
   */
  private markTrigger(m: NewMessage, p: WorkflowPublishInfo): void {
    const detect = p.unknownSdk || (p.featureSet ?? '').split(',').some((f) => f.trim() === 'WF_DetectTrigger');
    if (detect && m.workflow && !m.workflow.call) m.workflow.detectTrigger = true;
  }

  private async step(m: NewMessage, p: WorkflowPublishInfo, now: number): Promise<void> {
    const run = await this.o.workflows.findRun(p.runId);
    if (!run || run.state !== 'RUN_STARTED') {
      throw run ? queueError('runFinished', p.runId, run.state) : queueError('runMissing', p.runId);
    }
    this.applyConfig(m, run.config, p.explicit);
    inheritTrace(m, run.config);
    await this.o.workflows.addStep(run.seq, m.id, p.callType ?? 'step', m.body, now);
    const steps = stepsUpTo(await this.o.workflows.steps(run.seq), m.id);
    const over = this.overLimit(run, steps);
    if (over !== undefined) {
      await this.failOverLimit(run, m, over, now);
      throw queueError('runLimit', p.runId, over);
    }
    this.decorate(m, run, steps, triggerId(run));
  }

  /**
   * Which limit of one run `steps` (the run's steps up to the new one, itself included) exceed:
   * more than `maxSteps` steps, or a context (initial body + step bodies) over `maxContextBytes`;
   * undefined when within both. The hosted service's hard limits (1000 steps, 100 MiB).
   */
  private overLimit(run: WorkflowRun, steps: WorkflowStep[]): string | undefined {
    const maxSteps = this.o.maxSteps ?? DEFAULT_MAX_STEPS;
    if (steps.length > maxSteps) return `more than ${maxSteps} steps (SVC_QUEUE_WORKFLOW_MAX_STEPS)`;
    const maxBytes = this.o.maxContextBytes ?? DEFAULT_MAX_CONTEXT_BYTES;
    let bytes = run.initialBody.length;
    for (const s of steps) bytes += s.body.length;
    if (bytes > maxBytes) return `its context (initial body and step results) exceeds ${maxBytes} bytes (SVC_QUEUE_WORKFLOW_MAX_CONTEXT_BYTES)`;
    return undefined;
  }

  /**
   * Ends `run` RUN_FAILED because step message `m` went past a limit: `m` (stored in the step
   * list, never delivered) becomes the failed step, its error the limit. No DLQ entry, no failure
   * callback: nothing was delivered (as {@link failStart}).
   */
  private async failOverLimit(run: WorkflowRun, m: NewMessage, limit: string, now: number): Promise<void> {
    const next = { messageId: m.id, state: 'STEP_FAILED' as const, retries: 0, errors: [{ error: `workflow run failed: ${limit}`, time: now }] };
    await this.o.workflows.updateRun(run.seq, now, { next });
    if (await this.finish({ ...run, next }, 'RUN_FAILED', now)) this.o.logger.warn({ runId: run.runId, limit }, 'queue: workflow run failed at its limit');
  }

  /**
   * Appends a step the server produces (a notified or timed-out Wait step)
   * to `run` and enqueues its delivery to the workflow URL, with the run's settings.
   * @returns the new message id.
   */
  async appendServerStep(run: WorkflowRun, step: Record<string, unknown>, now: number): Promise<string> {
    const cfg = run.config;
    const m = buildMessage(
      {
        method: 'POST',
        headers: { 'Content-Type': ['application/json'], 'Upstash-Workflow-Sdk-Version': ['1'] },
        maxRetries: 3,
      },
      { url: run.url },
      Buffer.from(JSON.stringify(step)),
      now,
      { callerIp: run.callerIp },
    );
    this.applyConfig(m, cfg, { retries: false, retryDelay: false, flowControl: false, failureCallback: false, timeout: false });
    inheritTrace(m, cfg);
    await this.o.workflows.addStep(run.seq, m.id, 'step', m.body, now);
    this.decorate(m, run, stepsUpTo(await this.o.workflows.steps(run.seq), m.id), triggerId(run));
    // through the prepare hooks too: a run's flow-control key holds it like a published step
    await this.o.enqueue.enqueue([m], { now });
    return m.id;
  }

  /**
   * Start-up reconciliation (`WorkflowStore.dropUnstartedRuns`): drops the runs created in
   * `[createdFrom, createdBefore)` whose first message was never stored (a crash between the two
   * writes); logs their ids. Returns how many.
   */
  async reconcile(createdFrom: number, createdBefore: number): Promise<number> {
    const dropped = await this.o.workflows.dropUnstartedRuns(createdFrom, createdBefore);
    if (dropped.length) this.o.logger.warn({ runs: dropped }, 'queue: dropped workflow runs whose first message was never stored');
    return dropped.length;
  }

  /** Dispatcher outcome listener: never throws; work is chained per run. */
  onOutcome(m: StoredMessage, outcome: AttemptOutcome, now: number): void {
    const info = m.workflow;
    const failureRunId = m.kind === 'failure_callback' ? headerOf(m.headers, 'upstash-workflow-runid') : undefined;
    if ((!info || info.call) && !failureRunId) return;
    const key = info?.runId ?? failureRunId!;
    const prev = this.chains.get(key) ?? Promise.resolve();
    const next = prev
      .then(() => (info && !info.call ? this.stepOutcome(m, info, outcome, now) : this.failureOutcome(m, outcome, now)))
      .catch((err) => this.o.logger.error({ err, messageId: m.id }, 'queue: recording a workflow outcome failed'));
    this.chains.set(key, next);
    void next.finally(() => {
      if (this.chains.get(key) === next) this.chains.delete(key);
    });
  }

  /** Resolves when every outcome recorded so far has been applied (tests, shutdown). */
  async idle(): Promise<void> {
    await Promise.all([...this.chains.values()]);
  }

  private async stepOutcome(m: StoredMessage, info: WorkflowStepInfo, outcome: AttemptOutcome, now: number): Promise<void> {
    const run = await this.o.workflows.getRun(info.runSeq);
    if (!run) return;
    const ok = outcome.status !== undefined && outcome.status >= 200 && outcome.status < 300;
    if (ok && info.detectTrigger && !headerOf(outcome.headers ?? {}, 'upstash-workflow-sdk-version')) {
      await this.failStart(m, run, outcome, now, NON_WORKFLOW_DESTINATION);
      return;
    }
    if (ok && info.unknownSdk && run.state === 'RUN_STARTED' && !run.config.sdkTriggered) {
      // A workflow endpoint answered the trigger REST API's first delivery without triggering the
      // run (a 1.0+ SDK publishes its trigger before it answers): nothing will continue the run.
      await this.failStart(m, run, outcome, now, TRIGGER_NEEDS_SDK_V1);
      return;
    }
    if (ok) {
      // a branch delivered after another branch failed the run leaves the failed step in place
      if (run.next && run.state === 'RUN_STARTED') await this.o.workflows.updateRun(run.seq, now, { next: null });
      return;
    }
    const final = isFinalFailure(m, outcome);
    if (final && run.state === 'RUN_FAILED' && run.next?.messageId === m.id && run.next.state === 'STEP_FAILED') {
      // ended in the DLQ move's transaction (`deadLetterRun`): what is left is the invoking parent
      await this.handToParent(run, 'RUN_FAILED', now);
      return;
    }
    const next = this.failedStep(m, run, outcome, now, final);
    await this.o.workflows.updateRun(run.seq, now, { next });
    if (!final || run.state !== 'RUN_STARTED') return;
    const dlq = await this.o.store.listDlq({ messageIds: [m.id] }, { count: 1, order: 'latestFirst' });
    const dlqId = dlq.items[0]?.dlqId;
    await this.finish({ ...run, next }, 'RUN_FAILED', now, { dlqId });
    const failure = this.failureStart(run, outcome);
    if (failure) await this.o.workflows.updateRun(run.seq, now, { failure });
  }

  /**
   * Dispatcher hook (`Dispatcher.deadLetterRun`), before step message `m` moves to the DLQ after
   * its last failed attempt `outcome`: the end of its run (RUN_FAILED, the failed step, the
   * failure function's start), which the store writes in the move's transaction, so a crash
   * cannot leave the message in the DLQ and its run running. Undefined for other messages and
   * runs that already ended.
   */
  async deadLetterRun(m: StoredMessage, outcome: AttemptOutcome, now: number): Promise<RunFailure | undefined> {
    const info = m.workflow;
    if (!info || info.call) return undefined;
    const run = await this.o.workflows.getRun(info.runSeq);
    if (run?.state !== 'RUN_STARTED') return undefined;
    return { runSeq: run.seq, next: this.failedStep(m, run, outcome, now, true), failure: this.failureStart(run, outcome) };
  }

  /** `run.next` after the failed attempt `outcome` of step message `m` (`final`: its last). */
  private failedStep(m: StoredMessage, run: WorkflowRun, outcome: AttemptOutcome, now: number, final: boolean): NextStepInfo {
    const error: StepErrorInfo = {
      error: outcome.error ?? `destination answered ${outcome.status}`,
      status: outcome.status,
      headers: outcome.headers,
      body: outcome.body?.toString('utf8'),
      time: now,
    };
    const prevErrors = run.next?.messageId === m.id ? run.next.errors : [];
    const stepName = headerOf(outcome.headers ?? {}, 'upstash-error-step-name');
    return {
      messageId: m.id,
      state: final ? 'STEP_FAILED' : 'STEP_RETRY',
      retries: m.maxRetries,
      retryDelay: m.retryDelay,
      ...(stepName ? { stepName } : {}),
      errors: [...prevErrors, error].slice(-20),
    };
  }

  /** The failure function's state when `run` fails with `outcome` (undefined: none, or already set). */
  private failureStart(run: WorkflowRun, outcome: AttemptOutcome): FailureInfo | undefined {
    if (!run.config.failureCallback || run.failure) return undefined;
    return {
      state: 'CALLBACK_INPROGRESS',
      url: run.config.failureCallback,
      failStatus: outcome.status,
      failHeaders: outcome.headers,
      failResponse: outcome.body?.toString('utf8'),
    };
  }

  /**
   * The start of `run` was answered 2xx but nothing will ever continue the run: the destination
   * is not a workflow endpoint (no `Upstash-Workflow-Sdk-Version`: {@link NON_WORKFLOW_DESTINATION})
   * or its SDK predates the trigger REST API ({@link TRIGGER_NEEDS_SDK_V1}). The run ends
   * RUN_FAILED with the delivery as its failed step carrying `reason` (no DLQ entry: the message
   * was delivered; no failure callback).
   */
  private async failStart(m: StoredMessage, run: WorkflowRun, outcome: AttemptOutcome, now: number, reason: string): Promise<void> {
    const error: StepErrorInfo = {
      error: reason,
      status: outcome.status,
      headers: outcome.headers,
      body: outcome.body?.toString('utf8'),
      time: now,
    };
    const next = { messageId: m.id, state: 'STEP_FAILED' as const, retries: m.maxRetries, retryDelay: m.retryDelay, errors: [error] };
    await this.o.workflows.updateRun(run.seq, now, { next });
    await this.finish({ ...run, next }, 'RUN_FAILED', now);
  }

  private async failureOutcome(m: StoredMessage, outcome: AttemptOutcome, now: number): Promise<void> {
    const runId = headerOf(m.headers, 'upstash-workflow-runid')!;
    const created = headerOf(m.headers, 'upstash-workflow-createdat');
    const run = await this.o.workflows.findRun(runId, created && /^\d+$/.test(created) ? Number(created) : undefined);
    if (!run) return;
    const ok = outcome.status !== undefined && outcome.status >= 200 && outcome.status < 300;
    const final = ok || m.retried + 1 > m.maxRetries;
    await this.o.workflows.updateRun(run.seq, now, {
      failure: {
        ...(run.failure ?? { url: m.url }),
        state: ok ? 'CALLBACK_SUCCESS' : final ? 'CALLBACK_FAIL' : 'CALLBACK_INPROGRESS',
        messageId: m.id,
        responseStatus: outcome.status,
        responseHeaders: outcome.headers,
        responseBody: outcome.body?.toString('utf8'),
      },
    });
  }
}

/** The attempt `outcome` of `m` was its last: retries used up, or a non-retryable error (489 + header). Same rule as the dispatcher's. */
function isFinalFailure(m: StoredMessage, outcome: AttemptOutcome): boolean {
  const nonRetryable = outcome.status === 489 && headerOf(outcome.headers ?? {}, 'upstash-nonretryable-error')?.toLowerCase() === 'true';
  return nonRetryable || m.retried + 1 > m.maxRetries;
}

const FRAMING = new Set(['connection', 'content-length', 'expect', 'host', 'keep-alive', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'user-agent']);
const KEPT_UPSTASH = new Set(['upstash-label', 'upstash-workflow-sdk-version']);

/** `h` without framing headers and the `Svc-*` / `Upstash-*` headers svc sets on a delivery. */
function withoutDeliveryHeaders(h: HeaderMap): HeaderMap {
  const out: HeaderMap = {};
  for (const [k, v] of Object.entries(h)) {
    const l = k.toLowerCase();
    if (FRAMING.has(l) || l.startsWith('svc-') || (l.startsWith('upstash-') && !KEPT_UPSTASH.has(l))) continue;
    out[k] = v;
  }
  return out;
}

/**
 * A `context.invoke` trigger: its body is the SDK's `InvokeWorkflowRequest` `{body, headers,
 * workflowRunId, workflowRunCreatedAt, workflowUrl, step}` of the parent. `m` is turned into the
 * child's trigger (body = the invoke payload); returns where the child's result goes.
 * @throws QueueError 400 when the body is not such a request.
 */
function invokeRequest(m: NewMessage): InvokerInfo {
  let req: Record<string, unknown>;
  try {
    req = JSON.parse(m.body.toString('utf8'));
  } catch (err) {
    throw queueError('invokeBodyNotJson', (err as Error).message);
  }
  const ok = req && typeof req === 'object' && typeof req.workflowRunId === 'string' && typeof req.workflowUrl === 'string' && req.step && typeof req.step === 'object';
  if (!ok) throw queueError('invalidInvokeBody');
  const created = Number(req.workflowRunCreatedAt);
  const invoker: InvokerInfo = {
    runId: req.workflowRunId as string,
    createdAt: Number.isFinite(created) && created > 0 ? created : undefined,
    url: req.workflowUrl as string,
    step: req.step as Record<string, unknown>,
  };
  m.body = Buffer.from(typeof req.body === 'string' ? req.body : '', 'utf8');
  return invoker;
}

/** The run settings a trigger message `m` carries (stored with the run, applied to later steps). */
function triggerConfig(m: NewMessage, p: WorkflowPublishInfo): RunConfig {
  return {
    headers: withoutKeys(m.headers, ['content-type']),
    retries: p.explicit.retries ? m.maxRetries : undefined,
    retryDelay: m.retryDelay,
    timeoutMs: m.timeoutMs,
    flowControlKey: m.flowControlKey,
    flowControl: m.flowControl,
    failureCallback: m.failureCallback,
    failureCallbackOptions: m.failureCallbackOptions,
    contentType: headerOf(m.headers, 'content-type'),
    method: m.method,
    triggerMessageId: m.id,
    ...(m.trace ? { trace: m.trace } : {}),
  };
}

/**
 * A step of a run continues the run's trace context (`cfg.trace`) unless it brought its own (an
 * instrumented workflow endpoint's publish); a context svc started at publish gives way to it.
 */
function inheritTrace(m: NewMessage, cfg: RunConfig): void {
  if (cfg.trace && (!m.trace || m.trace.started)) m.trace = cfg.trace;
}

/** The message id that started the run (first element of the step list). */
export function triggerId(run: WorkflowRun): string {
  return run.config.triggerMessageId ?? `msg_${run.runId}`;
}

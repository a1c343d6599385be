/**
 * `WorkflowStore`: the durable state of workflow runs. Same rules as {@link QueueStore}: one method = one transaction; user-visible
 * changes resolve after commit + fsync. Times are Unix ms.
 *
 * A run is identified by `seq` (internal) or by `runId` + `createdAt` (wire): resume reuses a run
 * id with a new creation time, so `runId` alone is not unique over time — but at most one run per
 * id is active (RUN_STARTED) at once.
 */
import type { FlowControl, HeaderMap, MessageTrace, PublishOptions } from '../model.js';

export type RunState = 'RUN_STARTED' | 'RUN_SUCCESS' | 'RUN_FAILED' | 'RUN_CANCELED';

/** Settings sent only on the trigger message and applied to every step (WF_TriggerOnConfig). */
export interface RunConfig {
  /** Forwarded (user) headers of the trigger, canonical keys. */
  headers: HeaderMap;
  /** Set when the trigger carried `Retries`. */
  retries?: number;
  retryDelay?: string;
  timeoutMs?: number;
  flowControlKey?: string;
  flowControl?: FlowControl;
  failureCallback?: string;
  failureCallbackOptions?: PublishOptions;
  contentType?: string;
  method?: string;
  /** Id of the message that started the run (first element of the step list). */
  /**
   * Id of the run's first message (its trigger, or the first message of a restart/resume); a run
   * whose first message is not stored is dropped at start-up (`dropUnstartedRuns`).
   */
  startMessageId?: string;
  triggerMessageId?: string;
  /** Set when the endpoint's SDK triggered the run itself (`Upstash-Workflow-Trigger-By-Sdk`). */
  sdkTriggered?: boolean;
  /** Set when the run was started by `context.invoke` of another run: where its result goes. */
  invoker?: InvokerInfo;
  /** The trigger's trace context: steps published without one of their own continue it. */
  trace?: MessageTrace;
}

/**
 * The parent of a run started by `context.invoke` (the SDK's `InvokeWorkflowRequest`): when the
 * run ends, its result is appended to the parent as the `Invoke` step `step`.
 */
export interface InvokerInfo {
  runId: string;
  /** ms; undefined when the request did not carry it (then the run id's active run is meant) */
  createdAt?: number;
  url: string;
  /** The parent's Invoke step (`stepId`, `stepName`, `stepType`, `concurrent`, `targetStep`). */
  step: Record<string, unknown>;
}

/** State of the failure callback / failure function of a failed run (failureCallbackInfo). */
export interface FailureInfo {
  state: 'CALLBACK_INPROGRESS' | 'CALLBACK_SUCCESS' | 'CALLBACK_FAIL' | 'CALLBACK_CANCELED';
  url: string;
  messageId?: string;
  failStatus?: number;
  failHeaders?: HeaderMap;
  /** base64 of the failing response body */
  failResponse?: string;
  responseStatus?: number;
  responseHeaders?: HeaderMap;
  responseBody?: string;
}

/** One delivery error of the step being executed (WorkflowRunLog "next" group). */
export interface StepErrorInfo {
  error: string;
  status?: number;
  headers?: HeaderMap;
  /** utf-8 response body */
  body?: string;
  time: number;
}

/** The message of a run being delivered now (WorkflowRunLog "next" group). */
export interface NextStepInfo {
  messageId: string;
  state: 'STEP_PROGRESS' | 'STEP_RETRY' | 'STEP_FAILED' | 'STEP_CANCELED';
  retries: number;
  retryDelay?: string;
  stepName?: string;
  errors: StepErrorInfo[];
}

export interface WorkflowRun {
  seq: number;
  runId: string;
  createdAt: number;
  url: string;
  state: RunState;
  completedAt?: number;
  response?: string;
  initialBody: Buffer;
  config: RunConfig;
  labels?: string[];
  callerIp?: string;
  flowControlKey?: string;
  dlqId?: string;
  failure?: FailureInfo;
  next?: NextStepInfo;
  updatedAt: number;
}

export interface WorkflowStep {
  seq: number;
  messageId: string;
  callType: string;
  /** The step JSON as published. */
  body: Buffer;
  createdAt: number;
}

export type NewRun = Omit<WorkflowRun, 'seq' | 'updatedAt' | 'state'> & { state?: RunState };

/** Filters of the workflow DLQ, logs and bulk endpoints. */
export interface RunFilter {
  runIds?: string[];
  /** exact match, OR */
  url?: string[];
  /** prefix match */
  urlPrefix?: string;
  createdAt?: number;
  states?: RunState[];
  label?: string[];
  flowControlKey?: string[];
  callerIp?: string[];
  dlqIds?: string[];
  /** only runs whose DLQ entry exists (a run restarted, resumed or deleted from the DLQ keeps its id but is not in it) */
  inDlq?: boolean;
  failureState?: string;
  /** ms, on created_at (logs) or completed_at (DLQ) */
  fromDate?: number;
  toDate?: number;
}

/** A run waiting for an event (context.waitForEvent). */
export interface Waiter {
  seq: number;
  eventId: string;
  runSeq: number;
  url: string;
  /** ms */
  deadline: number;
  step: Record<string, unknown>;
  timeoutUrl?: string;
  timeoutHeaders?: HeaderMap;
  createdAt: number;
}

/** A notify that reached no waiter, kept for the look-back window (`WorkflowStore.addNotify`). */
export interface StoredNotify {
  seq: number;
  eventId: string;
  /** The run it was sent to (`POST /v2/notify/{runId}/{eventId}`); undefined = any run. */
  runId?: string;
  data: Buffer;
  /** ms */
  createdAt: number;
}

export interface WorkflowStore {
  /** Registers a waiter (durable). */
  addWaiter(w: Omit<Waiter, 'seq'>): Promise<number>;
  /** Waiters of an event id, oldest first. */
  waiters(eventId: string): Promise<Waiter[]>;
  /** Waiters whose deadline passed at `now`. */
  expiredWaiters(now: number, limit: number): Promise<Waiter[]>;
  /** Removes a waiter; false when it was already gone (notified or timed out). */
  takeWaiter(seq: number): Promise<boolean>;
  /** Keeps a notify that reached no waiter (durable), for a wait that comes shortly after. */
  addNotify(n: Omit<StoredNotify, 'seq'>): Promise<void>;
  /**
   * Removes and returns the oldest kept notify of `eventId` sent to run `runId` or to any run,
   * created at or after `since` (ms); undefined when there is none.
   */
  takeNotify(eventId: string, runId: string, since: number): Promise<StoredNotify | undefined>;
  /**
   * Run-level retention: deletes up to `limit` runs that ended (state other than RUN_STARTED)
   * before `endedBefore` (ms, on `completedAt`), with their steps and waiters, except runs whose
   * failed step is still in the DLQ (kept until that entry is deleted or retried), and the kept
   * notifies created before `notifiesBefore`. Returns the number of runs deleted.
   */
  pruneRuns(endedBefore: number, notifiesBefore: number, limit: number): Promise<number>;
  /**
   * Start-up reconciliation: deletes (with their steps and waiters) the runs still RUN_STARTED,
   * created in `[createdFrom, createdBefore)` (ms), whose first message (`RunConfig.startMessageId`)
   * was never stored — a crash between the run's transaction and its message's. The client got
   * no answer for them, so the run is as if never started. Returns the deleted runs' ids.
   */
  dropUnstartedRuns(createdFrom: number, createdBefore: number): Promise<string[]>;
  /** Creates a run (RUN_STARTED unless given). Returns its seq. */
  createRun(run: NewRun, now: number): Promise<number>;
  /** The active (RUN_STARTED) run with this id, else the newest one; undefined when none. */
  findRun(runId: string, createdAt?: number): Promise<WorkflowRun | undefined>;
  getRun(seq: number): Promise<WorkflowRun | undefined>;
  /** The run whose failed step sits in DLQ entry `dlqId`. */
  runByDlqId(dlqId: string): Promise<WorkflowRun | undefined>;
  /** Appends a step (durable). */
  addStep(runSeq: number, messageId: string, callType: string, body: Buffer, now: number): Promise<void>;
  /** Copies steps (resume). */
  copySteps(runSeq: number, steps: { messageId: string; callType: string; body: Buffer }[], now: number): Promise<void>;
  steps(runSeq: number): Promise<WorkflowStep[]>;
  /** Ends a run: state, completion time, response. Returns false when it was not RUN_STARTED. */
  finishRun(seq: number, state: RunState, now: number, fields?: { response?: string; dlqId?: string }): Promise<boolean>;
  /**
   * Updates bookkeeping fields (failure callback info, next step info, DLQ id); an undefined
   * field is left as is, null clears it. `config` replaces the run's settings (the SDK's own
   * trigger of a run svc started, `Upstash-Workflow-Trigger-By-Sdk`).
   */
  updateRun(
    seq: number,
    now: number,
    fields: { failure?: FailureInfo | null; next?: NextStepInfo | null; dlqId?: string | null; config?: RunConfig },
  ): Promise<void>;
  /** Runs matching `filter`, newest first, after `cursor` (a seq), at most `limit`. */
  listRuns(filter: RunFilter, limit: number, cursor?: number): Promise<WorkflowRun[]>;
}

/**
 * The column values of a new `workflow_runs` row, in the order both stores' INSERT lists them:
 * run_id, created_at, url, state, initial_body (text or bytes), config (JSON), labels (JSON or null), caller_ip,
 * flow_control_key, updated_at (`now`, ms).
 */
export function newRunValues(run: NewRun, now: number): unknown[] {
  return [
    run.runId,
    run.createdAt,
    run.url,
    run.state ?? 'RUN_STARTED',
    run.initialBody,
    JSON.stringify(run.config),
    run.labels?.length ? JSON.stringify(run.labels) : null,
    run.callerIp ?? null,
    run.flowControlKey ?? null,
    now,
  ];
}

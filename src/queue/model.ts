/**
 * The queue's message model, shared by the API, the store and the dispatcher.
 *
 * Units: every time is Unix milliseconds, every duration milliseconds, unless a name says `S`.
 * Wire shapes: `Message`, `DlqMessage`, log entries.
 */
import type { TraceContext } from '../tracing.js';

/**
 * A message's trace context; `started` marks one svc began itself at publish (the request
 * carried none), which a workflow run's own context replaces (`workflows/run-engine.ts`).
 */
export interface MessageTrace extends TraceContext {
  started?: true;
}

/** Message states written to the event log (spec "Message states"). */
export const LOG_STATES = [
  'CREATED',
  'ACTIVE',
  'RETRY',
  'ERROR',
  'DELIVERED',
  'FAILED',
  'CANCEL_REQUESTED',
  'CANCELLED',
] as const;
export type LogState = (typeof LOG_STATES)[number];

/** Headers as stored and returned: Go-canonical keys (`Content-Type`), array values. */
export type HeaderMap = Record<string, string[]>;

/** Flow-control settings of a message (enforced by the flow-control issue). */
export interface FlowControl {
  parallelism?: number;
  rate?: number;
  /** seconds */
  period?: number;
}

/** What `Upstash-Redact-Fields` asks to hide in API answers and logs. */
export interface RedactSpec {
  body?: boolean;
  /** true = every header; a list = those header names (canonical). */
  header?: true | string[];
}

/**
 * Configuration of a message, parsed from publish headers (and reused, nested, for the
 * callback and failure-callback messages it spawns: `Upstash-Callback-Retries` etc.).
 */
export interface PublishOptions extends DeliverySettings {
  /** Forwarded headers, canonical keys (`Upstash-Forward-` stripped; `Content-Type` as is). */
  headers: HeaderMap;
  /** Absolute due time of the first attempt, ms; undefined = now. */
  notBefore?: number;
  /** Relative delay, ms (used when notBefore is absent). */
  delayMs?: number;
  deduplicationId?: string;
  contentBasedDeduplication?: boolean;
}

/** How a message is delivered: set at publish ({@link PublishOptions}) and kept with it ({@link NewMessage}). */
export interface DeliverySettings {
  method: string;
  maxRetries: number;
  /** `Upstash-Retry-Delay` expression (ms, may use `retried`); undefined = exponential backoff. */
  retryDelay?: string;
  /** Per-attempt timeout, ms. */
  timeoutMs?: number;
  callback?: string;
  callbackOptions?: PublishOptions;
  failureCallback?: string;
  failureCallbackOptions?: PublishOptions;
  labels?: string[];
  redact?: RedactSpec;
  flowControlKey?: string;
  flowControl?: FlowControl;
}

export type MessageKind = 'message' | 'callback' | 'failure_callback';

/**
 * A message delivered to the workflow URL as a step of a run (its start, a step, the callback of
 * a `context.call`), as the workflow engine (`workflows/run-engine.ts`) stores it with the message.
 */
export interface WorkflowStepInfo {
  runSeq: number;
  runId: string;
  createdAt: number;
  url: string;
  /** base64 of the run's initial payload (failure callbacks send it as `sourceBody`). */
  initialBody: string;
  call?: undefined;
  /**
   * The run's start, delivered to an endpoint that must answer as a workflow endpoint (with
   * `Upstash-Workflow-Sdk-Version`); a 2xx answer without it fails the run.
   */
  detectTrigger?: boolean;
  /**
   * The first delivery of a run started by `POST /v2/trigger` (`Upstash-Workflow-Unknown-Sdk`):
   * a workflow SDK of 1.0 or later triggers the run itself before answering; a 2xx answer
   * without that trigger comes from an older SDK and fails the run.
   */
  unknownSdk?: boolean;
}

/** A `context.call` request of a run to a third party: not a step of the list. */
export interface WorkflowCallInfo {
  call: true;
  runId: string;
  /** What the call's callback (a delivery of the run) carries. */
  callback: WorkflowStepInfo;
}

/** The workflow run a stored message belongs to (`NewMessage.workflow`). */
export type WorkflowMessageInfo = WorkflowStepInfo | WorkflowCallInfo;

/**
 * The workflow headers of a published message (`workflows/publish-headers.ts`), handed to the workflow
 * engine's prepare hook in `NewMessage.workflowPublish`; never stored.
 */
export interface WorkflowPublishInfo {
  runId: string;
  init: boolean;
  url?: string;
  callType?: string;
  featureSet?: string;
  createdAt?: number;
  /**
   * `Upstash-Workflow-Trigger-By-Sdk: true`: the SDK's own trigger of a run that svc started for
   * an endpoint whose SDK was not known (`POST /v2/trigger/...`, delivered with
   * `Upstash-Workflow-Unknown-Sdk: true`); it joins the active run instead of being deduplicated.
   */
  triggerBySdk: boolean;
  /** Set by `POST /v2/trigger/...`: the first delivery asks the SDK to trigger the run itself. */
  unknownSdk?: boolean;
  /** `Upstash-Workflow-Invoke: true`: a run started by `context.invoke` (body = `InvokeWorkflowRequest`). */
  invoke: boolean;
  /** Settings present on this message itself. */
  explicit: { retries: boolean; retryDelay: boolean; flowControl: boolean; failureCallback: boolean; timeout: boolean; callbackRetries?: boolean };
}


/** A message ready to be stored (built by the API layer or the dispatcher for callbacks). */
export interface NewMessage extends DeliverySettings {
  id: string;
  kind: MessageKind;
  url: string;
  headers: HeaderMap;
  body: Buffer;
  createdAt: number;
  /** ms; set when the user asked for a delay or not-before. */
  notBefore?: number;
  dueAt: number;
  callerIp?: string;
  topicName?: string;
  endpointName?: string;
  queueName?: string;
  scheduleId?: string;
  /** The workflow run the message belongs to; stored (as `{"workflow": …}` in the `extra` column). */
  workflow?: WorkflowMessageInfo;
  /** Workflow headers of a published message, consumed by the workflow engine before storing; never stored. */
  workflowPublish?: WorkflowPublishInfo;
  /**
   * The W3C trace context the message's deliveries continue (`delivery/trace.ts`): the publish
   * request's own (or, with tracing on, the publish span's), a schedule firing's, the attempt's
   * that spawned a callback, a workflow run's. Stored (in the `extra` column as `{"trace": …}`).
   */
  trace?: MessageTrace;
  /** Dedup key (already hashed for content-based dedup); undefined = no dedup. */
  dedupKey?: string;
  /**
   * Stored waiting for admission by its queue / flow-control key: not claimable until
   * the admission gate (`flow-control/gate.ts`) releases it. Set by the API, never by callbacks.
   */
  held?: boolean;
}

export type MessageStatus = 'pending' | 'delivered' | 'failed' | 'cancelled';

/** A message as read back from the store. */
export interface StoredMessage extends NewMessage {
  /** Store-internal sequence number (monotonic). */
  seq: number;
  status: MessageStatus;
  /** Failed attempts so far. */
  retried: number;
  cancelRequested: boolean;
}

/** The outcome of one delivery attempt, as recorded in logs, DLQ entries and callbacks. */
export interface AttemptOutcome {
  /** HTTP status, undefined when no response arrived (timeout, connection error). */
  status?: number;
  headers?: HeaderMap;
  body?: Buffer;
  /** Why the attempt failed (undefined on success). */
  error?: string;
}

export interface DlqEntry {
  dlqId: string;
  /** ms */
  createdAt: number;
  message: StoredMessage;
  outcome: AttemptOutcome;
}

export interface LogEntry {
  seq: number;
  time: number;
  state: LogState;
  message: StoredMessage;
  error?: string;
  nextDeliveryTime?: number;
  outcome?: AttemptOutcome;
}

/**
 * Filters shared by the DLQ list, logs list and bulk operations. Every list is OR within the
 * field, and fields combine with AND (spec "List DLQ messages" rules 1-2).
 */
export interface MessageFilter {
  messageIds?: string[];
  url?: string[];
  topicName?: string[];
  queueName?: string[];
  scheduleId?: string[];
  label?: string[];
  flowControlKey?: string[];
  callerIp?: string[];
  host?: string[];
  path?: string[];
  /** DLQ only */
  responseStatus?: number[];
  /** DLQ only */
  dlqIds?: string[];
  /** logs only (IN_PROGRESS already expanded) */
  state?: LogState[];
  /** ms, inclusive */
  fromDate?: number;
  /** ms, inclusive */
  toDate?: number;
}

export interface Page {
  /** Opaque cursor of a previous page. */
  cursor?: string;
  count: number;
  order: 'earliestFirst' | 'latestFirst';
  /**
   * Byte bound of the page's bodies (message body + response body of each entry, raw bytes): the
   * page ends before the entry that would pass it, but holds at least one entry; the cursor then
   * continues with that entry. Undefined = bounded by `count` only.
   */
  maxBytes?: number;
}

export interface PageResult<T> {
  items: T[];
  /** Absent on the last page. */
  cursor?: string;
}

export interface EnqueueResult {
  messageId: string;
  deduplicated: boolean;
  /** Set when the message was handed off claimed to the caller's dispatcher. */
  claimed?: StoredMessage;
}

/**
 * Builds {@link NewMessage}s: from publish options (API), and the callback / failure-callback
 * messages spawned by a delivery attempt ("callbacks are themselves messages").
 */
import { createHash } from 'node:crypto';
import { randomInto } from './random.js';
import type { AttemptOutcome, MessageKind, NewMessage, PublishOptions, StoredMessage, WorkflowMessageInfo, WorkflowPublishInfo } from './model.js';

/**
 * A message id: `msg_` + 27 base64url characters (id shapes) encoding 20 bytes:
 * the creation time in ms (6 bytes, big-endian) then 14 random bytes (112 bits). The time prefix
 * keeps ids made close together close in the store's unique index on `id`, so an insert dirties
 * the same few index pages instead of a random page per message (a page per message written to
 * the WAL at every commit, measured in the store micro-benchmark, `docs/readme/queue-bench.md`).
 */
export function newMessageId(now = Date.now()): string {
  // one reused buffer (the string is made from it before it is written again), bytes written by
  // hand: ~5,500 CPU instructions per id with a new Buffer, writeUIntBE and a random subarray
  const b = ID_BYTES;
  const t = Math.max(0, Math.floor(now)) % 2 ** 48;
  const hi = Math.floor(t / 2 ** 32);
  const lo = t % 2 ** 32;
  b[0] = hi >>> 8;
  b[1] = hi & 0xff;
  b[2] = lo >>> 24;
  b[3] = (lo >>> 16) & 0xff;
  b[4] = (lo >>> 8) & 0xff;
  b[5] = lo & 0xff;
  randomInto(b, 6, 14);
  return `msg_${b.toString('base64url')}`;
}
const ID_BYTES = Buffer.alloc(20);

export interface Target {
  url: string;
  topicName?: string;
  endpointName?: string;
  queueName?: string;
  scheduleId?: string;
}

/**
 * A new message for `target` with `opts`. `dueAt` = notBefore, else now + delay, else now.
 * The dedup key: `id:<Deduplication-Id>`, or for content-based dedup the SHA-256 of destination,
 * body, and forwarded headers (incl. Content-Type).
 */
export function buildMessage(
  opts: PublishOptions,
  target: Target,
  body: Buffer,
  now: number,
  extra: { kind?: MessageKind; callerIp?: string; workflow?: WorkflowMessageInfo; workflowPublish?: WorkflowPublishInfo } = {},
): NewMessage {
  const dueAt = opts.notBefore ?? (opts.delayMs ? now + opts.delayMs : now);
  let dedupKey: string | undefined;
  if (opts.deduplicationId !== undefined) dedupKey = `id:${opts.deduplicationId}`;
  else if (opts.contentBasedDeduplication) {
    const h = createHash('sha256');
    h.update(target.url).update('\0').update(JSON.stringify(Object.entries(opts.headers).sort())).update('\0').update(body);
    dedupKey = `content:${h.digest('base64url')}`;
  }
  return {
    id: newMessageId(),
    kind: extra.kind ?? 'message',
    url: target.url,
    method: opts.method,
    headers: opts.headers,
    body,
    createdAt: now,
    notBefore: opts.notBefore ?? (opts.delayMs ? dueAt : undefined),
    dueAt,
    maxRetries: opts.maxRetries,
    retryDelay: opts.retryDelay,
    timeoutMs: opts.timeoutMs,
    callback: opts.callback,
    callbackOptions: opts.callbackOptions,
    failureCallback: opts.failureCallback,
    failureCallbackOptions: opts.failureCallbackOptions,
    callerIp: extra.callerIp,
    labels: opts.labels,
    redact: opts.redact,
    topicName: target.topicName,
    endpointName: target.endpointName,
    queueName: target.queueName,
    scheduleId: target.scheduleId,
    flowControlKey: opts.flowControlKey,
    flowControl: opts.flowControl,
    workflow: extra.workflow,
    workflowPublish: extra.workflowPublish,
    dedupKey,
  };
}

/**
 * What a feature that owns some messages adds to the callback and failure-callback messages they
 * spawn (the workflow engine: `workflows/callback-fields.ts`). Registered with the dispatcher
 * (`DispatcherOptions.callbacks`), so the message builder never imports the feature.
 */
export interface CallbackHooks {
  /** Extra fields of the callback payload of `m` (`{}` for none). */
  fields(m: StoredMessage): Record<string, unknown>;
  /** The body of the `kind` callback message of `m`, given its JSON payload (`payload` unchanged for none). */
  body(m: StoredMessage, kind: 'callback' | 'failure_callback', payload: Buffer): Buffer;
  /** The workflow run the `kind` callback message of `m` belongs to (undefined for none). */
  workflow(m: StoredMessage, kind: 'callback' | 'failure_callback'): WorkflowMessageInfo | undefined;
}

/** The callback payload of `m`'s attempt `outcome` (failure callbacks add `dlqId`). */
export function callbackPayload(m: StoredMessage, outcome: AttemptOutcome, dlqId?: string, hooks?: CallbackHooks): Record<string, unknown> {
  const sourceHeader: Record<string, string[]> = m.headers;
  return {
    status: outcome.status ?? 0,
    header: outcome.headers ?? {},
    body: (outcome.body ?? Buffer.alloc(0)).toString('base64'),
    ...(outcome.error && outcome.status === undefined ? { error: outcome.error } : {}),
    retried: m.retried,
    maxRetries: m.maxRetries,
    sourceMessageId: m.id,
    topicName: m.topicName,
    endpointName: m.endpointName,
    url: m.url,
    method: m.method,
    sourceHeader,
    sourceBody: m.body.toString('base64'),
    notBefore: String(m.notBefore ?? m.createdAt),
    createdAt: String(m.createdAt),
    scheduleId: m.scheduleId,
    callerIP: m.callerIp,
    ...hooks?.fields(m), // workflow runs: initial payload as sourceBody, run id
    ...(dlqId !== undefined ? { dlqId } : {}),
  };
}

const DEFAULT_CALLBACK_OPTIONS = (m: StoredMessage): PublishOptions => ({ method: 'POST', headers: {}, maxRetries: m.maxRetries });

/**
 * The callback (`kind` 'callback', to `m.callback`) or failure-callback message for attempt
 * `outcome` of `m`, with what `hooks` add; undefined when `m` has none configured.
 */
export function buildCallback(
  m: StoredMessage,
  kind: 'callback' | 'failure_callback',
  outcome: AttemptOutcome,
  now: number,
  dlqId?: string,
  hooks?: CallbackHooks,
): NewMessage | undefined {
  const url = kind === 'callback' ? m.callback : m.failureCallback;
  if (!url) return undefined;
  const opts = (kind === 'callback' ? m.callbackOptions : m.failureCallbackOptions) ?? DEFAULT_CALLBACK_OPTIONS(m);
  const headers = { ...opts.headers };
  if (!Object.keys(headers).some((k) => k.toLowerCase() === 'content-type')) headers['Content-Type'] = ['application/json'];
  const payload = Buffer.from(JSON.stringify(callbackPayload(m, outcome, dlqId, hooks)));
  const body = hooks ? hooks.body(m, kind, payload) : payload;
  return buildMessage(
    { ...opts, headers, deduplicationId: undefined, contentBasedDeduplication: false },
    // queueName kept: a queue's slot stays taken until the callbacks of its message are done
    //; callbacks are never held for admission themselves.
    { url, topicName: undefined, queueName: m.queueName, scheduleId: m.scheduleId },
    body,
    now,
    { kind, callerIp: m.callerIp, workflow: hooks?.workflow(m, kind) },
  );
}

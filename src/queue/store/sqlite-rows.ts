/**
 * Row <-> model mapping and filter -> SQL for the queue stores (SQLite, and PostgreSQL where the
 * rows have the same shape). Kept apart from the store
 * class so each file reads in one sitting.
 */
import type { DlqEntry, HeaderMap, LogEntry, LogState, MessageFilter, NewMessage, Page, StoredMessage } from '../model.js';

/** A `messages` row as better-sqlite3 returns it. */
export interface MessageRow {
  seq: number;
  id: string;
  kind: string;
  status: string;
  url: string;
  method: string;
  headers: string;
  body: Buffer;
  created_at: number;
  not_before: number | null;
  due_at: number;
  max_retries: number;
  retried: number;
  retry_delay: string | null;
  timeout_ms: number | null;
  callback: string | null;
  callback_opts: string | null;
  failure_callback: string | null;
  failure_callback_opts: string | null;
  caller_ip: string | null;
  labels: string | null;
  redact: string | null;
  topic_name: string | null;
  endpoint_name: string | null;
  queue_name: string | null;
  schedule_id: string | null;
  flow_control_key: string | null;
  flow_control: string | null;
  extra: string | null;
  cancel_requested: number;
}

const j = (v: string | null) => (v === null ? undefined : JSON.parse(v));
const u = <T>(v: T | null): T | undefined => (v === null ? undefined : v);

export function rowToMessage(r: MessageRow): StoredMessage {
  const extra = j(r.extra) as Pick<StoredMessage, 'workflow' | 'trace'> | undefined;
  return {
    seq: r.seq,
    id: r.id,
    kind: r.kind as StoredMessage['kind'],
    status: r.status as StoredMessage['status'],
    url: r.url,
    method: r.method,
    headers: JSON.parse(r.headers) as HeaderMap,
    body: r.body,
    createdAt: r.created_at,
    notBefore: u(r.not_before),
    dueAt: r.due_at,
    maxRetries: r.max_retries,
    retried: r.retried,
    retryDelay: u(r.retry_delay),
    timeoutMs: u(r.timeout_ms),
    callback: u(r.callback),
    callbackOptions: j(r.callback_opts),
    failureCallback: u(r.failure_callback),
    failureCallbackOptions: j(r.failure_callback_opts),
    callerIp: u(r.caller_ip),
    labels: j(r.labels),
    redact: j(r.redact),
    topicName: u(r.topic_name),
    endpointName: u(r.endpoint_name),
    queueName: u(r.queue_name),
    scheduleId: u(r.schedule_id),
    flowControlKey: u(r.flow_control_key),
    flowControl: j(r.flow_control),
    workflow: extra?.workflow,
    trace: extra?.trace,
    cancelRequested: r.cancel_requested === 1,
  };
}

const js = (v: unknown) => (v === undefined ? null : JSON.stringify(v));

/**
 * The `extra` column: `{"workflow": …}` for a message of a workflow run (the column's JSON shape
 * since the first schema, so rows written before the typed field read back the same) and
 * `{"trace": …}` for a message with a trace context, else NULL.
 */
const extraColumn = (m: NewMessage): string | null =>
  m.workflow || m.trace ? JSON.stringify(m.trace ? { workflow: m.workflow, trace: m.trace } : { workflow: m.workflow }) : null;
const n = <T>(v: T | undefined): T | null => (v === undefined ? null : v);

/** Named parameters for the INSERT of a new message. */
export function messageParams(m: NewMessage): Record<string, unknown> {
  let host = '';
  let pathname = '';
  let origin = '';
  try {
    const parsed = new URL(m.url);
    host = parsed.host;
    pathname = parsed.pathname;
    origin = parsed.origin;
  } catch {
    /* validated by the API; keep empty */
  }
  return {
    id: m.id,
    kind: m.kind,
    url: m.url,
    url_host: host,
    url_path: pathname,
    origin,
    method: m.method,
    headers: JSON.stringify(m.headers),
    body: m.body,
    created_at: m.createdAt,
    not_before: n(m.notBefore),
    due_at: m.dueAt,
    max_retries: m.maxRetries,
    retry_delay: n(m.retryDelay),
    timeout_ms: n(m.timeoutMs),
    callback: n(m.callback),
    callback_opts: js(m.callbackOptions),
    failure_callback: n(m.failureCallback),
    failure_callback_opts: js(m.failureCallbackOptions),
    caller_ip: n(m.callerIp),
    labels: m.labels?.length ? JSON.stringify(m.labels) : null,
    redact: js(m.redact),
    topic_name: n(m.topicName),
    endpoint_name: n(m.endpointName),
    queue_name: n(m.queueName),
    schedule_id: n(m.scheduleId),
    flow_control_key: n(m.flowControlKey),
    flow_control: js(m.flowControl),
    extra: extraColumn(m),
    claimed_by: m.held ? 'held' : null, // 'held' = waiting for admission (migration 0002)
    lease_until: null,
  };
}

/** The columns a new message is stored with, in the order of {@link messageValues}. */
export const MESSAGE_COLUMNS = [
  'id', 'kind', 'url', 'url_host', 'url_path', 'origin', 'method', 'headers', 'body', 'created_at', 'not_before',
  'due_at', 'max_retries', 'retry_delay', 'timeout_ms', 'callback', 'callback_opts', 'failure_callback',
  'failure_callback_opts', 'caller_ip', 'labels', 'redact', 'topic_name', 'endpoint_name', 'queue_name',
  'schedule_id', 'flow_control_key', 'flow_control', 'extra', 'claimed_by', 'lease_until',
] as const;

/**
 * Drops the NULLs from `values` (a {@link messageValues} list, changed in place) and returns the
 * bit mask of the columns kept (bit `i` = `MESSAGE_COLUMNS[i]`), for {@link insertMessageSqlFor}:
 * positional parameters (the publish hot path: binding named parameters from an object costs a
 * property lookup each). Every column that can be NULL has no DEFAULT (NULL), so an INSERT that
 * leaves a NULL column out stores the same row; a typical message leaves 16-17 of the 31 out, and
 * better-sqlite3 binds each parameter with a type check and a `sqlite3_bind_*` call (~200 CPU
 * instructions a value, measured with callgrind, `docs/readme/queue-bench.md` "Sixth pass").
 */
export function presentMessageValues(values: unknown[]): number {
  let mask = 0;
  let k = 0;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (v === null) continue;
    mask |= 1 << i;
    values[k++] = v;
  }
  values.length = k;
  return mask;
}

/** The INSERT of a new message naming only the columns of `mask` ({@link presentMessageValues}), positional parameters in column order. */
export function insertMessageSqlFor(mask: number): string {
  const cols = MESSAGE_COLUMNS.filter((_, i) => (mask & (1 << i)) !== 0);
  return `INSERT INTO messages (${cols.join(', ')}) VALUES (${cols.map(() => '?').join(', ')})`;
}

/** Parsed `host`/`pathname`/`origin` of recent URLs (the same few destinations repeat). */
const urlParts = new Map<string, [string, string, string]>();

/**
 * Positional values of {@link MESSAGE_COLUMNS} (SQLite: {@link presentMessageValues}; PostgreSQL:
 * one array per column); `claim` stores the message leased to its owner (enqueue hand-off), else
 * it is unclaimed (or 'held', waiting for admission).
 */
export function messageValues(m: NewMessage, claim?: { owner: string; leaseUntil: number }): unknown[] {
  let parts = urlParts.get(m.url);
  if (parts === undefined) {
    try {
      const u = new URL(m.url);
      parts = [u.host, u.pathname, u.origin];
    } catch {
      parts = ['', '', '']; // validated by the API; keep empty
    }
    if (urlParts.size >= 4096) urlParts.clear();
    urlParts.set(m.url, parts);
  }
  return [
    m.id, m.kind, m.url, parts[0], parts[1], parts[2], m.method, JSON.stringify(m.headers), m.body, m.createdAt,
    n(m.notBefore), m.dueAt, m.maxRetries, n(m.retryDelay), n(m.timeoutMs), n(m.callback), js(m.callbackOptions),
    n(m.failureCallback), js(m.failureCallbackOptions), n(m.callerIp), m.labels?.length ? JSON.stringify(m.labels) : null,
    js(m.redact), n(m.topicName), n(m.endpointName), n(m.queueName), n(m.scheduleId), n(m.flowControlKey),
    js(m.flowControl), extraColumn(m), claim ? claim.owner : m.held ? 'held' : null, claim ? claim.leaseUntil : null,
  ];
}

export const INSERT_MESSAGE_SQL = `INSERT INTO messages (id, kind, url, url_host, url_path, origin, method, headers, body,
  created_at, not_before, due_at, max_retries, retry_delay, timeout_ms, callback, callback_opts, failure_callback,
  failure_callback_opts, caller_ip, labels, redact, topic_name, endpoint_name, queue_name, schedule_id,
  flow_control_key, flow_control, extra, claimed_by, lease_until)
  VALUES (@id, @kind, @url, @url_host, @url_path, @origin, @method, @headers, @body, @created_at, @not_before, @due_at,
  @max_retries, @retry_delay, @timeout_ms, @callback, @callback_opts, @failure_callback, @failure_callback_opts,
  @caller_ip, @labels, @redact, @topic_name, @endpoint_name, @queue_name, @schedule_id, @flow_control_key,
  @flow_control, @extra, @claimed_by, @lease_until)`;

/**
 * Collects AND-ed WHERE terms with positional params; `inList(col, values)` adds `col IN (?, ...)`
 * for a non-empty list (OR within one filter) and nothing for an absent/empty one.
 */
export function whereBuilder(): {
  terms: string[];
  params: unknown[];
  inList(col: string, values: readonly unknown[] | undefined): void;
} {
  const terms: string[] = [];
  const params: unknown[] = [];
  return {
    terms,
    params,
    inList(col, values) {
      if (!values?.length) return;
      terms.push(`${col} IN (${values.map(() => '?').join(',')})`);
      params.push(...values);
    },
  };
}

/**
 * WHERE terms for a filter over `m` (messages), optional `d` (dlq) and `l` (logs) aliases.
 * `timeColumn` is the column `fromDate`/`toDate` apply to. Returns SQL with `?` placeholders and
 * positional params; `dialect` 'pg' for the PostgreSQL store (then `toPgParams` numbers them).
 */
export function filterSql(f: MessageFilter, timeColumn: string, dialect: 'sqlite' | 'pg' = 'sqlite'): { sql: string; params: unknown[] } {
  const { terms, params, inList } = whereBuilder();
  inList('m.id', f.messageIds);
  inList('m.url', f.url);
  inList('m.topic_name', f.topicName);
  inList('m.queue_name', f.queueName);
  inList('m.schedule_id', f.scheduleId);
  inList('m.flow_control_key', f.flowControlKey);
  inList('m.caller_ip', f.callerIp);
  inList('m.url_host', f.host);
  inList('m.url_path', f.path);
  inList('d.response_status', f.responseStatus);
  inList('d.dlq_id', f.dlqIds);
  inList('l.state', f.state);
  if (f.label?.length) {
    const each = dialect === 'pg' ? 'json_array_elements_text(m.labels::json) je(value)' : 'json_each(m.labels) je';
    terms.push(`EXISTS (SELECT 1 FROM ${each} WHERE je.value IN (${f.label.map(() => '?').join(',')}))`);
    params.push(...f.label);
  }
  if (f.fromDate !== undefined) {
    terms.push(`${timeColumn} >= ?`);
    params.push(f.fromDate);
  }
  if (f.toDate !== undefined) {
    terms.push(`${timeColumn} <= ?`);
    params.push(f.toDate);
  }
  return { sql: terms.length ? terms.join(' AND ') : dialect === 'pg' ? 'TRUE' : '1', params };
}

/** A `logs` row (both stores). */
export interface LogRow {
  seq: number;
  time: number;
  message_seq: number;
  state: string;
  error: string | null;
  next_delivery_time: number | null;
  response_status: number | null;
  response_headers: string | null;
  response_body: Buffer | null;
}

/** A `dlq` row (both stores). */
export interface DlqRow {
  seq: number;
  dlq_id: string;
  message_seq: number;
  created_at: number;
  response_status: number | null;
  response_headers: string | null;
  response_body: Buffer | null;
  error: string | null;
}

/** A DLQ row and its message -> {@link DlqEntry}. */
export function dlqEntryFromRow(r: DlqRow, message: StoredMessage): DlqEntry {
  return {
    dlqId: r.dlq_id,
    createdAt: r.created_at,
    message,
    outcome: {
      status: r.response_status ?? undefined,
      headers: r.response_headers ? JSON.parse(r.response_headers) : undefined,
      body: r.response_body ?? undefined,
      error: r.error ?? undefined,
    },
  };
}

/** A log row and its message -> {@link LogEntry}. */
export function logEntryFromRow(r: LogRow, message: StoredMessage): LogEntry {
  return {
    seq: r.seq,
    time: r.time,
    state: r.state as LogState,
    message,
    error: r.error ?? undefined,
    nextDeliveryTime: r.next_delivery_time ?? undefined,
    outcome:
      r.response_status !== null || r.response_headers !== null || r.response_body !== null
        ? {
            status: r.response_status ?? undefined,
            headers: r.response_headers ? JSON.parse(r.response_headers) : undefined,
            body: r.response_body ?? undefined,
          }
        : undefined,
  };
}

/**
 * The entries of one page from `rows` (fetched with LIMIT count + 1; an array or a lazy statement
 * iterator): at most `page.count`, and with `page.maxBytes` set, stopping before the entry whose
 * `bytes` would pass the bound (the first entry is always taken). Rows past the stop are never
 * turned into entries. `more` tells whether anything follows (the cursor is the last taken row's seq).
 */
export function takePage<R extends { seq: number }, T>(
  rows: Iterable<R>,
  page: Page,
  toItem: (row: R) => T,
  bytes: (item: T) => number,
): { items: { row: R; item: T }[]; more: boolean } {
  const items: { row: R; item: T }[] = [];
  let total = 0;
  let more = false;
  for (const row of rows) {
    if (items.length >= page.count) {
      more = true;
      break;
    }
    const item = toItem(row);
    const size = bytes(item);
    if (page.maxBytes !== undefined && items.length > 0 && total + size > page.maxBytes) {
      more = true;
      break;
    }
    total += size;
    items.push({ row, item });
  }
  return { items, more };
}

/** Bytes a DLQ entry carries in a page ({@link takePage}): message body + response body. */
export const bytesOfDlqEntry = (e: DlqEntry): number => e.message.body.length + (e.outcome.body?.length ?? 0);
/** Bytes a log entry carries in a page ({@link takePage}): message body + response body. */
export const bytesOfLogEntry = (e: LogEntry): number => e.message.body.length + (e.outcome?.body?.length ?? 0);

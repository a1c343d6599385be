/**
 * Query string -> {@link MessageFilter} and {@link Page} for the DLQ, logs and bulk endpoints
 * (spec "List DLQ messages", "List events"). Multi-value filters come
 * as repeated parameters or one comma-separated value; OR within a field, AND across fields.
 *
 * @throws QueueError 400 for malformed numbers, unknown states or orders.
 */
import { queueError } from '../errors.js';
import { LOG_STATES, type LogState, type MessageFilter, type Page } from '../model.js';
import { TOKEN_QUERY_PARAMS } from './context.js';

export type Query = Record<string, string | string[] | undefined>;

/**
 * The values of the first of `names` present and of the others, each parameter repeated or
 * comma-separated (URL parameters — a name containing `url` — split only where a new URL starts,
 * since URLs may contain commas); undefined when none has a value.
 */
export function queryValues(q: Query, ...names: string[]): string[] | undefined {
  const out: string[] = [];
  for (const name of names) {
    const v = q[name];
    if (v === undefined) continue;
    for (const item of Array.isArray(v) ? v : [v]) {
      const parts = name.toLowerCase().includes('url') ? item.split(/,(?=https?:\/\/)/) : item.split(',');
      for (const p of parts.map((s) => s.trim())) if (p) out.push(p);
    }
  }
  return out.length ? out : undefined;
}

function int(q: Query, name: string): number | undefined {
  const v = queryValues(q, name);
  if (!v) return undefined;
  if (!/^\d+$/.test(v[0])) throw queueError('invalidTimestamp', name, v[0]);
  return Number(v[0]);
}

/** Expands `IN_PROGRESS` and accepts the SDK spelling `CANCELED`. */
function states(q: Query): LogState[] | undefined {
  const v = queryValues(q, 'state');
  if (!v) return undefined;
  const out = new Set<LogState>();
  for (const raw of v) {
    const s = raw.toUpperCase();
    if (s === 'IN_PROGRESS') ['ACTIVE', 'RETRY', 'ERROR'].forEach((x) => out.add(x as LogState));
    else if (s === 'CANCELED') out.add('CANCELLED');
    else if (s === 'CANCEL_REQUESTED' || (LOG_STATES as readonly string[]).includes(s)) out.add(s as LogState);
    else throw queueError('invalidState', raw, `${LOG_STATES.join(', ')}, IN_PROGRESS`);
  }
  return [...out];
}

/** Query parameters that carry the token (accepted on every endpoint). */
const TOKEN_FIELDS: readonly string[] = TOKEN_QUERY_PARAMS;
/** Paging of the list and bulk endpoints. */
const PAGE_FIELDS = ['count', 'cursor', 'order'];
/** The message filter fields (with their aliases) of {@link parseFilter}. */
const MESSAGE_FILTER_FIELDS = [
  'messageId', 'messageIds', 'url', 'topicName', 'urlGroup', 'queueName', 'scheduleId', 'label', 'flowControlKey',
  'callerIp', 'callerIP', 'host', 'path', 'fromDate', 'toDate',
];

/** The workflow run filter fields (with aliases) of `parseRunFilter` (`api/workflows.ts`). */
const RUN_FILTER_FIELDS = [
  'workflowRunId', 'workflowRunIds', 'workflowUrl', 'workflowCreatedAt', 'label', 'flowControlKey', 'callerIp', 'callerIP', 'fromDate', 'toDate',
];

/**
 * The query fields each filtered endpoint accepts: every field the `@upstash/qstash` and
 * `@upstash/workflow` SDKs send there, with svc's aliases. Anything else is refused by
 * {@link checkQueryFields}.
 */
export const QUERY_FIELDS = {
  dlq: new Set([...TOKEN_FIELDS, ...PAGE_FIELDS, ...MESSAGE_FILTER_FIELDS, 'dlqIds', 'dlqId', 'responseStatus']),
  logs: new Set([...TOKEN_FIELDS, ...PAGE_FIELDS, ...MESSAGE_FILTER_FIELDS, 'state']),
  messages: new Set([...TOKEN_FIELDS, ...PAGE_FIELDS, ...MESSAGE_FILTER_FIELDS]),
  runs: {
    dlq: new Set([...TOKEN_FIELDS, ...PAGE_FIELDS, ...RUN_FILTER_FIELDS, 'url', 'dlqIds', 'dlqId', 'failureFunctionState', 'source']),
    logs: new Set([...TOKEN_FIELDS, ...PAGE_FIELDS, ...RUN_FILTER_FIELDS, 'state', 'messageId', 'groupBy']),
    cancel: new Set([...TOKEN_FIELDS, ...PAGE_FIELDS, ...RUN_FILTER_FIELDS, 'workflowUrlExactMatch']),
  },
} as const;

/**
 * Fields the SDKs may send that an endpoint does not implement: refused rather than ignored (an
 * ignored filter would widen the operation). Workflow runs have no destination host/path filter,
 * and the workflow DLQ no response-status filter.
 */
export const UNSUPPORTED_FIELDS = {
  runs: new Set(['host', 'path', 'responseStatus']),
  none: new Set<string>(),
} as const;

/**
 * Refuses (400) a query field outside `allowed`, so a misspelt filter (`?labeel=x`) can never
 * widen a bulk operation (a DLQ delete matching everything) or a listing.
 * @throws QueueError 400 naming the field
 */
export function checkQueryFields(q: Query, allowed: ReadonlySet<string>, unsupported: ReadonlySet<string> = UNSUPPORTED_FIELDS.none): void {
  for (const name of Object.keys(q)) {
    if (allowed.has(name) || q[name] === undefined) continue;
    if (unsupported.has(name)) throw queueError('unsupportedFilter', name);
    throw queueError('unknownQueryField', name, [...allowed].filter((n) => !TOKEN_FIELDS.includes(n)).join(', '));
  }
}

/**
 * The filter of a request; `kind` selects which extra fields apply.
 * @throws QueueError 400 for a field `kind` does not know ({@link checkQueryFields}) or a malformed value
 */
export function parseFilter(q: Query, kind: 'dlq' | 'logs' | 'messages'): MessageFilter {
  checkQueryFields(q, QUERY_FIELDS[kind]);
  const f: MessageFilter = {
    messageIds: queryValues(q, 'messageId', 'messageIds'),
    url: queryValues(q, 'url'),
    topicName: queryValues(q, 'topicName', 'urlGroup'),
    queueName: queryValues(q, 'queueName'),
    scheduleId: queryValues(q, 'scheduleId'),
    label: queryValues(q, 'label'),
    flowControlKey: queryValues(q, 'flowControlKey'),
    callerIp: queryValues(q, 'callerIp', 'callerIP'),
    host: queryValues(q, 'host'),
    path: queryValues(q, 'path'),
    fromDate: int(q, 'fromDate'),
    toDate: int(q, 'toDate'),
  };
  if (kind === 'dlq') {
    f.dlqIds = queryValues(q, 'dlqIds', 'dlqId');
    const rs = queryValues(q, 'responseStatus');
    if (rs) {
      if (!rs.every((s) => /^\d{3}$/.test(s))) throw queueError('invalidResponseStatus', rs.join(','));
      f.responseStatus = rs.map(Number);
    }
  }
  if (kind === 'logs') f.state = states(q);
  return f;
}

/** `count` (default = max = `maxCount`), `cursor`, `order` (default latestFirst). */
export function parsePage(q: Query, maxCount: number, defaultCount = maxCount): Page {
  const c = int(q, 'count');
  if (c !== undefined && c < 1) throw queueError('invalidCount');
  const cursorRaw = queryValues(q, 'cursor')?.[0];
  if (cursorRaw !== undefined && !/^\d+$/.test(cursorRaw)) throw queueError('invalidCursor', cursorRaw);
  const order = queryValues(q, 'order')?.[0] ?? 'latestFirst';
  if (order !== 'latestFirst' && order !== 'earliestFirst') {
    throw queueError('invalidOrder', order);
  }
  return { count: Math.min(maxCount, c ?? defaultCount), cursor: cursorRaw, order };
}

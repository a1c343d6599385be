/**
 * `POST /v2/publish/{destination}` and `POST /v2/batch` (entries `{destination, headers?, body?,
 * queue?}`; an optional field sent as `null` counts as absent, as the Python SDK sends it).
 *
 * The destination is the raw rest of the path (never decoded, `//` kept) plus the request's own
 * query string (minus our token parameters); a percent-encoded `http%3A...` destination is
 * decoded once. Responses: `{messageId, url, deduplicated?}` (200; 202 for a duplicate), an array
 * for URL-group destinations, and an array per entry for batch.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Span } from '@opentelemetry/api';
import { svcHeadersWithPrefix } from '../../http/headers.js';
import { buildMessage, type Target } from '../build.js';
import { blockedHost } from '../../private-address.js';
import { endPublishSpan, publishTraceContext, tracePublish } from '../delivery/trace.js';
import { splitUrl } from '../delivery/url-cache.js';
import { queueError } from '../errors.js';
import type { EnqueueResult, NewMessage } from '../model.js';
import { TOKEN_QUERY_PARAMS, type QueueApiContext } from './context.js';
import { withoutNulls } from './messages.js';
import { parseOptions } from '../options.js';
import { workflowPublishInfo } from '../workflows/publish-headers.js';

const TOKEN_PARAMS = new Set<string>(TOKEN_QUERY_PARAMS);

/** `decodeURIComponent(s)`, or undefined when `s` has a malformed escape (`%zz`, a cut UTF-8 sequence). */
export function tryDecode(s: string): string | undefined {
  try {
    return decodeURIComponent(s);
  } catch {
    return undefined;
  }
}

/** The destination of `/v2/publish/...` rebuilt from the raw request URL. */
export function destinationFromRawUrl(rawUrl: string, prefix: string): string {
  const rest = rawUrl.slice(rawUrl.indexOf(prefix) + prefix.length);
  const q = rest.indexOf('?');
  let dest = q < 0 ? rest : rest.slice(0, q);
  if (/^https?%3A/i.test(dest)) dest = tryDecode(dest) ?? dest;
  if (q >= 0) {
    const kept = rest
      .slice(q + 1)
      .split('&')
      .filter((kv) => kv !== '' && !TOKEN_PARAMS.has(tryDecode(kv.split('=')[0] ?? '') ?? ''));
    if (kept.length) dest += (dest.includes('?') ? '&' : '?') + kept.join('&');
  }
  return dest;
}

/**
 * Validates an http(s) URL destination (and the SSRF switch on literal addresses). The WHATWG
 * parse is the delivery's memoised one ({@link splitUrl}: the same destinations repeat, and a
 * `new URL()` per publish was ~4,000 CPU instructions); an http(s) URL's origin starts with its
 * scheme, any other scheme's is `null`.
 */
export function checkDestination(dest: string, blockPrivate: boolean): void {
  const u = splitUrl(dest);
  if (u === undefined) throw queueError('destinationNotUrl', dest);
  if (!u.origin.startsWith('http://') && !u.origin.startsWith('https://')) throw queueError('destinationScheme', dest);
  const why = blockPrivate ? blockedHost(u.hostname) : undefined;
  if (why) throw queueError('privateDestination', 'destination', dest, why);
}

/** A destination that is a URL (`scheme://...`) rather than a URL group or endpoint name. */
const URL_DESTINATION = /^[a-z][a-z0-9+.-]*:\/\//i;

/**
 * The targets of a publish destination: the URL itself, or a URL group's endpoints (`resolveDestination`).
 * A URL is answered synchronously (the publish hot path awaits nothing for it); a name needs the store.
 * @throws QueueError for an invalid or unknown destination (thrown, or the promise rejects)
 */
export function targetsFor(ctx: QueueApiContext, dest: string): { targets: Target[]; isUrl: boolean } | Promise<{ targets: Target[]; isUrl: boolean }> {
  if (URL_DESTINATION.test(dest)) {
    checkDestination(dest, ctx.config.blockPrivateDestinations);
    return { targets: [{ url: dest }], isUrl: true };
  }
  return groupTargets(ctx, dest);
}

/** {@link targetsFor} of a URL group or endpoint name. */
async function groupTargets(ctx: QueueApiContext, dest: string): Promise<{ targets: Target[]; isUrl: boolean }> {
  const resolved = await ctx.resolveDestination(dest);
  if (!resolved) throw queueError('unknownDestination', dest);
  for (const t of resolved) checkDestination(t.url, ctx.config.blockPrivateDestinations);
  return { targets: resolved, isUrl: false };
}

/** An RFC 9110 field name: a non-empty `token` (`tchar`s). */
const FIELD_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** An RFC 9110 field value: visible ASCII, obs-text (U+0080-U+00FF, sent as one byte each), SP and HTAB; no CR, LF, NUL or other controls. */
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

/**
 * Checks a header given inside a JSON body (a batch or batch-trigger entry's `headers`), which no
 * HTTP parser has judged: a name that is not an RFC 9110 token or a value with CR, LF, NUL, another
 * control or a character above U+00FF could never be sent on delivery (undici refuses it, so every
 * attempt would fail until the DLQ), so it is refused at publish.
 * @throws QueueError `batchEntryHeaderInvalid` (400) naming the header
 */
export function checkHeaderField(name: string, value: string): void {
  if (!FIELD_NAME.test(name) || !FIELD_VALUE.test(value)) throw queueError('batchEntryHeaderInvalid', name);
}

/** A batch entry's `headers` object, lower-case keys; a header whose value is `null` is left out. */
function lowerStringHeaders(h: unknown): Record<string, string> {
  if (h === undefined || h === null) return {};
  if (typeof h !== 'object' || Array.isArray(h)) throw queueError('batchEntryHeaders');
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(h as Record<string, unknown>)) {
    if (v === null) continue;
    if (typeof v !== 'string') throw queueError('batchEntryHeader', k);
    checkHeaderField(k, v);
    out[k.toLowerCase()] = v;
  }
  return out;
}

/** The JSON answer of a publish: one object for a URL destination, an array for a URL group. */
function publishResponse(targets: Target[], results: { messageId: string; deduplicated: boolean }[], isUrl: boolean): unknown {
  const items = results.map((r, i) =>
    r.deduplicated ? { messageId: r.messageId, url: targets[i].url, deduplicated: true } : { messageId: r.messageId, url: targets[i].url },
  );
  return isUrl ? items[0] : items;
}

/**
 * `POST /v2/publish/{destination}` for an already authenticated request, independent of the HTTP
 * front (Fastify route below, or the fast path of `api/fast-publish.ts`). `rawUrl` is the request
 * target as sent, `headers` lower-case, `callerIp` the peer address.
 * Returns the status (200, 202 when every message was a duplicate) and the JSON payload.
 * @throws QueueError for invalid input (400/413), as every route does.
 */
export function publishRequest(
  ctx: QueueApiContext,
  rawUrl: string,
  headers: IncomingHttpHeaders,
  body: Buffer,
  callerIp: string | undefined,
): Promise<{ status: number; payload: unknown }> {
  return publishTo(ctx, destinationFromRawUrl(rawUrl, '/v2/publish/'), headers, body, callerIp);
}

/**
 * Publishes `body` to `dest` (a URL or a URL group) with the publish headers `headers`
 * (lower-case), into queue `queueName` when given (`POST /v2/enqueue/{queue}/...`).
 * Answers as {@link publishRequest}. @throws QueueError for invalid input (400/413).
 */
export async function publishTo(
  ctx: QueueApiContext,
  dest: string,
  headers: IncomingHttpHeaders,
  body: Buffer,
  callerIp: string | undefined,
  queueName?: string,
): Promise<{ status: number; payload: unknown }> {
  if (!dest) throw queueError('missingDestination', dest);
  if (body.length > ctx.config.maxMessageBytes) throw queueError('messageTooLarge', body.length, ctx.config.maxMessageBytes);
  const now = ctx.clock.now();
  const cfg = svcHeadersWithPrefix(headers, '');
  const opts = parseOptions(cfg, headers['content-type'], now, { blockPrivate: ctx.config.blockPrivateDestinations, maxRetries: ctx.config.maxRetries });
  const found = targetsFor(ctx, dest);
  const { targets, isUrl } = found instanceof Promise ? await found : found;
  const workflowPublish = workflowPublishInfo(cfg);
  const msgs = targets.map((t) => buildMessage(opts, queueName === undefined ? t : { ...t, queueName }, body, now, { callerIp, workflowPublish }));
  const span = tracePublish(msgs, publishTraceContext(headers, opts.headers), queueName ?? dest);
  let results: EnqueueResult[];
  try {
    results = await ctx.enqueue.enqueue(msgs, { now, published: true });
  } catch (err) {
    endPublishSpan(span, undefined, err);
    throw err;
  }
  endPublishSpan(span, results);
  return { status: results.every((r) => r.deduplicated) ? 202 : 200, payload: publishResponse(targets, results, isUrl) };
}

/**
 * Most entries one `POST /v2/batch` (or `POST /v2/batch/trigger`) takes (400 `batchTooManyEntries` past it, nothing stored). The
 * hosted service documents no count, only its body size; this bounds what one request makes svc
 * plan and write in one go (a 11 MiB body of minimal entries is ~300 000 messages) while leaving
 * room for the SDKs' batches (a workflow's parallel steps are one entry each).
 */
export const MAX_BATCH_ENTRIES = 1000;

/** Registers the publish routes. */
export function registerPublishRoutes(app: FastifyInstance, ctx: QueueApiContext): void {
  app.post('/v2/publish/*', async (req: FastifyRequest, reply) => {
    const body = (req.body as Buffer | undefined) ?? Buffer.alloc(0);
    const { status, payload } = await publishRequest(ctx, req.raw.url ?? '', req.headers, body, req.ip);
    reply.code(status);
    return payload;
  });

  app.post('/v2/batch', async (req: FastifyRequest) => {
    const raw = (req.body as Buffer | undefined) ?? Buffer.alloc(0);
    let entries: unknown;
    try {
      entries = JSON.parse(raw.toString('utf8'));
    } catch (err) {
      throw queueError('invalidJson', (err as Error).message);
    }
    if (!Array.isArray(entries)) throw queueError('batchNotArray');
    if (entries.length > MAX_BATCH_ENTRIES) throw queueError('batchTooManyEntries', entries.length, MAX_BATCH_ENTRIES);
    const now = ctx.clock.now();
    const plan: { targets: Target[]; isUrl: boolean; msgs: NewMessage[]; span?: Span }[] = [];
    for (const [i, e] of entries.entries()) {
      if (!e || typeof e !== 'object' || Array.isArray(e)) throw queueError('batchEntryNotObject', i);
      // optional fields sent as null (every unset one, from the Python SDK) are absent
      const { destination, headers, body, queue } = withoutNulls(e as Record<string, unknown>);
      if (typeof destination !== 'string' || !destination) throw queueError('batchEntryDestination', i);
      if (body !== undefined && typeof body !== 'string') throw queueError('batchEntryBody', i);
      if (queue !== undefined && (typeof queue !== 'string' || !/^[A-Za-z0-9._-]+$/.test(queue))) {
        throw queueError('batchEntryQueue', i);
      }
      const h = lowerStringHeaders(headers);
      const bytes = Buffer.from((body as string | undefined) ?? '', 'utf8');
      if (bytes.length > ctx.config.maxMessageBytes) throw queueError('messageTooLarge', bytes.length, ctx.config.maxMessageBytes);
      const cfg = svcHeadersWithPrefix(h, '');
      const opts = parseOptions(cfg, h['content-type'], now, { blockPrivate: ctx.config.blockPrivateDestinations, maxRetries: ctx.config.maxRetries });
      const resolved = await targetsFor(ctx, destination);
      const isUrl = resolved.isUrl;
      const targets = queue ? resolved.targets.map((t) => ({ ...t, queueName: queue as string })) : resolved.targets;
      const msgs = targets.map((t) => buildMessage(opts, t, bytes, now, { callerIp: req.ip, workflowPublish: workflowPublishInfo(cfg) }));
      // an entry's own trace context, else the batch request's
      const span = tracePublish(msgs, publishTraceContext(h.traceparent === undefined ? req.headers : h, opts.headers), (queue as string | undefined) ?? destination);
      plan.push({ targets, isUrl, msgs, span });
    }
    let results: EnqueueResult[];
    try {
      results = await ctx.enqueue.enqueue(plan.flatMap((p) => p.msgs), { now, published: true });
    } catch (err) {
      for (const p of plan) endPublishSpan(p.span, undefined, err);
      throw err;
    }
    for (const p of plan) endPublishSpan(p.span, undefined);
    let k = 0;
    return plan.map((p) => publishResponse(p.targets, p.msgs.map(() => results[k++]), p.isUrl));
  });
}

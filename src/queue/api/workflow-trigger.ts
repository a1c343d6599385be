/**
 * Starting a workflow run over plain HTTP, without the SDK on the caller's side:
 *
 *   POST /v2/trigger/{workflowUrl}   body = the run's payload      -> {workflowRunId, workflowCreatedAt, deduplicated?}
 *   POST /v2/batch/trigger           [{destination, body?, headers?}] -> 201 [{workflowRunId, workflowCreatedAt, deduplicated?}]
 *
 * Headers are the publish headers (`Svc-`/`Upstash-` `Retries`, `Retry-Delay`, `Timeout`,
 * `Delay`, `Flow-Control-*`, `Failure-Callback`, `Label`, `Forward-*`, `Content-Type`) plus
 * `Workflow-RunId` (the run id as given; a new `wfr_…` id when absent). The run's first delivery
 * carries `Upstash-Workflow-Unknown-Sdk: true`: the endpoint's SDK then triggers the run itself
 * (with `Upstash-Workflow-Trigger-By-Sdk: true` and the same run id) with its own settings, and
 * that trigger continues the run (`WorkflowEngine.retrigger`). A destination that answers without
 * `Upstash-Workflow-Sdk-Version` fails the run as a non-workflow destination.
 */
import type { Span } from '@opentelemetry/api';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { svcHeadersWithPrefix } from '../../http/headers.js';
import { buildMessage } from '../build.js';
import { endPublishSpan, publishTraceContext, tracePublish } from '../delivery/trace.js';
import { queueError } from '../errors.js';
import type { NewMessage } from '../model.js';
import type { WorkflowEngine } from '../workflows/run-engine.js';
import { workflowPublishInfo } from '../workflows/publish-headers.js';
import { newRunId } from '../workflows/recovery.js';
import type { QueueApiContext } from './context.js';
import { withoutNulls } from './messages.js';
import { parseOptions } from '../options.js';
import { checkDestination, checkHeaderField, destinationFromRawUrl, MAX_BATCH_ENTRIES } from './publish.js';

/** The trigger message of a new run to `url` with the (lower-case) request headers `h`. */
function triggerMessage(ctx: QueueApiContext, url: string, h: Record<string, string>, body: Buffer, callerIp: string | undefined, now: number) {
  if (!/^https?:\/\//i.test(url)) throw queueError('invalidWorkflowUrl', url);
  checkDestination(url, ctx.config.blockPrivateDestinations);
  if (body.length > ctx.config.maxMessageBytes) throw queueError('messageTooLarge', body.length, ctx.config.maxMessageBytes);
  const cfg = svcHeadersWithPrefix(h, '');
  const runId = cfg['workflow-runid'] || newRunId();
  const opts = parseOptions(cfg, h['content-type'], now, { maxRetries: ctx.config.maxRetries });
  const workflowPublish = { ...workflowPublishInfo({ ...cfg, 'workflow-runid': runId, 'workflow-init': 'true', 'workflow-url': url })!, unknownSdk: true };
  const message = buildMessage(opts, { url }, body, now, { callerIp, workflowPublish });
  // the run's trace context: the request's own, as for a publish (`delivery/trace.ts`)
  const span = tracePublish([message], publishTraceContext(h, message.headers), url);
  return { runId, message, span };
}

/** Stores the trigger messages; answers one `{workflowRunId, workflowCreatedAt, deduplicated?}` each. */
async function start(ctx: QueueApiContext, engine: WorkflowEngine, runs: { runId: string; message: NewMessage; span?: Span }[]) {
  let results;
  try {
    results = await ctx.enqueue.enqueue(
      runs.map((r) => r.message),
      { published: true },
    );
  } catch (err) {
    for (const r of runs) endPublishSpan(r.span, undefined, err);
    throw err;
  }
  for (const [i, r] of runs.entries()) endPublishSpan(r.span, [results[i]]);
  const out: Record<string, unknown>[] = [];
  for (const [i, r] of runs.entries()) {
    const run = await engine.runs.findRun(r.runId);
    out.push({ workflowRunId: r.runId, workflowCreatedAt: run?.createdAt, ...(results[i].deduplicated ? { deduplicated: true } : {}) });
  }
  return out;
}

/**
 * The string headers of `h`, lower-case names. `fromJson`: they come from a JSON body, not from
 * the HTTP parser, and each is checked ({@link checkHeaderField}; 400 for one HTTP cannot carry).
 */
function lowerHeaders(h: Record<string, unknown>, fromJson = false): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(h)) {
    if (typeof v !== 'string') continue;
    if (fromJson) checkHeaderField(k, v);
    out[k.toLowerCase()] = v;
  }
  return out;
}

/** Registers the trigger routes on the queue server. */
export function registerWorkflowTriggerRoutes(app: FastifyInstance, ctx: QueueApiContext, engine: WorkflowEngine): void {
  app.post('/v2/trigger/*', async (req: FastifyRequest) => {
    const url = destinationFromRawUrl(req.raw.url ?? '', '/v2/trigger/');
    const body = (req.body as Buffer | undefined) ?? Buffer.alloc(0);
    const run = triggerMessage(ctx, url, lowerHeaders(req.headers as Record<string, unknown>), body, req.ip, ctx.clock.now());
    return (await start(ctx, engine, [run]))[0];
  });

  app.post('/v2/batch/trigger', async (req: FastifyRequest, reply) => {
    let entries: unknown;
    try {
      entries = JSON.parse(((req.body as Buffer | undefined) ?? Buffer.alloc(0)).toString('utf8'));
    } catch (err) {
      throw queueError('invalidJson', (err as Error).message);
    }
    if (!Array.isArray(entries)) throw queueError('triggerBatchNotArray');
    if (entries.length > MAX_BATCH_ENTRIES) throw queueError('batchTooManyEntries', entries.length, MAX_BATCH_ENTRIES);
    const now = ctx.clock.now();
    const runs = entries.map((e, i) => {
      if (!e || typeof e !== 'object' || Array.isArray(e)) throw queueError('triggerEntryNotObject', i);
      const { destination, workflowUrl, body, headers } = withoutNulls(e as Record<string, unknown>); // null = absent
      const url = destination ?? workflowUrl;
      if (typeof url !== 'string' || !url) throw queueError('triggerEntryDestination', i);
      if (body !== undefined && typeof body !== 'string') throw queueError('triggerEntryBody', i);
      if (headers !== undefined && (typeof headers !== 'object' || Array.isArray(headers))) {
        throw queueError('triggerEntryHeaders', i);
      }
      const h = lowerHeaders((headers ?? {}) as Record<string, unknown>, true);
      return triggerMessage(ctx, url, h, Buffer.from((body as string | undefined) ?? '', 'utf8'), req.ip, now);
    });
    reply.code(201);
    return start(ctx, engine, runs);
  });
}

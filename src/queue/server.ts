/**
 * The queue area's HTTP server and engine: opens the store, starts the dispatcher, registers the
 * routes on its own Fastify instance with its own body parser, auth hook and error handler
 * and prunes old logs/finished messages periodically.
 */
import path from 'node:path';
import type { FastifyError, FastifyInstance } from 'fastify';
import type { AreaContext, AreaServer } from '../area.js';
import { credentialShapes, signingKeys } from '../credentials.js';
import { matchesAny, requestToken } from '../http/auth.js';
import { listenAccepting } from '../http/accept.js';
import { FAST_KEEP_ALIVE_MS, FAST_SERVER_OPTIONS, createFastServer } from '../http/fast.js';
import { meterFastify } from '../http/metrics.js';
import { createHttpServer } from '../http/server.js';
import { repeatedErrorLog } from '../logger.js';
import { fastPublishHandler } from './api/fast-publish.js';
import { registerDlqRoutes } from './api/dlq.js';
import { CREDENTIALS, TOKEN_QUERY_PARAMS, type QueueApiContext } from './api/context.js';
import { registerKeyRoutes } from './api/keys.js';
import { attachResources } from './resources.js';
import { registerLogRoutes } from './api/logs.js';
import { registerStatsRoutes } from './api/stats.js';
import { registerWorkflowEventRoutes, registerWorkflowRoutes, WEBHOOK_PREFIX, workflowDlqHooks } from './api/workflows.js';
import { registerWorkflowTriggerRoutes } from './api/workflow-trigger.js';
import { sweep as sweepWaiters } from './workflows/events.js';
import { workflowCallbackHooks } from './workflows/callback-fields.js';
import { WorkflowEngine } from './workflows/run-engine.js';
import { validQueueTokens } from './token.js';
import { registerMessageRoutes } from './api/messages.js';
import { registerPublishRoutes } from './api/publish.js';
import { systemClock, type Clock } from './clock.js';
import { Dispatcher } from './delivery/dispatcher.js';
import { HttpSender, type HttpSenderOptions } from './delivery/http.js';
import { EnqueueService } from './enqueue.js';
import { startCredentialSync } from './credential-sync.js';
import { errorAnswer, queueError, queueMessage, type QueueError } from './errors.js';
import { QueueMetrics } from './metrics.js';
import { openPgQueueStore } from './store/pg.js';
import { openSqliteQueueStore } from './store/sqlite.js';
import type { QueueStore } from './store/types.js';

const PRUNE_EVERY_MS = 60_000;
/** Age (ms) before a peer node drops a run whose first message is missing (its writer may still be at work). */
const RECONCILE_GRACE_MS = 60_000;
/** Ended workflow runs deleted per prune round (the next round takes the rest). */
const RUN_PRUNE_BATCH = 1000;

/** The queue token from the credential store (generated once, in the workflow SDK's format). */
export function queueToken(ctx: AreaContext): string {
  return ctx.credentials.get(CREDENTIALS.token, credentialShapes.queueToken);
}

export interface QueueServerOptions {
  clock?: Clock;
  store?: QueueStore;
  /** Waits between tries of a failing outcome write (ms; tests); default `RECORD_RETRY_MS`. */
  recordRetryMs?: readonly number[];
  /** Name resolution for deliveries (`dns.lookup` shape; tests control the answers); default `dns.lookup`. */
  lookup?: HttpSenderOptions['lookup'];
}

/** Builds the queue server (does not listen yet). */
export async function createQueueServer(actx: AreaContext, opts: QueueServerOptions = {}): Promise<AreaServer & { app: FastifyInstance; dispatcher: Dispatcher; store: QueueStore }> {
  const cfg = actx.config.queue;
  const clock = opts.clock ?? systemClock;
  queueToken(actx);
  signingKeys(actx.credentials);
  // SVC_QUEUE_DATABASE_URL selects the PostgreSQL store (shared by every node), else SQLite in the data dir.
  const store: QueueStore =
    opts.store ??
    (cfg.databaseUrl !== undefined
      ? await openPgQueueStore(cfg.databaseUrl, { schema: cfg.databaseSchema })
      : openSqliteQueueStore(path.join(actx.config.dataDir, 'queue.sqlite'), actx.config.queue.fsync));
  const shared = store.renewLeases !== undefined;
  // several nodes: the token and signing keys live in the database, the same on every node
  const credentialSync = store.sharedCredentials
    ? await startCredentialSync(actx.credentials, store.sharedCredentials(), actx.logger, () => clock.now()).catch(async (err) => {
        if (!opts.store) await store.close().catch(() => undefined);
        throw err;
      })
    : undefined;
  const metrics = new QueueMetrics(actx.metrics);
  if (actx.metrics.enabled) store.observeFsync?.((s) => metrics.fsync.observe(s));
  const sender = new HttpSender({
    egressAddress: cfg.egressAddress,
    blockPrivate: cfg.blockPrivateDestinations,
    maxResponseBytes: cfg.maxMessageBytes,
    connectionsPerOrigin: Math.max(1, Math.ceil(cfg.maxConcurrentDeliveries / 2)),
    lookup: opts.lookup,
  });
  const dispatcher = new Dispatcher({
    store,
    sender,
    logger: actx.logger,
    clock,
    maxConcurrent: cfg.maxConcurrentDeliveries,
    signingKey: () => signingKeys(actx.credentials).current,
    region: cfg.region.toUpperCase(),
    recordRetryMs: opts.recordRetryMs,
    leaseMs: shared ? cfg.leaseMs : undefined,
    metrics: metrics.delivery,
    // workflow runs add their fields to the callbacks of their messages
    callbacks: store.workflows ? workflowCallbackHooks : undefined,
  });
  store.onWake?.((dueAt) => dispatcher.notify(dueAt));
  metrics.addGauges(store.counts ? () => store.counts!(clock.now()) : undefined, () => dispatcher.busy);
  const enqueue = new EnqueueService({ store, dispatcher, clock, dedupWindowMs: cfg.dedupWindowMs, published: metrics.published });
  const ctx: QueueApiContext = {
    store,
    enqueue,
    dispatcher,
    config: cfg,
    credentials: actx.credentials,
    clock,
    resolveDestination: async () => undefined,
  };
  // workflow runs (src/queue/workflows/run-engine.ts)
  const workflowEngine = store.workflows
    ? new WorkflowEngine({
        store,
        workflows: store.workflows(),
        notifyLookbackMs: cfg.workflowNotifyLookbackMs,
        maxSteps: cfg.workflowMaxSteps,
        maxContextBytes: cfg.workflowMaxContextBytes,
        maxRetries: cfg.maxRetries,
        logger: actx.logger,
        maxMessageBytes: cfg.maxMessageBytes,
        enqueue,
      })
    : undefined;
  if (workflowEngine) {
    enqueue.workflows = workflowEngine;
    dispatcher.deadLetterRun = (m, outcome, now) => workflowEngine.deadLetterRun(m, outcome, now);
    ctx.workflows = workflowDlqHooks(ctx, workflowEngine);
    dispatcher.addOutcomeListener((m, outcome) => workflowEngine.onOutcome(m, outcome, clock.now()));
  }

  // one line per kind of failure and a count every 10 s, not one per request (a database outage)
  const requestErrors = repeatedErrorLog(actx.logger);
  const bodyLimit = cfg.maxMessageBytes * 10 + 1024 * 1024;
  const app = createHttpServer({ logger: actx.logger, bodyLimit, errorBody: (message) => ({ error: message }) });
  // No per-request child logger (pino child creation showed in the publish profile); errors are
  // logged with the URL by the error handler below.
  app.setChildLoggerFactory((logger) => logger);
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));
  app.addHook('onRequest', async (req, reply) => {
    // Webhook URLs of workflow runs are called by third parties without the token: the route
    // checks the user id, the running run and the random event id in the path instead.
    if (workflowEngine && req.url.startsWith(WEBHOOK_PREFIX)) return;
    const token = requestToken(req, TOKEN_QUERY_PARAMS);
    if (!token || !matchesAny(token, validQueueTokens(queueToken(actx)))) {
      // refused from the head (onRequest runs before the body is read): a body is not read, and
      // the connection closes (as on the fast front)
      const h = req.headers;
      if (h['transfer-encoding'] !== undefined || (h['content-length'] !== undefined && h['content-length'] !== '0')) reply.header('connection', 'close');
      throw queueError('unauthorized');
    }
  });
  app.setErrorHandler((err: FastifyError | QueueError, req, reply) => {
    const a = errorAnswer(err);
    if (a.log) requestErrors.error({ err, url: req.url }, 'queue: request failed');
    if (a.retryAfterS !== undefined) reply.header('Retry-After', String(a.retryAfterS));
    const message = (err as FastifyError).code === 'FST_ERR_CTP_BODY_TOO_LARGE' ? queueMessage('bodyTooLarge', bodyLimit) : a.message;
    return reply.code(a.status).send({ error: message });
  });
  app.setNotFoundHandler((req, reply) => {
    const e = queueError('routeNotFound', req.method, req.url.split('?')[0]);
    reply.code(e.statusCode).send({ error: e.message });
  });
  const http = actx.metrics.httpMeter('queue');
  meterFastify(app, http);
  registerPublishRoutes(app, ctx);
  registerMessageRoutes(app, ctx);
  registerDlqRoutes(app, ctx);
  registerLogRoutes(app, ctx);
  registerKeyRoutes(app, ctx);
  registerStatsRoutes(app, ctx);
  if (workflowEngine) {
    registerWorkflowRoutes(app, ctx, workflowEngine);
    registerWorkflowEventRoutes(app, ctx, workflowEngine);
    registerWorkflowTriggerRoutes(app, ctx, workflowEngine);
  }
  // URL groups, queues, schedules, flow control (src/queue/resources.ts)
  const resources = attachResources(app, ctx, store, actx.logger, { shared, scheduleFires: metrics.scheduleFires });

  // The listening socket is the fast HTTP/1.1 front (src/http/fast.ts): plain publishes are served
  // there (api/fast-publish.ts); every other connection is handed to Fastify's own (not listening)
  // server, which then serves it with all the routes above.
  const publishHandler = fastPublishHandler(ctx, () => validQueueTokens(queueToken(actx)), requestErrors);
  if (actx.metrics.enabled) {
    const publishRoute = http.route('/v2/publish/*');
    publishHandler.meter = () => publishRoute;
  }
  // deadlines, keep-alive and inactivity limit of Fastify's server too (createFastServer)
  const front = createFastServer(publishHandler, app.server, {
    keepAliveMs: FAST_KEEP_ALIVE_MS,
    bodyLimit,
    ...actx.config.http,
    busyBody: JSON.stringify({ error: queueMessage('tooManyConnections') }),
  });

  let pruneTimer: NodeJS.Timeout | undefined;
  let waitTimer: NodeJS.Timeout | undefined;
  let runPruneTimer: NodeJS.Timeout | undefined;
  let closed: Promise<void> | undefined;
  return {
    app,
    dispatcher,
    store,
    async listen() {
      await app.ready();
      // the port first: a start that cannot bind (e.g. another svc on it) must not touch stored
      // state; the dispatcher then releases leases and claims messages. Publishes accepted in
      // between are stored and picked up by start(). Several listening handles: new connections
      // are accepted while keep-alive clients keep the loop busy (src/http/accept.ts).
      const startedAt = clock.now();
      const { url } = await listenAccepting(front, actx.config.host, actx.config.ports.queue, {
        backlog: cfg.listenBacklog,
        acceptHandles: cfg.acceptHandles,
        serverOptions: FAST_SERVER_OPTIONS,
      });
      // Runs whose first message never got stored (a crash between the two writes) end here,
      // before delivery starts. Runs created from now on are this process's own; on a shared
      // store another node's may be between its two writes, so only runs older than a lease.
      await workflowEngine
        ?.reconcile(startedAt - cfg.logRetentionMs, startedAt - (shared ? cfg.leaseMs : 0))
        .catch((err) => actx.logger.error({ err }, 'queue: workflow run reconciliation failed'));
      await dispatcher.start();
      resources.start();
      pruneTimer = setInterval(() => {
        const now = clock.now();
        store.prune(now, now - cfg.logRetentionMs, now - cfg.dlqRetentionMs).catch((err) => actx.logger.error({ err }, 'queue: prune failed'));
        store.releaseLeases(now).catch(() => undefined);
      }, PRUNE_EVERY_MS);
      pruneTimer.unref();
      if (workflowEngine) {
        // context.waitForEvent timeouts: a 1 s sweep over the deadline index.
        waitTimer = setInterval(() => {
          sweepWaiters(workflowEngine, clock.now()).catch((err) => actx.logger.error({ err }, 'queue: workflow wait sweep failed'));
        }, 1000);
        waitTimer.unref();
        // Run-level retention: ended runs (steps, waiters) and expired kept notifies.
        const retention = cfg.workflowRetentionMs;
        runPruneTimer = setInterval(() => {
          const now = clock.now();
          workflowEngine.runs
            .pruneRuns(now - retention, now - cfg.workflowNotifyLookbackMs, RUN_PRUNE_BATCH)
            .catch((err) => actx.logger.error({ err }, 'queue: workflow run prune failed'));
          // a node of a shared store that crashed and stays down: its peers reconcile its runs
          if (shared) {
            workflowEngine
              .reconcile(now - cfg.logRetentionMs, now - Math.max(cfg.leaseMs, RECONCILE_GRACE_MS))
              .catch((err) => actx.logger.error({ err }, 'queue: workflow run reconciliation failed'));
          }
        }, Math.min(PRUNE_EVERY_MS, Math.max(1000, Math.floor(retention / 4))));
        runPruneTimer.unref();
      }
      return url;
    },
    close() {
      return (closed ??= (async () => {
        if (pruneTimer) clearInterval(pruneTimer);
        if (waitTimer) clearInterval(waitTimer);
        if (runPruneTimer) clearInterval(runPruneTimer);
        resources.stop();
        credentialSync?.stop();
        const wasListening = front.listening;
        const frontClosed = new Promise<void>((resolve) => front.close(() => resolve()));
        front.closeAll();
        if (wasListening) await frontClosed;
        await app.close().catch(() => undefined);
        await dispatcher.stop();
        // workflow updates chained on delivery outcomes write to the store: let them finish first
        await workflowEngine?.idle();
        await sender.close();
        await store.close();
      })());
    },
    async backup(target) {
      if (!store.backup) {
        target.skip('queue', 'queue', 'the queue store is PostgreSQL (SVC_QUEUE_DATABASE_URL): svc does not copy it; back it up with pg_dump (e.g. `pg_dump -n <SVC_QUEUE_DATABASE_SCHEMA>`) or base backups with WAL archiving (pg_basebackup)');
        return;
      }
      const { schemaVersion } = await store.backup(target.path('queue.sqlite'));
      target.add({
        path: 'queue.sqlite',
        area: 'queue',
        store: 'queue',
        holds: 'the queue: messages in every state, delivery logs, DLQ, URL groups, queues, schedules, flow-control state, workflow runs, steps and waiters (SQLite, online backup API)',
        schemaVersion,
      });
    },
    // the store answers a read, and the dispatcher runs (started by listen, stopped by close)
    ready: async () => front.listening && (store.ping ? await store.ping() : await store.nextDueAt().then(() => true, () => false)),
  };
}

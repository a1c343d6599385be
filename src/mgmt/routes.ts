/**
 * Routes of the management API (area D). Paths carry the `/v2` prefix (spec "Versioning").
 *
 *   GET  /v2/mq/ipv4                                 sender IPv4 blocks (spec "Get sender IPv4 blocks")
 *   POST /v2/credentials/queue/token/rotate          {token, warnings}
 *   POST /v2/credentials/queue/signing-keys/rotate   {current, next, warnings}
 *   POST /v2/credentials/kv/reset-password           {token, readonlyToken, warnings}
 *   POST /v2/credentials/vector/:index/rotate        {index, token, readonlyToken, warnings}; 404
 *   GET    /v2/vector/index                         [index]: every vector index (`src/area.ts` VectorIndexView)
 *   POST   /v2/vector/index                         {name, similarity_function, dimension_count, …} -> index (`vector-indexes.ts`)
 *   GET    /v2/vector/index/:id                     index with vector_count and index_size; 404
 *   POST   /v2/vector/index/:id/rename              {name} -> index; 400, 404, 409
 *   POST   /v2/vector/index/:id/reset-password      index with new tokens; 404
 *   DELETE /v2/vector/index/:id                     {id, name, deleted: true}; 404, 409
 *   POST /v2/backup   {"dir"?}                      {dir, manifest}: an online backup (`src/backup.ts`); 409 while one runs
 *   GET  /v2/backup                                  {running, last}: the last backup's outcome
 *   GET  /v2/health   (no auth)                      {status, areas}; 200 all ok, 503 otherwise
 *   GET  /healthz     (no auth)                      {status: 'ok'}: the management port is up
 *   GET  /metrics     (Bearer SVC_METRICS_TOKEN if set) Prometheus text format (`src/metrics.ts`);
 *                                                    absent (404) with SVC_METRICS=false; 429 past
 *                                                    10 wrong tokens per address per 60 s
 *
 * Authentication (Basic) is the `onRequest` hook of `auth.ts`; the two health routes are public
 * ({@link PUBLIC_ROUTES}). Responses carrying secrets are sent with `Cache-Control: no-store`.
 */
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { AreaContext } from '../area.js';
import path from 'node:path';
import { BackupInProgressError, BackupTargetError, scheduledName } from '../backup.js';
import { constantTimeEqual } from '../http/auth.js';
import type { Brake } from './auth.js';
import { sendError } from './errors.js';
import { healthReport } from './health.js';
import { senderIpv4Blocks } from './ipv4.js';
import { registerVectorIndexRoutes } from './vector-indexes.js';
import { resetKvPassword, rotateQueueSigningKeys, rotateQueueToken, rotateVectorTokens } from './rotate.js';

/** Route URLs (as registered) that need no credentials. */
export const PUBLIC_ROUTES: ReadonlySet<string> = new Set(['/v2/health', '/healthz', '/metrics']);

function secret(reply: FastifyReply, body: object): FastifyReply {
  return reply.header('Cache-Control', 'no-store').send(body);
}

/**
 * Answers a rotation once the credential store's listeners are done (the queue and the vector
 * area write their credentials to the database their nodes share); 503 `notShared` when that
 * write failed.
 */
async function rotated(ctx: AreaContext, reply: FastifyReply, body: object): Promise<FastifyReply> {
  try {
    await ctx.credentials.settled();
  } catch (err) {
    ctx.logger.warn({ err }, 'management API: a rotated credential could not be written to the shared database yet');
    return sendError(reply, 'notShared');
  }
  return secret(reply, body);
}

/**
 * Registers every management route on `app` (auth is added separately, see `auth.ts`).
 * `metricsBrake` counts wrong `GET /metrics` bearer tokens per address (429 with `Retry-After`
 * past its limit; a request without a token is not a guess and is not counted).
 */
export function registerRoutes(app: FastifyInstance, ctx: AreaContext, metricsBrake: Brake): void {
  const store = ctx.credentials;

  app.get('/v2/mq/ipv4', async (_req, reply) => reply.send(senderIpv4Blocks(ctx.config)));

  app.post('/v2/credentials/queue/token/rotate', async (_req, reply) => {
    const r = rotateQueueToken(store);
    ctx.logger.info({ credential: 'queue.token' }, 'management API: queue token rotated');
    return rotated(ctx, reply, r);
  });

  app.post('/v2/credentials/queue/signing-keys/rotate', async (_req, reply) => {
    const r = rotateQueueSigningKeys(store);
    ctx.logger.info({ credential: 'queue signing keys' }, 'management API: signing keys rotated');
    return rotated(ctx, reply, r);
  });

  app.post('/v2/credentials/kv/reset-password', async (_req, reply) => {
    const r = resetKvPassword(store);
    ctx.logger.info({ credential: 'kv' }, 'management API: kv password reset (both tokens and every ACL REST token revoked, ACL users not managed by svc deleted)');
    return rotated(ctx, reply, r);
  });

  app.post<{ Params: { index: string } }>('/v2/credentials/vector/:index/rotate', async (req, reply) => {
    const r = rotateVectorTokens(store, req.params.index);
    if (!r) return sendError(reply, 'unknownVectorIndex', req.params.index);
    ctx.logger.info({ credential: `vector.${r.index}` }, 'management API: vector index tokens rotated');
    return rotated(ctx, reply, r);
  });

  registerVectorIndexRoutes(app, ctx);

  app.post('/v2/backup', async (req, reply) => {
    const backups = ctx.backups;
    if (!backups) return sendError(reply, 'backupNotReady');
    let dir: unknown;
    const raw = Buffer.isBuffer(req.body) ? req.body.toString('utf8').trim() : '';
    if (raw) {
      try {
        const body = JSON.parse(raw) as unknown;
        if (!body || typeof body !== 'object' || Array.isArray(body)) return sendError(reply, 'backupBadBody');
        dir = (body as { dir?: unknown }).dir;
      } catch {
        return sendError(reply, 'backupBadBody');
      }
      if (dir !== undefined && (typeof dir !== 'string' || !dir)) return sendError(reply, 'backupBadBody');
    }
    if (dir === undefined) {
      if (!ctx.config.backup.dir) return sendError(reply, 'backupNoTarget');
      dir = path.join(ctx.config.backup.dir, scheduledName(new Date()));
    }
    try {
      const manifest = await backups.run(dir as string, 'request');
      ctx.logger.info({ dir, files: manifest.files.length }, 'management API: backup written');
      return reply.header('Cache-Control', 'no-store').send({ dir, manifest });
    } catch (err) {
      if (err instanceof BackupInProgressError) return sendError(reply, 'backupInProgress');
      if (err instanceof BackupTargetError) return sendError(reply, 'backupBadTarget', err.message);
      ctx.logger.error({ err, dir }, 'management API: backup failed');
      return sendError(reply, 'backupFailed', (err as Error).message);
    }
  });

  app.get('/v2/backup', async (_req, reply) =>
    reply.header('Cache-Control', 'no-store').send({ running: ctx.backups?.busy ?? false, last: ctx.backups?.last ?? null }),
  );

  app.get('/v2/health', async (_req, reply) => {
    const report = await healthReport(ctx.health);
    if (report.status !== 'ok') reply.header('Retry-After', '5'); // a temporary condition: ask to come back
    return reply.code(report.status === 'ok' ? 200 : 503).header('Cache-Control', 'no-store').send(report);
  });

  app.get('/healthz', async (_req, reply) => reply.header('Cache-Control', 'no-store').send({ status: 'ok' }));

  const { metrics } = ctx;
  const token = ctx.config.metrics.token;
  if (metrics.enabled) {
    app.get('/metrics', async (req, reply) => {
      if (token !== undefined) {
        const wait = await metricsBrake.blockedFor(req);
        if (wait !== undefined) return sendError(reply.header('Retry-After', String(wait)), 'metricsTooManyFailures');
        const presented = req.headers.authorization;
        const m = /^Bearer\s+(\S+)\s*$/i.exec(presented ?? '');
        if (!m || !constantTimeEqual(m[1], token)) {
          if (presented !== undefined && presented.trim() !== '') await metricsBrake.fail(req);
          return sendError(reply, 'metricsUnauthorized');
        }
      }
      const text = await metrics.text();
      return reply.header('Cache-Control', 'no-store').type(metrics.contentType).send(text);
    });
  }
}

/**
 * Area A, the queue: `@upstash/qstash`-compatible publish, durable delivery, retries, DLQ, logs
 * and request signing. See `server.ts` for the wiring.
 */
import path from 'node:path';
import type { AreaModule } from '../area.js';
import { sqliteUserVersion } from '../backup.js';
import { signingKeys } from '../credentials.js';
import { queueToken, createQueueServer } from './server.js';
import { latestVersion } from './store/migrate.js';
import { sdkQueueToken } from './token.js';

export const queueArea: AreaModule = {
  name: 'queue',
  create: (ctx) => createQueueServer(ctx),
  env(ctx, url) {
    const token = queueToken(ctx);
    const { current, next } = signingKeys(ctx.credentials);
    return {
      QSTASH_URL: url,
      QSTASH_TOKEN: sdkQueueToken(token),
      QSTASH_CURRENT_SIGNING_KEY: current,
      QSTASH_NEXT_SIGNING_KEY: next,
      SVC_QUEUE_URL: url,
      SVC_QUEUE_TOKEN: token,
      SVC_QUEUE_CURRENT_SIGNING_KEY: current,
      SVC_QUEUE_NEXT_SIGNING_KEY: next,
    };
  },
  // the SQLite store's schema is its migration number (`store/migrations/`, `PRAGMA user_version`);
  // the PostgreSQL store checks its own (`svc_queue_schema`) at connect
  schemas: () => ({ queue: latestVersion() }),
  storedSchemas(config) {
    if (config.queue.databaseUrl !== undefined) return [];
    const file = path.join(config.dataDir, 'queue.sqlite');
    const version = sqliteUserVersion(file);
    return version === undefined ? [] : [{ store: 'queue', file, version, supported: latestVersion() }];
  },
  banner(ctx) {
    return [`token ${queueToken(ctx)}`, `region ${ctx.config.queue.region}`];
  },
};

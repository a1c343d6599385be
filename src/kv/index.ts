/**
 * Area B: the key-value REST gateway (issue 2 §2). `kvArea` plugs into `main.ts`; `createKvServer`
 * builds the server: the database backend (supervised redis-server or `SVC_KV_REDIS_URL`), the
 * gateway core and the HTTP routes on the area's own Fastify instance.
 */
import type { AreaContext, AreaModule, AreaServer } from '../area.js';
import { createHttpServer, listenOn } from '../http/server.js';
import { KvGateway } from './gateway.js';
import { ExternalBackend, type Backend } from './redis/backend.js';
import { SupervisedBackend } from './redis/supervisor.js';
import { registerKvRoutes } from './routes.js';
import { KvTokens } from './tokens.js';

/** A running kv server plus handles for tests (the gateway and its backend). */
export interface KvServer extends AreaServer {
  gateway: KvGateway;
  backend: Backend;
}

/**
 * Creates the kv area: starts (or connects to) the database and loads its command table.
 * @throws Error when redis-server cannot be started or the external database cannot be reached.
 */
export async function createKvServer(ctx: AreaContext): Promise<KvServer> {
  const { config, credentials, logger } = ctx;
  const backend: Backend = config.kv.redisUrl
    ? new ExternalBackend(config.kv.redisUrl, credentials, logger, config.kv.redisTlsCaFile)
    : new SupervisedBackend(config.dataDir, config.kv.redisServerBin, credentials, logger);
  const tokens = new KvTokens(credentials);
  const gateway = new KvGateway(backend, tokens, config.kv, logger);
  await gateway.start();
  const app = createHttpServer({ logger, bodyLimit: config.kv.maxRequestBytes });
  const streams = new Set<() => void>();
  registerKvRoutes(app, gateway, streams);
  let closing: Promise<void> | undefined;
  return {
    gateway,
    backend,
    listen: () => listenOn(app, config.host, config.ports.kv),
    ready: () => gateway.ping(),
    close: () =>
      (closing ??= (async () => {
        for (const stop of [...streams]) stop();
        await app.close();
        await gateway.close();
      })()),
  };
}

export const kvArea: AreaModule = {
  name: 'kv',
  create: (ctx) => createKvServer(ctx),
  env: (ctx, url) => {
    const token = ctx.credentials.get('kv.token');
    return {
      UPSTASH_REDIS_REST_URL: url,
      UPSTASH_REDIS_REST_TOKEN: token,
      SVC_KV_URL: url,
      SVC_KV_TOKEN: token,
      SVC_KV_READONLY_TOKEN: ctx.credentials.get('kv.readonlyToken'),
    };
  },
  banner: (ctx) => [
    `read-only token: ${ctx.credentials.get('kv.readonlyToken')}`,
    `database: ${ctx.config.kv.redisUrl ? `external ${ctx.config.kv.redisUrl.replace(/\/\/[^@/]*@/, '//***@')}` : `supervised ${ctx.config.kv.redisServerBin} (data in ${ctx.config.dataDir}/kv)`}`,
  ],
};

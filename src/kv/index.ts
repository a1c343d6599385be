/**
 * Area B: the key-value REST gateway (issue 2 §2). `kvArea` plugs into `main.ts`; `createKvServer`
 * builds the server: the database backend (supervised redis-server or `SVC_KV_REDIS_URL`), the
 * gateway core and its HTTP front: a minimal HTTP/1.1 server for the hot path (`src/http/fast.ts`) in
 * front of a raw `node:http` server for everything else (not Fastify: see `docs/readme/kv-perf.md`).
 * Keep-alive idle timeout 72 s, no request timeout, and open connections are closed at shutdown —
 * the same settings as `src/http/server.ts`.
 */
import http from 'node:http';
import type { AreaContext, AreaModule, AreaServer } from '../area.js';
import { listenRaw } from '../http/raw.js';
import { KvGateway } from './gateway.js';
import { ExternalBackend, type Backend } from './redis/backend.js';
import { SupervisedBackend } from './redis/supervisor.js';
import { FAST_KEEP_ALIVE_MS, createFastServer, type FastHandler } from '../http/fast.js';
import { createKvCore, createKvHandler, isStreamPath } from './routes.js';
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
  const streams = new Set<() => void>();
  const core = createKvCore(gateway, logger);
  // the Node server serves what the fast path hands over (it does not listen itself)
  const nodeServer = http.createServer({ requestTimeout: 0 }, createKvHandler(gateway, { bodyLimit: config.kv.maxRequestBytes, logger, streams }, core));
  nodeServer.keepAliveTimeout = FAST_KEEP_ALIVE_MS;
  // inactivity limit for handed-over connections (SSE streams write a heartbeat every 15 s);
  // Node's headersTimeout check needs a listening server, so this is the slow-client guard too
  nodeServer.timeout = FAST_KEEP_ALIVE_MS;
  const fast: FastHandler = {
    accepts: (_method, path) => !isStreamPath(path),
    handle: (head, body, out) => core.handle(head.headers, head.url, body, out),
  };
  const server = createFastServer(fast, nodeServer, FAST_KEEP_ALIVE_MS, config.kv.maxRequestBytes);
  nodeServer.on('clientError', (err: NodeJS.ErrnoException, socket) => {
    if (socket.writable && !socket.destroyed) {
      const body = '{"error":"ERR bad HTTP request"}';
      socket.end(`HTTP/1.1 400 Bad Request\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n${body}`);
    }
    socket.destroy();
  });
  let closing: Promise<void> | undefined;
  return {
    gateway,
    backend,
    listen: () => listenRaw(server, config.host, config.ports.kv),
    ready: () => gateway.ping(),
    close: () =>
      (closing ??= (async () => {
        for (const stop of [...streams]) stop();
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeAll();
        if (server.listening) await closed;
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

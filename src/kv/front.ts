/**
 * The HTTP front of one kv process: the minimal HTTP/1.1 server for the hot path
 * (`src/http/fast.ts`) in front of a raw `node:http` server for everything else (SSE streams,
 * chunked bodies, preflight; not Fastify: see `docs/readme/kv-perf.md`). Keep-alive idle timeout
 * 72 s, head and request deadlines and the connection cap of `config.http` (`createFastServer`),
 * credentials checked before a body is read, and open connections are closed at shutdown. Used by
 * the primary (workers off, or while no worker is up) and by every kv worker process, which is
 * given accepted connections (`accept`).
 */
import http from 'node:http';
import type net from 'node:net';
import type { Config } from '../config.js';
import type { Logger } from '../logger.js';
import { FAST_KEEP_ALIVE_MS, clientErrorStatus, createFastServer, type FastHandler } from '../http/fast.js';
import { errorJson } from './encode.js';
import { KV_ERRORS, kvMessage } from './errors.js';
import type { KvGateway } from './gateway.js';
import type { KvMetrics } from './metrics.js';
import { createKvCore, createKvHandler, isStreamPath } from './routes.js';
import { setHeartbeatMs, setOutputLimit } from './sse.js';
import type { Identity } from './tokens.js';

const BAD_REQUEST_BODY = errorJson(KV_ERRORS.badHttpRequest.message);

/** A kv HTTP front: `server` may listen itself, or be handed connections with {@link KvFront.accept}. */
export interface KvFront {
  server: net.Server & { closeAll(): void };
  /** Serves a connection accepted elsewhere (e.g. passed from the primary process). */
  accept(socket: net.Socket): void;
  /** Ends the SSE streams and every open connection; resolves when a listening server closed. */
  close(): Promise<void>;
}

/**
 * Builds the front for `gateway` (body limit `config.kv.maxRequestBytes` bytes); requests,
 * commands and open streams are counted in `metrics`.
 */
export function createKvFront(gateway: KvGateway, config: Config, logger: Logger, metrics: KvMetrics): KvFront {
  const streams = new Set<() => void>();
  metrics.addStreams(streams);
  setHeartbeatMs(config.kv.sseHeartbeatMs);
  setOutputLimit({ hardBytes: config.kv.sseHardLimitBytes, softBytes: config.kv.sseSoftLimitBytes, softMs: config.kv.sseSoftLimitMs });
  const core = createKvCore(gateway, logger, metrics);
  // the Node server serves what the fast path hands over (it does not listen itself)
  // timeouts, keep-alive and inactivity limit (SSE streams write a heartbeat every 15 s) are set by
  // createFastServer
  const nodeServer = http.createServer(createKvHandler(gateway, { bodyLimit: config.kv.maxRequestBytes, logger, streams, metrics }, core));
  const fast: FastHandler = {
    accepts: (_method, path) => !isStreamPath(path),
    handle: (head, body, out) => core.handle(head.headers, head.url, body, out, undefined, head.auth as Identity | undefined),
    precheck: (head) => {
      const id = core.authorize(head.headers, head.url);
      if (id === undefined) return core.unauthorized();
      head.auth = id;
      return undefined;
    },
    meter: metrics.metrics.enabled ? (head) => metrics.route(head.url) : undefined,
    // the kv routes only read the headers (routes.ts): identical heads share one parse
    sharedHeaders: true,
  };
  const server = createFastServer(fast, nodeServer, {
    keepAliveMs: FAST_KEEP_ALIVE_MS,
    bodyLimit: config.kv.maxRequestBytes,
    ...config.http,
    busyBody: errorJson(kvMessage('tooManyConnections')),
  });
  nodeServer.on('clientError', (err: NodeJS.ErrnoException, socket) => {
    if (socket.writable && !socket.destroyed) {
      const [status, text] = clientErrorStatus(err);
      const body = status === 400 ? BAD_REQUEST_BODY : '';
      socket.end(`HTTP/1.1 ${status} ${text}\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n${body}`);
    }
    socket.destroy();
  });
  return {
    server,
    accept(socket) {
      // a socket passed between processes is rebuilt without the server's options
      socket.allowHalfOpen = true;
      server.emit('connection', socket);
      if (socket.isPaused()) socket.resume();
    },
    async close() {
      for (const stop of [...streams]) stop();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAll();
      if (server.listening) await closed;
    },
  };
}

/**
 * The topology router's worker thread (`SVC_KV_ROUTER_THREAD`, the default on a cluster): a thread
 * that dies is started again, and a start that fails is tried again (with a growing delay) until
 * it listens. On a real 3+3 Redis Cluster, through the router's socket as the gateway uses it.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import type { Worker } from 'node:worker_threads';
import { loadConfig } from '../../src/config.js';
import { CredentialStore } from '../../src/credentials.js';
import { createLogger } from '../../src/logger.js';
import { RedisConnection } from '../../src/kv/redis/connection.js';
import { DistributedBackend } from '../../src/kv/redis/distributed.js';
import { tempDir } from '../helpers/env.js';
import { until } from './helpers.js';
import { startRedisCluster, type RedisClusterUnderTest } from './topology-helpers.js';

let cluster: RedisClusterUnderTest;
let backend: DistributedBackend;
const dir = tempDir('svc-router-thread-');

before(async () => {
  cluster = await startRedisCluster();
  const config = loadConfig({ SVC_DATA_DIR: dir.dir, SVC_KV_REDIS_CLUSTER: cluster.seeds });
  assert.equal(config.kv.routerThread, true);
  backend = new DistributedBackend(config.kv, dir.dir, CredentialStore.open(dir.dir, {}), createLogger('silent'));
  await backend.start();
});
after(async () => {
  await backend?.stop();
  await cluster?.close();
  dir.cleanup();
});

/** The router thread running now (the backend's own handle). */
const thread = () => (backend as unknown as { thread: Worker | undefined }).thread;

/** GET of `key` through a new connection to the router; the error when there is no router. */
async function getThroughRouter(key: string): Promise<unknown> {
  const c = await RedisConnection.connect(backend.endpoint, backend.admin, 2000);
  try {
    return String(await c.send(['GET', key]));
  } finally {
    c.close();
  }
}

test('a router thread that dies is started again; one whose start fails is tried again until it listens', { timeout: 120_000 }, async () => {
  const c = await RedisConnection.connect(backend.endpoint, backend.admin, 2000);
  for (let i = 0; i < 50; i++) await c.send(['SET', `k${i}`, `v${i}`]);
  c.close();
  assert.equal(await getThroughRouter('k7'), 'v7');

  // 1. the thread dies: a new one serves the same data
  const first = thread();
  assert.ok(first, 'a router thread runs');
  await first.terminate();
  const v = await until(() => getThroughRouter('k13').catch(() => undefined), 30_000);
  assert.equal(v, 'v13');
  assert.ok(thread() && thread() !== first, 'a new thread');

  // 2. the next start fails (its socket path is taken by a directory, which the router cannot
  // remove): svc tries again, and serves once the path is free
  const socket = backend.endpoint.path!;
  const second = thread()!;
  await second.terminate();
  fs.rmSync(socket, { force: true });
  fs.mkdirSync(socket);
  fs.writeFileSync(path.join(socket, 'blocker'), '');
  await new Promise((r) => setTimeout(r, 4000)); // the first restart (after 1 s) has failed by now
  await assert.rejects(getThroughRouter('k1'), 'no router while the path is taken');
  fs.rmSync(socket, { recursive: true, force: true });
  const w = await until(() => getThroughRouter('k21').catch(() => undefined), 60_000);
  assert.equal(w, 'v21');
});

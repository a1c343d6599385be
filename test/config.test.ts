import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { ConfigError, isIpv4Cidr, loadConfig } from '../src/config.js';
import { CredentialStore } from '../src/credentials.js';
import { tempDir } from './helpers/env.js';

test('defaults follow the documented configuration table', () => {
  const c = loadConfig({});
  assert.deepEqual(c.ports, { queue: 8080, kv: 8079, vector: 8078, mgmt: 8077 });
  assert.equal(c.host, '127.0.0.1');
  assert.deepEqual(c.areas, ['queue', 'kv', 'vector', 'mgmt']);
  assert.equal(c.kv.maxRequestBytes, 10 * 1024 * 1024);
  assert.equal(c.queue.region, 'eu-central-1');
});

test('every bad variable is reported, one line each', () => {
  assert.throws(
    () => loadConfig({ SVC_KV_PORT: 'abc', SVC_AREAS: 'kv,nope', SVC_QUEUE_REGION: 'mars-1', SVC_MGMT_IPV4_CIDRS: '10.0.0.1/8' }),
    (err: unknown) => {
      assert.ok(err instanceof ConfigError);
      assert.equal(err.problems.length, 4);
      assert.match(err.problems.join('\n'), /SVC_KV_PORT="abc"/);
      assert.match(err.problems.join('\n'), /SVC_AREAS/);
      assert.match(err.problems.join('\n'), /SVC_QUEUE_REGION="mars-1"/);
      assert.match(err.problems.join('\n'), /10\.0\.0\.1\/8/);
      return true;
    },
  );
});

test('SVC_QUEUE_FSYNC: always (default) or everysec; anything else stops start-up', () => {
  assert.equal(loadConfig({}).queue.fsync, 'always');
  assert.equal(loadConfig({ SVC_QUEUE_FSYNC: 'everysec' }).queue.fsync, 'everysec');
  assert.throws(() => loadConfig({ SVC_QUEUE_FSYNC: 'never' }), /SVC_QUEUE_FSYNC="never": expected one of always, everysec/);
});

test('kv topologies: cluster seeds or sentinels + master name, at most one database setting', () => {
  const c = loadConfig({ SVC_KV_REDIS_CLUSTER: '10.0.0.1:7000, node-2.example:7001,[::1]:7002' });
  assert.deepEqual(c.kv.redisCluster, ['10.0.0.1:7000', 'node-2.example:7001', '[::1]:7002']);
  assert.equal(c.kv.waitReplicas, 0);
  const s = loadConfig({ SVC_KV_REDIS_SENTINELS: 'a:26379,b:26379', SVC_KV_REDIS_SENTINEL_MASTER: 'mymaster', SVC_KV_WAIT_REPLICAS: '1' });
  assert.deepEqual([s.kv.redisSentinels, s.kv.redisSentinelMaster, s.kv.waitReplicas, s.kv.waitTimeoutMs], [['a:26379', 'b:26379'], 'mymaster', 1, 1000]);
  assert.throws(() => loadConfig({ SVC_KV_REDIS_CLUSTER: 'host-without-port' }), /SVC_KV_REDIS_CLUSTER="host-without-port": expected host:port/);
  assert.throws(() => loadConfig({ SVC_KV_REDIS_SENTINELS: 'a:26379' }), /SVC_KV_REDIS_SENTINEL_MASTER: required/);
  assert.throws(() => loadConfig({ SVC_KV_REDIS_CLUSTER: 'a:1', SVC_KV_REDIS_URL: 'redis://b:2' }), /set at most one of them/);
});

test('SVC_AREAS selects a subset in start order', () => {
  assert.deepEqual(loadConfig({ SVC_AREAS: 'mgmt, kv' }).areas, ['kv', 'mgmt']);
});

test('CIDR validation', () => {
  assert.ok(isIpv4Cidr('10.0.0.0/8'));
  assert.ok(isIpv4Cidr('203.0.113.7/32'));
  assert.ok(!isIpv4Cidr('10.0.0.1/8'));
  assert.ok(!isIpv4Cidr('300.0.0.0/8'));
  assert.ok(!isIpv4Cidr('10.0.0.0/33'));
  assert.ok(!isIpv4Cidr('::1/128'));
});

test('credentials are generated once into a 0600 file and reused; env wins', () => {
  const { dir, cleanup } = tempDir();
  try {
    const a = CredentialStore.open(dir, {});
    const token = a.get('kv.token');
    assert.ok(token.length >= 32);
    const file = path.join(dir, 'credentials.json');
    assert.equal(fs.statSync(file).mode & 0o777, 0o600);
    const b = CredentialStore.open(dir, {});
    assert.equal(b.get('kv.token'), token);
    const c = CredentialStore.open(dir, { SVC_KV_TOKEN: 'from-env' });
    assert.equal(c.get('kv.token'), 'from-env');
    assert.ok(c.isFromEnv('kv.token'));
    let seen = '';
    c.onChange((name, value) => (seen = `${name}=${value}`));
    c.set('kv.token', 'rotated');
    assert.equal(seen, 'kv.token=rotated');
    assert.equal(CredentialStore.open(dir, {}).get('kv.token'), 'rotated');
  } finally {
    cleanup();
  }
});

test('SVC_HTTP_*: bounds of the HTTP fronts, defaults no looser than node:http, the head deadline within the request deadline', () => {
  const c = loadConfig({});
  assert.deepEqual(c.http, { headersTimeoutMs: 60_000, requestTimeoutMs: 300_000, maxConnections: 10_000 });
  assert.deepEqual(loadConfig({ SVC_HTTP_HEADERS_TIMEOUT_MS: '1000', SVC_HTTP_REQUEST_TIMEOUT_MS: '2000', SVC_HTTP_MAX_CONNECTIONS: '5' }).http, {
    headersTimeoutMs: 1000,
    requestTimeoutMs: 2000,
    maxConnections: 5,
  });
  assert.throws(() => loadConfig({ SVC_HTTP_HEADERS_TIMEOUT_MS: '5000', SVC_HTTP_REQUEST_TIMEOUT_MS: '2000' }), /SVC_HTTP_HEADERS_TIMEOUT_MS=5000: must not exceed/);
  assert.throws(() => loadConfig({ SVC_HTTP_MAX_CONNECTIONS: '0' }), /SVC_HTTP_MAX_CONNECTIONS="0"/);
});

/**
 * Commands newer than Redis 7.0 through `@upstash/redis`: hash-field expiry (Redis ≥ 7.4),
 * HGETDEL/HGETEX/HSETEX (≥ 8.0), XACKDEL/XDELEX and the new BITOP operators (≥ 8.2). They run when
 * the backend has them (a newer server: `SVC_KV_REDIS_SERVER_BIN` / `SVC_KV_REDIS_URL`, given to
 * this test as `SVC_TEST_KV_REDIS_SERVER_BIN` / `SVC_TEST_KV_REDIS_URL`) and are skipped with the
 * reason printed when it does not (Debian 12's redis-server is 7.0). The classification svc derives
 * from a newer server's `COMMAND` rows (write vs read-only) is checked on such rows directly.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Redis } from '@upstash/redis';
import { CommandPolicy, parseCommandTable } from '../../src/kv/policy.js';
import { startKv, type KvUnderTest } from './helpers.js';

let kv: KvUnderTest;
let redis: Redis;
let readonly: Redis;
let version = '';
const has = new Map<string, boolean>();

const env: Record<string, string> = {};
if (process.env.SVC_TEST_KV_REDIS_SERVER_BIN) env.SVC_KV_REDIS_SERVER_BIN = process.env.SVC_TEST_KV_REDIS_SERVER_BIN;
if (process.env.SVC_TEST_KV_REDIS_URL) env.SVC_KV_REDIS_URL = process.env.SVC_TEST_KV_REDIS_URL;

const post = (body: unknown) => kv.post('/', body);

before(async () => {
  kv = await startKv(env);
  redis = kv.redis;
  readonly = new Redis({ url: kv.base, token: kv.svc.ctx.credentials.get('kv.readonlyToken'), enableTelemetry: false });
  const names = ['HEXPIRE', 'HGETDEL', 'HGETEX', 'HSETEX', 'XACKDEL', 'XDELEX'];
  const info = (await post(['COMMAND', 'INFO', ...names])).json.result as unknown[];
  names.forEach((n, i) => has.set(n, info[i] !== null));
  const server = String((await post(['INFO', 'server'])).json.result);
  version = /(?:valkey|redis)_version:(\S+)/.exec(server)?.[1] ?? 'unknown';
  // the new BITOP operators have no COMMAND entry of their own: probe one
  await post(['SET', 'probe:a', 'a']);
  has.set('BITOP DIFF', (await post(['BITOP', 'DIFF', 'probe:d', 'probe:a', 'probe:a'])).status === 200);
});
after(() => kv?.close());

/** The skip reason when the backend lacks `cmd` (printed by the test runner), else false. */
function lacks(cmd: string): string | false {
  return has.get(cmd) ? false : `the backend (version ${version}) has no ${cmd}; run with SVC_TEST_KV_REDIS_SERVER_BIN or SVC_TEST_KV_REDIS_URL pointing at Redis >= 8.2 or a Valkey that has it`;
}

/** Registers a test that is skipped, with its reason printed, when the backend lacks `cmd`. */
function whenBackendHas(cmd: string, name: string, fn: () => Promise<void>): void {
  test(name, async (t) => {
    const reason = lacks(cmd);
    if (reason) return t.skip(reason);
    await fn();
  });
}

describe('commands newer than Redis 7.0 through @upstash/redis', () => {
  whenBackendHas('HEXPIRE', 'hash-field expiry: hexpire, httl, hpttl, hpersist; read-only token reads TTLs, cannot set them', async () => {
    await redis.hset('hf:h', { a: '1', b: '2' });
    assert.deepEqual(await redis.hexpire('hf:h', ['a', 'nope'], 100), [1, -2]);
    const [ttl] = await redis.httl('hf:h', 'a');
    assert.ok(ttl > 90 && ttl <= 100);
    assert.deepEqual(await redis.httl('hf:h', 'b'), [-1]);
    const [pttl] = await redis.hpttl('hf:h', 'a');
    assert.ok(pttl > 90_000);
    assert.deepEqual(await redis.hpersist('hf:h', 'a'), [1]);
    assert.deepEqual(await readonly.httl('hf:h', 'a'), [-1]);
    await assert.rejects(readonly.hexpire('hf:h', 'a', 10), /NOPERM/);
  });

  whenBackendHas('HGETDEL', 'hgetdel', async () => {
    await redis.hset('hf:gd', { a: 'x', b: 'y' });
    assert.deepEqual(await redis.hgetdel('hf:gd', 'a'), { a: 'x' });
    assert.deepEqual(await redis.hgetall('hf:gd'), { b: 'y' });
  });

  whenBackendHas('HSETEX', 'hsetex and hgetex', async () => {
    assert.equal(await redis.hsetex('hf:se', { expiration: { ex: 100 } }, { a: 'v' }), 1);
    const [ttl] = await redis.httl('hf:se', 'a');
    assert.ok(ttl > 90);
    assert.deepEqual(await redis.hgetex('hf:se', { persist: true }, 'a'), { a: 'v' });
    assert.deepEqual(await redis.httl('hf:se', 'a'), [-1]);
  });

  whenBackendHas('XACKDEL', 'xackdel and xdelex', async () => {
    const id1 = await redis.xadd('xs:s', '*', { f: '1' });
    const id2 = await redis.xadd('xs:s', '*', { f: '2' });
    await redis.xgroup('xs:s', { type: 'CREATE', group: 'g', id: '0' });
    await redis.xreadgroup('g', 'c', 'xs:s', '>');
    assert.deepEqual(await redis.xackdel('xs:s', 'g', 'KEEPREF', id1), [1]);
    assert.deepEqual(await redis.xdelex('xs:s', 'KEEPREF', id2), [1]);
    assert.equal(await redis.xlen('xs:s'), 0);
  });

  whenBackendHas('BITOP DIFF', 'bitop diff, diff1, andor, one', async () => {
    await redis.set('bo:x', '\xff');
    await redis.set('bo:y', '\x0f');
    assert.equal(await redis.bitop('diff', 'bo:d', 'bo:x', 'bo:y'), 1);
    assert.equal(await redis.bitcount('bo:d', 0, -1), 4);
    assert.equal(await redis.bitop('andor', 'bo:a', 'bo:x', 'bo:y'), 1);
    assert.equal(await redis.bitop('one', 'bo:o', 'bo:x', 'bo:y'), 1);
    assert.equal(await redis.bitop('diff1', 'bo:d1', 'bo:x', 'bo:y'), 1);
  });
});

describe('classification of newer commands from the backend\'s own COMMAND table', () => {
  test('write and read-only flags of Redis 8 rows decide the sync token; nothing in svc lists them', () => {
    const row = (name: string, flags: string[], cats: string[]) => [Buffer.from(name), -4, flags.map((f) => Buffer.from(f)), 1, 1, 1, cats.map((c) => Buffer.from(c)), [], [], []];
    const table = parseCommandTable([
      row('hexpire', ['write', 'fast'], ['@write', '@hash', '@fast']),
      row('httl', ['readonly', 'fast'], ['@read', '@hash', '@fast']),
      row('hgetex', ['write', 'fast'], ['@write', '@hash', '@fast']),
      row('xackdel', ['write', 'fast'], ['@write', '@stream', '@fast']),
    ]);
    const policy = new CommandPolicy(table, new Set());
    const verdict = (name: string) => policy.check([name, 'k', 'f']);
    assert.deepEqual(verdict('HEXPIRE'), { kind: 'forward', info: table.get('hexpire'), write: true });
    assert.deepEqual(verdict('httl'), { kind: 'forward', info: table.get('httl'), write: false });
    assert.equal((verdict('hgetex') as { write: boolean }).write, true);
    assert.equal((verdict('xackdel') as { write: boolean }).write, true);
    assert.equal(policy.readonlyAllowed('httl'), true);
    assert.equal(policy.readonlyAllowed('hexpire'), false);
  });
});

/**
 * Commands newer than Redis 7.0 through `@upstash/redis`: hash-field expiry (Redis ≥ 7.4),
 * HGETDEL/HGETEX/HSETEX (≥ 8.0), XACKDEL/XDELEX and the new BITOP operators (≥ 8.2), and the
 * `NOSCRIPT` text of an unknown script. Run in passes, each on svc's supervised mode:
 * - the default backend (Debian 12's redis-server is 7.0: the newer commands skip, with the reason
 *   printed), or the one given as `SVC_TEST_KV_REDIS_SERVER_BIN` / `SVC_TEST_KV_REDIS_URL`;
 * - each current server built by `scripts/build-current-server.sh` into its cache
 *   (`SVC_KV_REDIS_SERVER_BIN=<the cached binary>`): Redis (which `npm test`'s pretest,
 *   `install-deps.sh test`, builds from Debian's newest source package) and Valkey (built by
 *   `install-deps.sh all`, which CI runs). A pass whose server is not in the cache skips with the
 *   command that builds it.
 * A command the pass's backend lacks is skipped with the reason printed. The classification svc
 * derives from a newer server's `COMMAND` rows (write vs read-only) is checked on such rows directly.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Redis } from '@upstash/redis';
import { CommandPolicy, parseCommandTable } from '../../src/kv/policy.js';
import { startKv, type KvUnderTest } from './helpers.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** The newest cached build of `pkg` (`build-current-server.sh <pkg> --cached`: no network), or undefined. */
function cachedServer(pkg: 'redis' | 'valkey'): string | undefined {
  const r = spawnSync('bash', [path.join(root, 'scripts/build-current-server.sh'), pkg, '--cached'], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim().split('\n').pop() : undefined;
}

const defaultEnv: Record<string, string> = {};
if (process.env.SVC_TEST_KV_REDIS_SERVER_BIN) defaultEnv.SVC_KV_REDIS_SERVER_BIN = process.env.SVC_TEST_KV_REDIS_SERVER_BIN;
if (process.env.SVC_TEST_KV_REDIS_URL) defaultEnv.SVC_KV_REDIS_URL = process.env.SVC_TEST_KV_REDIS_URL;

newerCommands('the default backend', defaultEnv);
for (const pkg of ['redis', 'valkey'] as const) {
  const bin = cachedServer(pkg);
  const how = pkg === 'redis' ? 'npm test\'s pretest builds it once; Debian\'s archive was unreachable or the build failed' : 'built by `bash scripts/install-deps.sh all` (CI), not by the pretest';
  newerCommands(`a current ${pkg === 'redis' ? 'Redis' : 'Valkey'} built from Debian's source package`, bin ? { SVC_KV_REDIS_SERVER_BIN: bin } : undefined, `no ${pkg} build cached (${how}): bash scripts/build-current-server.sh ${pkg}`);
}

/**
 * The SDK's calls of the newer commands on svc with `env` (undefined: the pass is skipped with
 * `missing` as its reason). Each test is skipped, its reason printed, when the backend lacks the command.
 */
function newerCommands(backend: string, env: Record<string, string> | undefined, missing = ''): void {
  let kv: KvUnderTest;
  let redis: Redis;
  let readonly: Redis;
  let version = '';
  const has = new Map<string, boolean>();
  const post = (body: unknown) => kv.post('/', body);

  /** Registers a test skipped (reason printed) when there is no server or it lacks `cmd`. */
  const whenBackendHas = (cmd: string, name: string, fn: () => Promise<void>): void => {
    test(name, async (t) => {
      if (env === undefined) return t.skip(missing);
      if (!has.get(cmd)) return t.skip(`the backend (version ${version}) has no ${cmd}; run with SVC_TEST_KV_REDIS_SERVER_BIN or SVC_TEST_KV_REDIS_URL pointing at Redis >= 8.2 or a Valkey that has it`);
      await fn();
    });
  };

  describe(`commands newer than Redis 7.0 through @upstash/redis on ${backend}`, () => {
    before(async () => {
      if (env === undefined) return;
      kv = await startKv(env);
      redis = kv.redis;
      readonly = new Redis({ url: kv.base, token: kv.svc.ctx.credentials.get('kv.readonlyToken'), enableTelemetry: false });
      const names = ['HEXPIRE', 'HGETDEL', 'HGETEX', 'HSETEX', 'XACKDEL', 'XDELEX'];
      const info = (await post(['COMMAND', 'INFO', ...names])).json.result as unknown[];
      names.forEach((n, i) => has.set(n, info[i] !== null));
      const server = String((await post(['INFO', 'server'])).json.result);
      // Valkey also reports the Redis version it is compatible with (`redis_version:7.2.4`)
      version = (/valkey_version:(\S+)/.exec(server) ?? /redis_version:(\S+)/.exec(server))?.[1] ?? 'unknown';
      // the new BITOP operators have no COMMAND entry of their own: probe one
      await post(['SET', 'probe:a', 'a']);
      has.set('BITOP DIFF', (await post(['BITOP', 'DIFF', 'probe:d', 'probe:a', 'probe:a'])).status === 200);
      has.set('EVALSHA', true);
    });
    after(() => kv?.close());

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
      // one byte each in UTF-8 (the SDK sends JSON strings): x = 0111 1111, y = 0000 1111
      await redis.set('bo:x', '\x7f');
      await redis.set('bo:y', '\x0f');
      const op = async (name: 'diff' | 'diff1' | 'andor' | 'one') => {
        assert.equal(await (name === 'one' ? redis.bitop(name, `bo:${name}`, 'bo:x', 'bo:y') : redis.bitop(name, `bo:${name}`, 'bo:x', 'bo:y')), 1);
        return redis.bitcount(`bo:${name}`, 0, -1);
      };
      assert.equal(await op('diff'), 3); // x and not y: 0111 0000
      assert.equal(await op('diff1'), 0); // y and not x
      assert.equal(await op('andor'), 4); // x and (y): 0000 1111
      assert.equal(await op('one'), 3); // in exactly one of them: 0111 0000
    });

    whenBackendHas('EVALSHA', 'EVALSHA of a script the server does not have: Redis\'s NOSCRIPT text on every backend', async () => {
      const sha = 'ffffffffffffffffffffffffffffffffffffffff';
      const text = /NOSCRIPT No matching script\. Please use EVAL\.$/;
      await assert.rejects(redis.evalsha(sha, [], []), text);
      await assert.rejects(redis.pipeline().evalsha(sha, [], []).exec(), text);
      await assert.rejects(readonly.evalshaRo(sha, [], []), text);
      const raw = await post(['EVALSHA', sha, '0']);
      assert.deepEqual([raw.status, raw.json], [400, { error: 'NOSCRIPT No matching script. Please use EVAL.' }]);
    });
  });
}

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

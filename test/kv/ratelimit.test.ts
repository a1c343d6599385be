/**
 * `@upstash/ratelimit` (unmodified, over `@upstash/redis` in its default configuration) against
 * svc's kv area: its scripts start with `#!lua flags=allow-key-locking`, a flag redis-server does
 * not know; svc drops it and keeps the sha the library computed working (EVALSHA first, EVAL on
 * NOSCRIPT). Plus the raw REST forms: EVAL, EVAL_RO, EVALSHA(_RO), SCRIPT LOAD/EXISTS in single
 * commands, pipelines, transactions and resp2 output.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { Ratelimit } from '@upstash/ratelimit';
import { Redis } from '@upstash/redis';
import { startKv, type KvUnderTest } from './helpers.js';

let kv: KvUnderTest;
let redis: Redis;
before(async () => {
  kv = await startKv();
  redis = kv.redis;
});
after(() => kv?.close());

const sha1 = (s: string): string => createHash('sha1').update(s).digest('hex');
const post: KvUnderTest['post'] = (...a) => kv.post(...a);

/** Runs `fn` again (once) when the library's window rolled over while it ran (fixed windows). */
async function inOneWindow(fn: () => Promise<number[]>): Promise<void> {
  const resets = await fn();
  if (new Set(resets).size > 1) await fn();
}

const limiter = (algo: ReturnType<typeof Ratelimit.fixedWindow>, prefix: string, extra: Partial<ConstructorParameters<typeof Ratelimit>[0]> = {}) =>
  new Ratelimit({ redis, limiter: algo, prefix, analytics: false, enableTelemetry: false, ephemeralCache: false, ...extra });

describe('@upstash/ratelimit', () => {
  test('fixedWindow: limit, getRemaining, resetUsedTokens', async () => {
    const rl = limiter(Ratelimit.fixedWindow(5, '1 h'), 'rl-fixed');
    await inOneWindow(async () => {
      await rl.resetUsedTokens('user');
      const results = [];
      for (let i = 0; i < 6; i++) results.push(await rl.limit('user'));
      assert.deepEqual(results.map((r) => r.success), [true, true, true, true, true, false]);
      assert.deepEqual(results.map((r) => r.remaining), [4, 3, 2, 1, 0, 0]);
      assert.equal(results[0].limit, 5);
      const left = await rl.getRemaining('user');
      assert.equal(left.remaining, 0);
      assert.equal(left.limit, 5);
      await rl.resetUsedTokens('user');
      assert.equal((await rl.getRemaining('user')).remaining, 5);
      assert.equal((await rl.limit('user')).success, true);
      return [...results.map((r) => r.reset), left.reset];
    });
  });

  for (const [name, algo] of [
    ['slidingWindow', () => Ratelimit.slidingWindow(3, '1 h')],
    ['tokenBucket (a burst up to maxTokens)', () => Ratelimit.tokenBucket(1, '1 h', 3)],
  ] as const) {
    test(`${name}: limit, getRemaining, resetUsedTokens`, async () => {
      const rl = limiter(algo(), `rl-${name}`);
      const results = [];
      for (let i = 0; i < 4; i++) results.push(await rl.limit('u'));
      assert.deepEqual(results.map((r) => r.success), [true, true, true, false]);
      assert.equal((await rl.getRemaining('u')).remaining, 0);
      await rl.resetUsedTokens('u');
      assert.equal((await rl.getRemaining('u')).remaining, 3);
      assert.equal((await rl.limit('u')).success, true);
    });
  }

  test('cachedFixedWindow (with the ephemeral cache it requires)', async () => {
    const rl = limiter(Ratelimit.cachedFixedWindow(2, '1 h'), 'rl-cached', { ephemeralCache: new Map() });
    await inOneWindow(async () => {
      await rl.resetUsedTokens('u');
      const results = [];
      for (let i = 0; i < 3; i++) {
        const r = await rl.limit('u');
        await r.pending;
        results.push(r);
      }
      assert.deepEqual(results.map((r) => r.success), [true, true, false]);
      // a second limiter without the cache state reads the count from Redis
      const fresh = limiter(Ratelimit.cachedFixedWindow(2, '1 h'), 'rl-cached', { ephemeralCache: new Map() });
      assert.equal((await fresh.getRemaining('u')).remaining, 0);
      return results.map((r) => r.reset);
    });
  });

  test('blockUntilReady waits for the next token', async () => {
    const rl = limiter(Ratelimit.tokenBucket(1, '1 s', 1), 'rl-block');
    assert.equal((await rl.limit('u')).success, true);
    const started = Date.now();
    const r = await rl.blockUntilReady('u', 20_000);
    assert.equal(r.success, true);
    assert.ok(Date.now() - started < 20_000);
  });

  test('the sha the library computed over its own text finds the script after the first EVAL', async () => {
    const rl = limiter(Ratelimit.fixedWindow(100, '1 h'), 'rl-sha');
    await rl.limit('x'); // EVALSHA -> NOSCRIPT -> EVAL (rewritten text cached by Redis)
    const text = `#!lua flags=allow-key-locking\nreturn redis.call('INCR', KEYS[1])`;
    const first = await post('/', ['EVALSHA', sha1(text), '1', 'sha:n']);
    assert.match(first.json.error, /NOSCRIPT/);
    assert.deepEqual((await post('/', ['EVAL', text, '1', 'sha:n'])).json, { result: 1 });
    assert.deepEqual((await post('/', ['EVALSHA', sha1(text), '1', 'sha:n'])).json, { result: 2 });
    assert.deepEqual((await post('/', ['EVALSHA', sha1(text).toUpperCase(), '1', 'sha:n'])).json, { result: 3 });
  });
});

describe('scripts with shebang flags Redis does not know (REST)', () => {
  test('EVAL answers as with the flag removed', async () => {
    assert.deepEqual((await post('/', ['EVAL', '#!lua flags=allow-key-locking\nreturn 1', '0'])).json, { result: 1 });
  });

  test('flags Redis knows are kept: no-writes still refuses a write', async () => {
    const r = await post('/', ['EVAL', "#!lua flags=allow-key-locking,no-writes\nreturn redis.call('SET', KEYS[1], 'v')", '1', 'nw:k']);
    assert.equal(r.status, 400);
    assert.match(r.json.error, /Write commands are not allowed from read-only scripts/);
    assert.deepEqual((await post('/', ['EVAL_RO', "#!lua flags=no-writes,allow-key-locking\nreturn redis.call('GET', KEYS[1])", '1', 'nw:k'])).json, { result: null });
    // Redis's own errors for other shebang faults stay
    const bad = await post('/', ['EVAL', '#!lua bogus=1\nreturn 1', '0']);
    assert.match(bad.json.error, /Unknown lua shebang option/);
  });

  test('SCRIPT LOAD answers the original sha; SCRIPT EXISTS, EVALSHA and EVALSHA_RO find it; resp2 too', async () => {
    const text = "#!lua flags=allow-key-locking\nreturn 'loaded'";
    const ro = "#!lua flags=allow-key-locking,no-writes\nreturn 'ro'";
    assert.deepEqual((await post('/', ['SCRIPT', 'LOAD', text])).json, { result: sha1(text) });
    assert.deepEqual((await post('/', ['SCRIPT', 'EXISTS', sha1(text), sha1('nope')])).json, { result: [1, 0] });
    assert.deepEqual((await post('/', ['EVALSHA', sha1(text), '0'])).json, { result: 'loaded' });
    const raw = await post('/', ['SCRIPT', 'LOAD', ro], { 'upstash-response-format': 'resp2' });
    assert.equal(raw.text, `$40\r\n${sha1(ro)}\r\n`);
    assert.deepEqual((await post('/', ['EVALSHA_RO', sha1(ro), '0'])).json, { result: 'ro' });
  });

  test('in pipelines and transactions', async () => {
    const text = "#!lua flags=allow-key-locking\nreturn redis.call('INCR', KEYS[1])";
    const p = await post('/pipeline', [
      ['EVAL', text, '1', 'pt:n'],
      ['SCRIPT', 'LOAD', text],
      ['EVALSHA', sha1(text), '1', 'pt:n'],
      ['SCRIPT', 'EXISTS', sha1(text)],
    ]);
    assert.deepEqual(p.json, [{ result: 1 }, { result: sha1(text) }, { result: 2 }, { result: [1] }]);
    const m = await post('/multi-exec', [
      ['EVAL', text, '1', 'pt:n'],
      ['SCRIPT', 'LOAD', text],
      ['EVALSHA', sha1(text), '1', 'pt:n'],
    ]);
    assert.deepEqual(m.json, [{ result: 3 }, { result: sha1(text) }, { result: 4 }]);
  });

  test('through @upstash/redis: eval, evalsha, scriptLoad, pipeline', async () => {
    const text = "#!lua flags=allow-key-locking\nreturn ARGV[1]";
    assert.equal(await redis.scriptLoad(text), sha1(text));
    assert.equal(await redis.evalsha(sha1(text), [], ['a']), 'a');
    assert.equal(await redis.eval(text, [], ['b']), 'b');
    const p = redis.pipeline();
    p.evalsha(sha1(text), [], ['c']);
    p.eval(text, [], ['d']);
    assert.deepEqual(await p.exec(), ['c', 'd']);
  });
});

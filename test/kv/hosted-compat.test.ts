/**
 * Hosted-service behaviours svc emulates where stock Redis differs, through `@upstash/redis`
 * (default configuration) and raw REST: the read-your-writes token of each write, `SCAN …
 * WITHTYPE`, `COPY k k`.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Redis } from '@upstash/redis';
import { call, startKv, type KvUnderTest } from './helpers.js';

let kv: KvUnderTest;
let redis: Redis;
before(async () => {
  kv = await startKv();
  redis = kv.redis;
});
after(() => kv?.close());

const post: KvUnderTest['post'] = (...a) => kv.post(...a);

/** The order of a sync token: its last `-`-separated part, base 36 (one process: `<prefix>-<seq>`; workers: one number). */
const seq = (t: string): number => parseInt(t.slice(t.lastIndexOf('-') + 1), 36);

describe('read-your-writes token', () => {
  test('concurrent writes each carry the token of their own write; a later read carries the newest', async () => {
    const before = (await post('/', ['GET', 'rw:none'])).headers.get('upstash-sync-token')!;
    const script = ['EVAL', "return redis.call('INCR', KEYS[1])", '1', 'rw:n'];
    for (const [path, body] of [
      ['/', ['INCR', 'rw:n']],
      ['/pipeline', [['INCR', 'rw:n']]],
      ['/multi-exec', [['INCR', 'rw:n']]],
      ['/', script], // a script, watched by the long-script watchdog
    ] as const) {
      const rs = await Promise.all([post(path, body), post(path, body), post(path, body)]);
      const tokens = rs.map((r) => r.headers.get('upstash-sync-token')!);
      assert.equal(new Set(tokens).size, 3, `${path}: ${tokens.join(' ')}`);
      for (const t of tokens) assert.ok(seq(t) > seq(before), `${t} after ${before}`);
      for (const r of rs) assert.equal(r.headers.get('svc-sync-token'), r.headers.get('upstash-sync-token'));
      const read = await post('/', ['GET', 'rw:n']);
      assert.equal(seq(read.headers.get('upstash-sync-token')!), Math.max(...tokens.map(seq)));
    }
  });

  test('a read does not change the token', async () => {
    const a = (await post('/', ['GET', 'rw:n'])).headers.get('upstash-sync-token');
    const b = (await post('/pipeline', [['GET', 'rw:n']])).headers.get('upstash-sync-token');
    assert.equal(a, b);
  });
});

describe('SCAN … WITHTYPE', () => {
  test('@upstash/redis scan with withType gets every key with its type', async () => {
    await redis.set('wt:s', 'v');
    await redis.hset('wt:h', { f: 1 });
    await redis.lpush('wt:l', 'x');
    await redis.sadd('wt:set', 'm');
    await redis.zadd('wt:z', { score: 1, member: 'm' });
    await redis.xadd('wt:x', '*', { f: 'v' });
    const seen = new Map<string, string>();
    let cursor: string | number = '0';
    do {
      const [next, keys]: [string, unknown] = await redis.scan(cursor, { match: 'wt:*', count: 2, withType: true });
      for (const { key, type } of keys as unknown as { key: string; type: string }[]) seen.set(key, type);
      cursor = next;
    } while (String(cursor) !== '0');
    assert.deepEqual(Object.fromEntries([...seen].sort()), {
      'wt:h': 'hash',
      'wt:l': 'list',
      'wt:s': 'string',
      'wt:set': 'set',
      'wt:x': 'stream',
      'wt:z': 'zset',
    });
  });

  test('raw: with TYPE, in a pipeline, in a transaction; read-only token still refused SCAN', async () => {
    const single = await post('/', ['SCAN', '0', 'MATCH', 'wt:s*', 'TYPE', 'set', 'COUNT', '1000', 'WITHTYPE']);
    assert.deepEqual(single.json, { result: ['0', ['wt:set', 'set']] });
    const p = await post('/pipeline', [['SCAN', '0', 'MATCH', 'wt:h', 'COUNT', '1000', 'withtype'], ['SCAN', '0', 'MATCH', 'wt:h', 'COUNT', '1000']]);
    assert.deepEqual(p.json, [{ result: ['0', ['wt:h', 'hash']] }, { result: ['0', ['wt:h']] }]);
    const m = await post('/multi-exec', [['SCAN', '0', 'MATCH', 'wt:l', 'COUNT', '1000', 'WITHTYPE']]);
    assert.deepEqual(m.json, [{ result: ['0', ['wt:l', 'list']] }]);
    const ro = await call(kv.base, '/', {
      method: 'POST',
      token: kv.svc.ctx.credentials.get('kv.readonlyToken'),
      body: JSON.stringify(['SCAN', '0', 'WITHTYPE']),
    });
    assert.equal(ro.status, 400);
    assert.match(ro.json.error, /^NOPERM .*'scan'/);
  });
});

describe('COPY k k', () => {
  test('answers 0 (NOT_COPIED), not an error; COPY to another key still copies', async () => {
    await redis.set('cp:a', 'v');
    assert.equal(await redis.copy('cp:a', 'cp:a'), 'NOT_COPIED');
    assert.deepEqual((await post('/', ['COPY', 'cp:a', 'cp:a', 'REPLACE'])).json, { result: 0 });
    assert.deepEqual((await post('/multi-exec', [['COPY', 'cp:a', 'cp:a']])).json, [{ result: 0 }]);
    assert.equal((await post('/', ['COPY', 'cp:a', 'cp:a'], { 'upstash-response-format': 'resp2' })).text, ':0\r\n');
    assert.equal(await redis.copy('cp:a', 'cp:b'), 'COPIED');
    assert.equal(await redis.get('cp:b'), 'v');
  });
});

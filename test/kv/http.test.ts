/**
 * Raw HTTP against the kv gateway (spec "Key-value REST interface", "Errors"):
 * every request form, format header, status code and token kind.
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { JSON_LIBRARY } from '../../src/kv/json/index.js';
import { startTestSvc } from '../helpers/env.js';
import { ACL_ALLOWED_COMMANDS, call } from './helpers.js';

let svc: Awaited<ReturnType<typeof startTestSvc>>;
let base: string;
let token: string;
let roToken: string;
const q = (path: string, init: Parameters<typeof call>[2] = {}) => call(base, path, { token, ...init });
const post = (path: string, body: unknown, init: Parameters<typeof call>[2] = {}) =>
  q(path, { method: 'POST', body: (typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body)) as BodyInit, ...init });

before(async () => {
  svc = await startTestSvc(['kv']);
  base = svc.urls.kv!;
  token = svc.ctx.credentials.get('kv.token');
  roToken = svc.ctx.credentials.get('kv.readonlyToken');
});
after(async () => {
  await svc?.close();
});

describe('request forms', () => {
  test('command in path with GET, POST, PUT and HEAD; percent-decoded segments', async () => {
    assert.deepEqual((await q('/set/a%2Fb/hello%20world')).json, { result: 'OK' });
    assert.deepEqual((await q('/get/a%2Fb')).json, { result: 'hello world' });
    assert.deepEqual((await q('/get/a%2Fb', { method: 'POST' })).json, { result: 'hello world' });
    assert.deepEqual((await q('/get/a%2Fb', { method: 'PUT' })).json, { result: 'hello world' });
    const head = await q('/get/a%2Fb', { method: 'HEAD' });
    assert.equal(head.status, 200);
    assert.equal(head.text, '');
    assert.ok(head.headers.get('upstash-sync-token'));
    assert.deepEqual((await q('/SET/UpperKey/v')).json, { result: 'OK' });
    assert.deepEqual((await q('/get/UpperKey/')).json, { result: 'v' }); // one trailing slash ignored
    assert.deepEqual((await q('/get/missing')).json, { result: null });
    assert.deepEqual((await q('/publish/nobody/hi')).json, { result: 0 });
  });

  test('POST body is the last argument (binary-safe), then query parameters in order; _token excluded', async () => {
    const bin = Buffer.from([0, 1, 2, 0xff, 0xfe, 13, 10, 0x41]);
    assert.deepEqual((await post('/set/bin', bin, { headers: { 'content-type': 'application/octet-stream' } })).json, { result: 'OK' });
    const got = await q('/get/bin', { headers: { 'Svc-Response-Format': 'resp2' } });
    assert.deepEqual(got.body, Buffer.concat([Buffer.from('$8\r\n'), bin, Buffer.from('\r\n')]));
    assert.deepEqual((await q('/get/bin', { headers: { 'Svc-Encoding': 'base64' } })).json, { result: bin.toString('base64') });
    // ?EX=100&NX  ->  SET k <body> EX 100 NX
    assert.deepEqual((await call(base, `/set/qk?EX=100&NX&_token=${token}`, { method: 'POST', body: 'v1' })).json, { result: 'OK' });
    assert.deepEqual((await call(base, `/set/qk?EX=100&NX&_token=${token}`, { method: 'POST', body: 'v2' })).json, { result: null });
    const ttl = (await q('/ttl/qk')).json.result;
    assert.ok(ttl > 90 && ttl <= 100, `ttl ${ttl}`);
    assert.deepEqual((await q('/get/qk')).json, { result: 'v1' });
    // a JSON-looking body is still just the value in the path form
    assert.deepEqual((await post('/set/jk', '{"a":1}', { headers: { 'content-type': 'application/json' } })).json, { result: 'OK' });
    assert.deepEqual((await q('/get/jk')).json, { result: '{"a":1}' });
  });

  test('command as JSON array body; numbers and booleans stringified; bad elements refused', async () => {
    assert.deepEqual((await post('/', ['SET', 'num', 1.5])).json, { result: 'OK' });
    assert.deepEqual((await post('/', ['get', 'num'])).json, { result: '1.5' });
    assert.deepEqual((await post('/', ['set', 'bool', true])).json, { result: 'OK' });
    assert.deepEqual((await post('/', ['get', 'bool'])).json, { result: 'true' });
    assert.deepEqual((await post('/', ['incrby', 'ctr', 5])).json, { result: 5 });
    for (const bad of [['set', 'k', null], ['set', 'k', { a: 1 }], [], { cmd: 'get' }, 'get']) {
      const r = await post('/', bad);
      assert.equal(r.status, 400, JSON.stringify(bad));
      assert.equal(typeof r.json.error, 'string');
    }
    const malformed = await post('/', '["set", "k"');
    assert.equal(malformed.status, 400);
    assert.match(malformed.json.error, /invalid JSON/);
    const empty = await q('/', { method: 'POST' });
    assert.equal(empty.status, 400);
  });

  test('pipeline: ordered, every command runs, errors in place', async () => {
    const r = await post('/pipeline', [['set', 'p1', 1], ['incr', 'p1'], ['hget', 'p1', 'f'], ['blpop', 'x', 0], ['incr', 'p1'], ['get', 'p1']]);
    assert.equal(r.status, 200);
    assert.equal(r.json.length, 6);
    assert.deepEqual(r.json[0], { result: 'OK' });
    assert.deepEqual(r.json[1], { result: 2 });
    assert.match(r.json[2].error, /^WRONGTYPE/);
    assert.match(r.json[3].error, /not supported/);
    assert.deepEqual(r.json[4], { result: 3 });
    assert.deepEqual(r.json[5], { result: '3' });
    assert.equal((await post('/pipeline', [])).status, 400);
    assert.equal((await post('/pipeline', ['get', 'x'])).status, 400);
    assert.equal((await post('/pipeline', '[[')).status, 400);
  });

  test('a 5 MB binary value round-trips (body in, JSON base64 and resp2 out)', async () => {
    const big = Buffer.alloc(5 * 1024 * 1024);
    for (let i = 0; i < big.length; i++) big[i] = (i * 31) & 0xff;
    assert.deepEqual((await post('/set/bigval', big)).json, { result: 'OK' });
    const b64 = await q('/get/bigval', { headers: { 'Svc-Encoding': 'base64' } });
    assert.ok(Buffer.from(b64.json.result, 'base64').equals(big));
    const raw = await q('/get/bigval', { headers: { 'Svc-Response-Format': 'resp2' } });
    assert.ok(raw.body.subarray(raw.body.indexOf('\r\n') + 2, raw.body.length - 2).equals(big));
    const pipe = await post('/pipeline', [['strlen', 'bigval'], ['getrange', 'bigval', 0, 2]], { headers: { 'Svc-Encoding': 'base64' } });
    assert.deepEqual(pipe.json, [{ result: big.length }, { result: big.subarray(0, 3).toString('base64') }]);
  });

  test('a large pipeline keeps order', async () => {
    const cmds = Array.from({ length: 2000 }, (_, i) => ['rpush', 'biglist', `v${i}`]);
    const r = await post('/pipeline', cmds);
    assert.equal(r.json.length, 2000);
    assert.deepEqual(r.json[1999], { result: 2000 });
    const lr = await post('/', ['lrange', 'biglist', 0, -1]);
    assert.equal(lr.json.result.length, 2000);
    assert.equal(lr.json.result[1234], 'v1234');
  });

  test('multi-exec: atomic, runtime errors per item, discarded transactions', async () => {
    const ok = await post('/multi-exec', [['set', 'm1', 'a'], ['incr', 'm1'], ['append', 'm1', 'b'], ['get', 'm1']]);
    assert.equal(ok.status, 200);
    assert.equal(ok.json[0].result, 'OK');
    assert.match(ok.json[1].error, /not an integer/);
    assert.deepEqual(ok.json.slice(2), [{ result: 2 }, { result: 'ab' }]);
    // syntax error (arity) discards the whole transaction: nothing ran
    const bad = await post('/multi-exec', [['set', 'm2', 'x'], ['get']]);
    assert.equal(bad.status, 400);
    assert.match(bad.json.error, /wrong number of arguments/);
    assert.deepEqual((await q('/get/m2')).json, { result: null });
    // an unsupported command discards it too, before anything is sent
    const unsup = await post('/multi-exec', [['set', 'm3', 'x'], ['watch', 'm3']]);
    assert.equal(unsup.status, 400);
    assert.deepEqual((await q('/get/m3')).json, { result: null });
    // resp2 does not apply: JSON answer
    const r2 = await post('/multi-exec', [['get', 'm1']], { headers: { 'Svc-Response-Format': 'resp2' } });
    assert.deepEqual(r2.json, [{ result: 'ab' }]);
    assert.match(String(r2.headers.get('content-type')), /application\/json/);
    const b64 = await post('/multi-exec', [['set', 'm4', 'x'], ['get', 'm4']], { headers: { 'Upstash-Encoding': 'base64' } });
    assert.deepEqual(b64.json, [{ result: 'OK' }, { result: 'eA==' }]); // each item's OK is top-level, as in /pipeline
  });
});

describe('metrics', () => {
  test('every command\'s round trip to the database is timed once, also when many share one write', async () => {
    const histogram = async () => {
      const text = await svc.ctx.metrics.text();
      const num = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
      return { count: num('svc_kv_backend_duration_seconds_count'), sum: num('svc_kv_backend_duration_seconds_sum') };
    };
    const before = await histogram();
    // one at a time (each written at once), then 200 at once (written together, corked)
    for (let i = 0; i < 20; i++) assert.equal((await q(`/set/rtt-${i}/v`)).status, 200);
    const many = await Promise.all(Array.from({ length: 200 }, (_, i) => q(`/get/rtt-${i % 20}`)));
    assert.deepEqual([...new Set(many.map((r) => r.status))], [200]);
    const after = await histogram();
    // (a health check's PING may be timed too)
    const n = after.count - before.count;
    assert.ok(n >= 220 && n < 240, `${n} round trips timed`);
    const mean = (after.sum - before.sum) / n;
    assert.ok(mean > 0 && mean < 1, `mean round trip ${mean} s`);
  });
});

describe('response formats', () => {
  test('base64 encodes every string except the top-level OK (Svc- and Upstash- names)', async () => {
    await q('/set/b64/hello');
    await q('/rpush/b64l/a/OK');
    for (const h of ['Svc-Encoding', 'Upstash-Encoding']) {
      const headers = { [h]: 'base64' };
      assert.deepEqual((await q('/set/b64/hello', { headers })).json, { result: 'OK' });
      assert.deepEqual((await q('/get/b64', { headers })).json, { result: 'aGVsbG8=' });
      assert.deepEqual((await q('/ping', { headers })).json, { result: 'UE9ORw==' });
      assert.deepEqual((await q('/type/b64', { headers })).json, { result: 'c3RyaW5n' });
      assert.deepEqual((await q('/lrange/b64l/0/-1', { headers })).json, { result: ['YQ==', 'T0s='] });
      assert.deepEqual((await q('/strlen/b64', { headers })).json, { result: 5 });
      assert.deepEqual((await q('/get/nothing', { headers })).json, { result: null });
      const err = await q('/hget/b64/f', { headers });
      assert.equal(err.status, 400);
      assert.match(err.json.error, /^WRONGTYPE/); // errors are never encoded
    }
  });

  test('without base64, invalid UTF-8 becomes U+FFFD', async () => {
    await post('/set/badutf', Buffer.from([0x61, 0xff, 0x62]));
    assert.deepEqual((await q('/get/badutf')).json, { result: 'a\uFFFDb' });
  });

  test('resp2 returns the raw reply bytes; bad values and resp2+base64 are 400', async () => {
    await q('/set/r2/v');
    const cases: [string, string][] = [
      ['/get/r2', '$1\r\nv\r\n'],
      ['/set/r2/v', '+OK\r\n'],
      ['/strlen/r2', ':1\r\n'],
      ['/get/none', '$-1\r\n'],
      ['/mget/r2/none', '*2\r\n$1\r\nv\r\n$-1\r\n'],
    ];
    for (const [path, raw] of cases) {
      const r = await q(path, { headers: { 'Upstash-Response-Format': 'resp2' } });
      assert.equal(r.status, 200);
      assert.equal(r.headers.get('content-type'), 'application/octet-stream');
      assert.equal(r.text, raw, path);
    }
    const err = await q('/hget/r2/f', { headers: { 'Svc-Response-Format': 'resp2' } });
    assert.equal(err.status, 400);
    assert.match(err.text, /^-WRONGTYPE .*\r\n$/);
    const pipe = await post('/pipeline', [['set', 'r2', 'w'], ['get', 'r2'], ['watch', 'r2']], { headers: { 'Svc-Response-Format': 'resp2' } });
    assert.match(pipe.text, /^\+OK\r\n\$1\r\nw\r\n-ERR .*\r\n$/);
    const json = await q('/get/r2', { headers: { 'Svc-Response-Format': 'json' } });
    assert.deepEqual(json.json, { result: 'w' });
    const badFmt = await q('/get/r2', { headers: { 'Svc-Response-Format': 'xml' } });
    assert.equal(badFmt.status, 400);
    assert.match(badFmt.json.error, /response format/);
    const both = await q('/get/r2', { headers: { 'Svc-Response-Format': 'resp2', 'Svc-Encoding': 'base64' } });
    assert.equal(both.status, 400);
  });

  test('every byte value, quotes, backslashes, control characters, invalid UTF-8, empty, nil and large values: the exact JSON text and length', async () => {
    // the text JSON.stringify gives of the value decoded as UTF-8 (invalid bytes as U+FFFD)
    const expected = (v: Buffer | null) => `{"result":${v === null ? 'null' : JSON.stringify(v.toString('utf8'))}}`;
    const values: Buffer[] = [];
    for (let b = 0; b < 256; b++) values.push(Buffer.from([0x61, b, 0x62]), Buffer.from([b]));
    values.push(
      Buffer.alloc(0),
      Buffer.from('say "hi"\\ \\n \x7f tab\there'),
      Buffer.from('h\u00e9llo \u00fc \u20ac \ud83d\ude00'), // valid multi-byte UTF-8
      Buffer.from([0xe2, 0x82]), // truncated UTF-8
      Buffer.from([0xed, 0xa0, 0x80]), // an encoded surrogate (invalid UTF-8)
      Buffer.alloc(200_000, 'x'), // large, answered across several socket writes
      Buffer.concat([Buffer.alloc(100_000, 'y'), Buffer.from('"'), Buffer.alloc(100_000, 'z')]),
    );
    for (let i = 0; i < values.length; i++) {
      const v = values[i];
      // (an empty body is no argument: the empty value is set through the JSON form)
      const set = v.length === 0 ? await post('/', ['SET', `bytes${i}`, '']) : await post(`/set/bytes${i}`, v, { headers: { 'content-type': 'application/octet-stream' } });
      assert.equal(set.status, 200);
      for (const r of [await q(`/get/bytes${i}`), await post('/', ['GET', `bytes${i}`])]) {
        assert.equal(r.status, 200);
        assert.equal(r.text, expected(v), `value ${i}: ${v.subarray(0, 8).toString('hex')}`);
        assert.equal(r.headers.get('content-length'), String(r.body.length), `value ${i}`);
        assert.deepEqual(r.body, Buffer.from(expected(v), 'utf8'));
      }
    }
    for (const r of [await q('/get/bytes-none'), await post('/', ['GET', 'bytes-none'])]) assert.equal(r.text, expected(null));
    assert.equal((await q('/incrby/bytes-n/-42')).text, '{"result":-42}');
    assert.equal((await q('/set/bytes-ok/v')).text, '{"result":"OK"}');
    assert.equal((await q('/ping')).text, '{"result":"PONG"}');
  });

  test('one connection, requests pipelined in one write: each answer has its exact length (plain, escaped and multi-byte values)', async () => {
    const values = ['plain', 'q"uote', 'back\\slash', 'caf\u00e9 \u20ac', 'x'.repeat(70_000), ''];
    for (let i = 0; i < values.length; i++) assert.equal((await post('/', ['SET', `pl${i}`, values[i]])).status, 200);
    const url = new URL(base);
    const socket = net.connect(Number(url.port), url.hostname);
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    let reqs = '';
    for (let i = 0; i < values.length; i++) reqs += `GET /get/pl${i} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n\r\n`;
    reqs += `GET /get/pl-none HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nConnection: close\r\n\r\n`;
    socket.end(reqs);
    await new Promise((resolve) => socket.on('close', resolve));
    let all = Buffer.concat(chunks);
    const bodies: string[] = [];
    while (all.length > 0) {
      const headEnd = all.indexOf('\r\n\r\n');
      assert.ok(headEnd > 0, 'a complete head');
      const len = Number(/content-length: (\d+)/i.exec(all.subarray(0, headEnd).toString('latin1'))![1]);
      bodies.push(all.subarray(headEnd + 4, headEnd + 4 + len).toString('utf8'));
      all = all.subarray(headEnd + 4 + len);
    }
    assert.deepEqual(bodies, [...values.map((v) => JSON.stringify({ result: v })), '{"result":null}']);
  });

  test('integers beyond 2^53 keep their digits', async () => {
    await q('/set/bigint/9007199254740993');
    const r = await q('/incr/bigint');
    assert.equal(r.text, '{"result":9007199254740994}');
  });
});

describe('status codes, headers, CORS', () => {
  test('405 for other methods; 401 for missing or wrong token; _token query accepted', async () => {
    for (const method of ['DELETE', 'PATCH']) {
      const r = await q('/get/x', { method });
      assert.equal(r.status, 405);
      assert.equal(typeof r.json.error, 'string');
    }
    const none = await call(base, '/get/x');
    assert.equal(none.status, 401);
    assert.equal(typeof none.json.error, 'string');
    assert.equal((await call(base, '/get/x', { token: 'wrong' })).status, 401);
    assert.equal((await call(base, '/get/x', { headers: { authorization: 'Basic abc' } })).status, 401);
    assert.equal((await call(base, `/get/x?_token=${encodeURIComponent(token)}`)).status, 200);
    assert.equal((await call(base, '/get/x?_token=nope')).status, 401);
  });

  test('the start-up banner names the kv URL, its token and its read-only token (as the queue and vector lines do)', () => {
    const lines = svc.banner.split('\n');
    const at = lines.findIndex((l) => l.startsWith(`kv     ${base}`));
    assert.ok(at >= 0, svc.banner);
    assert.equal(lines[at + 1].trim(), `token: ${token}`);
    assert.equal(lines[at + 2].trim(), `read-only token: ${roToken}`);
  });

  test('sync token on every response (both names), changing after every write; unknown incoming token accepted', async () => {
    const a = await q('/set/sync/1', { headers: { 'upstash-sync-token': '' } });
    const t1 = a.headers.get('upstash-sync-token');
    assert.ok(t1);
    assert.equal(a.headers.get('svc-sync-token'), t1);
    const b = await q('/get/sync', { headers: { 'upstash-sync-token': 'garbage' } });
    assert.equal(b.headers.get('upstash-sync-token'), t1); // reads do not change it
    const c = await post('/pipeline', [['incr', 'sync']]);
    assert.notEqual(c.headers.get('upstash-sync-token'), t1);
    const d = await post('/', ['eval', "return redis.call('incr', KEYS[1])", 1, 'sync']);
    assert.notEqual(d.headers.get('upstash-sync-token'), c.headers.get('upstash-sync-token'));
    const e = await call(base, '/get/x');
    assert.equal(e.status, 401);
    assert.ok(e.headers.get('upstash-sync-token'));
  });

  test('CORS headers and OPTIONS preflight', async () => {
    const r = await q('/get/x', { headers: { origin: 'https://app.example' } });
    assert.equal(r.headers.get('access-control-allow-origin'), '*');
    assert.match(String(r.headers.get('access-control-expose-headers')), /upstash-sync-token/);
    const pre = await call(base, '/', {
      method: 'OPTIONS',
      headers: { origin: 'https://app.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, upstash-encoding' },
    });
    assert.equal(pre.status, 204);
    assert.equal(pre.headers.get('access-control-allow-origin'), '*');
    assert.match(String(pre.headers.get('access-control-allow-methods')), /POST/);
    const allow = String(pre.headers.get('access-control-allow-headers'));
    for (const h of ['authorization', 'content-type', 'upstash-encoding', 'upstash-sync-token', 'upstash-telemetry-sdk']) assert.ok(allow.includes(h), h);
    assert.equal((await call(base, '/', { method: 'OPTIONS' })).status, 405);
  });
});

describe('command policy', () => {
  test('unsupported commands are refused with a clear error and never forwarded', async () => {
    const refused: unknown[][] = [
      ['blpop', 'l', 0], ['brpop', 'l', 0], ['brpoplpush', 'a', 'b', 0], ['blmove', 'a', 'b', 'left', 'left', 0],
      ['blmpop', 0, 1, 'l', 'left'], ['bzpopmin', 'z', 0], ['bzpopmax', 'z', 0], ['bzmpop', 0, 1, 'z', 'min'],
      ['xread', 'block', 0, 'streams', 's', '$'], ['xreadgroup', 'group', 'g', 'c', 'block', 0, 'streams', 's', '>'],
      ['watch', 'k'], ['unwatch'], ['discard'], ['multi'], ['exec'],
      ['select', 1], ['auth', 'x'], ['client', 'list'], ['hello', 3], ['quit'], ['reset'], ['wait', 0, 0],
      ['subscribe', 'c'], ['psubscribe', 'c*'], ['monitor'], ['cluster', 'info'], ['readonly'], ['readwrite'],
    ];
    for (const cmd of refused) {
      const r = await post('/', cmd);
      assert.equal(r.status, 400, JSON.stringify(cmd));
      assert.match(r.json.error, /^ERR Command is not supported/, JSON.stringify(cmd));
    }
    // the non-blocking form of XREAD is fine
    await post('/', ['xadd', 'xs', '*', 'f', 'v']);
    assert.equal((await post('/', ['xread', 'count', 1, 'streams', 'xs', '0'])).status, 200);
    assert.deepEqual((await post('/', ['echo', 'e'])).json, { result: 'e' });
    const unknown = await post('/', ['nosuchcommand', 'a']);
    assert.equal(unknown.status, 400);
    assert.match(unknown.json.error, /unknown command/);
  });

  test('host-level commands are refused for every token; svc users are protected', async () => {
    const forbidden: unknown[][] = [
      ['config', 'set', 'maxmemory', '1'], ['config', 'rewrite'], ['config', 'resetstat'], ['shutdown'], ['shutdown', 'nosave'],
      ['debug', 'sleep', 0], ['module', 'list'], ['replicaof', 'no', 'one'], ['slaveof', 'no', 'one'], ['sync'], ['psync', '?', -1],
      ['failover'], ['migrate', '127.0.0.1', 1, 'k', 0, 1000],
      ['acl', 'setuser', 'svc-readonly', '+@all'], ['acl', 'deluser', 'someone', 'svc-admin'], ['acl', 'setuser', 'svc-standard', 'off'],
      ['acl', 'setuser', 'default', 'on', 'nopass'],
    ];
    for (const cmd of forbidden) {
      for (const t of [token, roToken]) {
        const r = await post('/', cmd, { token: t });
        assert.equal(r.status, 400, JSON.stringify(cmd));
        assert.match(r.json.error, /not allowed|managed by svc/, JSON.stringify(cmd));
      }
    }
    // a Lua script cannot reach them either
    const lua = await post('/', ['eval', "return redis.call('config', 'set', 'maxmemory', '1')", 0]);
    assert.equal(lua.status, 400);
    // allowed server commands
    assert.equal((await post('/', ['dbsize'])).status, 200);
    assert.equal((await post('/', ['time'])).status, 200);
    assert.match((await post('/', ['info', 'server'])).json.result, /redis_version/);
    assert.deepEqual((await post('/', ['acl', 'setuser', 'other', 'on', '>pw', '~*', '+get'])).json, { result: 'OK' });
    assert.deepEqual((await post('/', ['acl', 'deluser', 'other'])).json, { result: 1 });
  });

  test('ACL SETUSER may not grant what svc refuses for every token (such a user could log in to the database directly)', async () => {
    const users = async () => (await post('/', ['acl', 'users'])).json.result as string[];
    for (const rules of [['+@all'], ['allcommands'], ['+@admin'], ['+@slow'], ['+config'], ['+config|set'], ['+module'], ['+@write'], ['+select'], ['+get', '(+@all ~*)'], ['nocommands', '+debug']]) {
      const r = await post('/', ['acl', 'setuser', 'grabber', 'on', '>pw-grab', '~*', ...rules]);
      assert.equal(r.status, 400, JSON.stringify(rules));
      assert.match(r.json.error, /^ERR ACL SETUSER would let the user run '/, JSON.stringify(rules));
    }
    assert.ok(!(await users()).includes('grabber'), 'no refused SETUSER created the user');
    // the error names what to take away; with those rules the same grant is taken
    assert.match((await post('/', ['acl', 'setuser', 'grabber', 'on', '>pw-grab', '~*', '+@write'])).json.error, /'migrate', 'move', 'pfdebug', 'swapdb'/);
    assert.deepEqual((await post('/', ['acl', 'setuser', 'grabber', 'on', '>pw-grab', '~*', '+@read', '+@write', '-migrate', '-move', '-pfdebug', '-swapdb'])).json, { result: 'OK' });
    assert.deepEqual((await post('/', ['acl', 'setuser', 'grabber', ...ACL_ALLOWED_COMMANDS, '(+get ~x)'])).json, { result: 'OK' });
    // rules apply in order: a later + undoes an earlier -
    assert.equal((await post('/', ['acl', 'setuser', 'grabber', '-config', '+config|get'])).status, 400);
    assert.deepEqual((await post('/', ['acl', 'deluser', 'grabber'])).json, { result: 1 });
  });

  test('server introspection, persistence control and other databases are refused for every token, alone, in a pipeline and in a transaction', async () => {
    await post('/', ['set', 'introspect', 'v']);
    const refused: unknown[][] = [
      ['config', 'get', 'dir'], ['CONFIG', 'GET', '*'], ['memory', 'stats'], ['memory', 'doctor'], ['memory', 'malloc-stats'], ['memory', 'purge'],
      ['save'], ['bgsave'], ['bgsave', 'schedule'], ['bgrewriteaof'], ['slowlog', 'get'], ['slowlog', 'reset'], ['latency', 'doctor'], ['latency', 'reset'],
      ['pfdebug', 'getreg', 'h'], ['pfselftest'], ['swapdb', 0, 1], ['move', 'introspect', 1], ['copy', 'introspect', 'elsewhere', 'DB', 1], ['replconf', 'listening-port', 1],
    ];
    for (const cmd of refused) {
      for (const t of [token, roToken]) {
        const r = await post('/', cmd, { token: t });
        assert.equal(r.status, 400, JSON.stringify(cmd));
        assert.match(r.json.error, /^ERR Command is not allowed: '/, JSON.stringify(cmd));
      }
    }
    const pipe = await post('/pipeline', [['get', 'introspect'], ['config', 'get', 'dir'], ['memory', 'doctor']]);
    assert.equal(pipe.status, 200);
    assert.deepEqual(pipe.json[0], { result: 'v' });
    assert.match(pipe.json[1].error, /not allowed: 'config get'/);
    assert.match(pipe.json[2].error, /not allowed: 'memory doctor'/);
    const tx = await post('/multi-exec', [['set', 'introspect', 'w'], ['bgsave']]);
    assert.equal(tx.status, 400);
    assert.equal((await post('/', ['get', 'introspect'])).json.result, 'v', 'the refused transaction ran nothing');
    // the data commands next to them stay: MEMORY USAGE of a key, COPY in the same database, LASTSAVE, ROLE
    assert.equal(typeof (await post('/', ['memory', 'usage', 'introspect'])).json.result, 'number');
    assert.deepEqual((await post('/', ['copy', 'introspect', 'copied'])).json, { result: 1 });
    assert.deepEqual((await post('/', ['copy', 'introspect', 'db'])).json, { result: 1 }, 'a destination key named db is not the DB option');
    assert.equal((await post('/', ['lastsave'])).status, 200);
    assert.equal((await post('/', ['role'])).json.result[0], 'master');
    // the COPY verdict depends on its arguments: a cached first answer does not decide the next
    assert.equal((await post('/', ['COPY', 'introspect', 'elsewhere', 'db', 2])).status, 400);
  });

  test('the read-only token refuses every write, also where the command name reads (STORE options, scripts, consumer groups)', async () => {
    await post('/', ['rpush', 'ro-list', 3, 1, 2]);
    await post('/', ['geoadd', 'ro-geo', 13.36, 38.11, 'palermo']);
    await post('/', ['xgroup', 'create', 'ro-stream', 'g', '$', 'MKSTREAM']);
    await post('/', ['xadd', 'ro-stream', '*', 'f', 'v']);
    await post('/', ['set', 'ro-key', 'v']);
    const writes: unknown[][] = [
      ['set', 'ro-key', 'x'], ['eval', "return redis.call('set', 'ro-key', 'x')", 0], ['eval_ro', "return redis.call('set', 'ro-key', 'x')", 0],
      ['sort', 'ro-list', 'STORE', 'ro-sorted'], ['georadius', 'ro-geo', 13, 38, 100, 'km', 'STORE', 'ro-geo2'],
      ['georadiusbymember', 'ro-geo', 'palermo', 100, 'km', 'STOREDIST', 'ro-geo2'], ['geosearchstore', 'ro-geo2', 'ro-geo', 'FROMMEMBER', 'palermo', 'BYRADIUS', 100, 'km'],
      ['xreadgroup', 'GROUP', 'g', 'c', 'STREAMS', 'ro-stream', '>'], ['xgroup', 'createconsumer', 'ro-stream', 'g', 'c2'], ['xautoclaim', 'ro-stream', 'g', 'c', 0, '0'],
      ['getex', 'ro-key', 'EX', 100], ['getdel', 'ro-key'], ['copy', 'ro-key', 'ro-copy'], ['bitfield', 'ro-key', 'SET', 'u8', 0, 1], ['pfadd', 'ro-hll', 'a'],
      ['lmpop', 1, 'ro-list', 'LEFT'], ['zrangestore', 'ro-z2', 'ro-z', 0, 1], ['publish', 'c', 'm'], ['spublish', 'c', 'm'], ['flushall', 'ASYNC'], ['flushdb'],
      ['script', 'flush'], ['function', 'flush'], ['fcall', 'svcjson_set', 1, 'ro-json', '$', '1'], ['json.set', 'ro-json', '$', '1'], ['acl', 'setuser', 'x'],
      ['script', 'kill'], ['function', 'kill'], ['unlink', 'ro-key'], ['expire', 'ro-key', 10], ['persist', 'ro-key'], ['restore', 'ro-new', 0, 'x'],
    ];
    for (const cmd of writes) {
      const r = await post('/', cmd, { token: roToken });
      assert.equal(r.status, 400, JSON.stringify(cmd));
      assert.match(r.json.error, /NOPERM|can't run this command|not allowed/, `${JSON.stringify(cmd)}: ${r.json.error}`);
    }
    // in a pipeline and a transaction too
    const pipe = await post('/pipeline', [['get', 'ro-key'], ['sort', 'ro-list', 'STORE', 'ro-sorted']], { token: roToken });
    assert.deepEqual(pipe.json[0], { result: 'v' });
    assert.match(pipe.json[1].error, /NOPERM/);
    assert.equal((await post('/multi-exec', [['get', 'ro-key'], ['del', 'ro-key']], { token: roToken })).status, 400);
    // nothing changed
    assert.equal((await post('/', ['get', 'ro-key'])).json.result, 'v');
    assert.equal((await post('/', ['ttl', 'ro-key'])).json.result, -1);
    assert.deepEqual((await post('/', ['lrange', 'ro-list', 0, -1])).json.result, ['3', '1', '2']);
    assert.equal((await post('/', ['exists', 'ro-sorted', 'ro-geo2', 'ro-copy', 'ro-hll', 'ro-json', 'ro-new'])).json.result, 0);
    assert.equal((await post('/', ['xpending', 'ro-stream', 'g'])).json.result[0], 0);
    // and the reads it is for still work
    assert.deepEqual((await post('/', ['sort_ro', 'ro-list'], { token: roToken })).status, 400, 'SORT_RO is @dangerous in Redis: refused by the ACL');
    assert.deepEqual((await post('/', ['georadius_ro', 'ro-geo', 13, 38, 100, 'km'], { token: roToken })).json, { result: ['palermo'] });
    assert.deepEqual((await post('/', ['eval_ro', "return redis.call('get', KEYS[1])", 1, 'ro-key'], { token: roToken })).json, { result: 'v' });
  });

  test('JSON.* commands', async () => {
    const r = await post('/', ['JSON.SET', 'doc', '$', '{"a":1}']);
    if (JSON_LIBRARY === '') {
      assert.equal(r.status, 400);
      assert.match(r.json.error, /not supported/);
    } else {
      assert.deepEqual(r.json, { result: 'OK' });
      const get = () => post('/', ['JSON.GET', 'doc', '$.a']);
      assert.equal((await get()).json.result, '[1]');
      // translated in pipelines and transactions too
      const pipe = await post('/pipeline', [['JSON.SET', 'doc', '$.b', '2'], ['JSON.GET', 'doc', '$.b']]);
      assert.deepEqual(pipe.json, [{ result: 'OK' }, { result: '[2]' }]);
      const tx = await post('/multi-exec', [['JSON.SET', 'doc', '$.c', '3'], ['JSON.GET', 'doc', '$.c']]);
      assert.deepEqual(tx.json, [{ result: 'OK' }, { result: '[3]' }]);
      // read-only token: JSON reads (FCALL_RO) allowed, writes refused by the ACL user
      assert.equal((await post('/', ['JSON.GET', 'doc', '$.a'], { token: roToken })).json.result, '[1]');
      const roSet = await post('/', ['JSON.SET', 'doc', '$.a', '5'], { token: roToken });
      assert.equal(roSet.status, 400);
      assert.match(roSet.json.error, /NOPERM/);
      // a client flushing functions does not break JSON.*: svc loads its library again
      assert.deepEqual((await post('/', ['FUNCTION', 'FLUSH'])).json, { result: 'OK' });
      const deadline = Date.now() + 5000;
      let again = await get();
      while (again.status !== 200 && Date.now() < deadline) again = await get();
      assert.equal(again.json.result, '[1]');
    }
  });
});

describe('tokens', () => {
  test('read-only token: reads work, writes/SCAN/KEYS/EVAL are NOPERM, a read-only script cannot write', async () => {
    await q('/set/rokey/v');
    const ro = (path: string, init: Parameters<typeof call>[2] = {}) => call(base, path, { token: roToken, ...init });
    assert.deepEqual((await ro('/get/rokey')).json, { result: 'v' });
    assert.deepEqual((await ro('/ping')).json, { result: 'PONG' });
    assert.deepEqual((await ro('/echo/x')).json, { result: 'x' });
    for (const path of ['/set/rokey/w', '/del/rokey', '/scan/0', '/keys/*', '/flushall', '/eval/return%201/0']) {
      const r = await ro(path);
      assert.equal(r.status, 400, path);
      assert.match(r.json.error, /^NOPERM/, path);
    }
    const script = await ro('/eval_ro/' + encodeURIComponent("return redis.call('set', KEYS[1], 'x')") + '/1/rokey');
    assert.equal(script.status, 400);
    // Redis: "... can't run this command ..." / NOPERM; Valkey: "ACL failure in script: User ... has no permissions to run the 'set' command"
    assert.match(script.json.error, /can't run this command|NOPERM|Write commands are not allowed|has no permissions to run/i);
    assert.deepEqual((await ro('/eval_ro/' + encodeURIComponent("return redis.call('get', KEYS[1])") + '/1/rokey')).json, { result: 'v' });
    const pipe = await call(base, '/pipeline', { token: roToken, method: 'POST', body: JSON.stringify([['get', 'rokey'], ['set', 'rokey', 'x']]) });
    assert.deepEqual(pipe.json[0], { result: 'v' });
    assert.match(pipe.json[1].error, /^NOPERM/);
    const tx = await call(base, '/multi-exec', { token: roToken, method: 'POST', body: JSON.stringify([['get', 'rokey'], ['set', 'rokey', 'x']]) });
    assert.equal(tx.status, 400);
    assert.match(tx.json.error, /NOPERM/);
    const txOk = await call(base, '/multi-exec', { token: roToken, method: 'POST', body: JSON.stringify([['get', 'rokey']]) });
    assert.deepEqual(txOk.json, [{ result: 'v' }]);
    assert.deepEqual((await q('/get/rokey')).json, { result: 'v' });
  });

  test('ACL RESTTOKEN: token for an ACL user, wrong password, unknown user, revocation by rotation', async () => {
    assert.deepEqual((await post('/', ['ACL', 'SETUSER', 'alice', 'on', '>s3cret', '~a:*', '+get', '+set', '+ping'])).json, { result: 'OK' });
    const r = await post('/', ['ACL', 'RESTTOKEN', 'alice', 's3cret']);
    assert.equal(r.status, 200);
    const aliceToken: string = r.json.result;
    assert.equal(typeof aliceToken, 'string');
    const alice = (path: string) => call(base, path, { token: aliceToken });
    assert.deepEqual((await alice('/set/a:1/x')).json, { result: 'OK' });
    assert.deepEqual((await alice('/get/a:1')).json, { result: 'x' });
    const denied = await alice('/set/b:1/x');
    assert.equal(denied.status, 400);
    assert.match(denied.json.error, /^NOPERM/);
    assert.match((await alice('/del/a:1')).json.error, /^NOPERM/);
    // path form works too
    assert.equal((await q('/acl/resttoken/alice/s3cret')).status, 200);
    const wrong = await post('/', ['ACL', 'RESTTOKEN', 'alice', 'nope']);
    assert.equal(wrong.status, 400);
    assert.equal(wrong.json.error, 'ERR Wrong password or user "alice" does not exist');
    const unknown = await post('/', ['ACL', 'RESTTOKEN', 'bob', 'x']);
    assert.equal(unknown.json.error, 'ERR Wrong password or user "bob" does not exist');
    // a forged token is refused
    assert.equal((await call(base, '/get/a:1', { token: aliceToken.slice(0, -4) + 'AAAA' })).status, 401);
    // rotating the ACL token secret revokes it on the next request
    svc.ctx.credentials.set('kv.aclTokenSecret', 'rotated-secret-' + Date.now());
    assert.equal((await alice('/get/a:1')).status, 401);
  });

  test('rotating the standard and read-only tokens applies to the next request', async () => {
    const oldStd = token;
    const oldRo = roToken;
    svc.ctx.credentials.set('kv.token', 'new-standard-token');
    svc.ctx.credentials.set('kv.readonlyToken', 'new-readonly-token');
    try {
      assert.equal((await call(base, '/ping', { token: oldStd })).status, 401);
      assert.equal((await call(base, '/ping', { token: oldRo })).status, 401);
      assert.equal((await call(base, '/ping', { token: 'new-standard-token' })).status, 200);
      assert.match((await call(base, '/set/x/y', { token: 'new-readonly-token' })).json.error, /^NOPERM/);
    } finally {
      svc.ctx.credentials.set('kv.token', oldStd);
      svc.ctx.credentials.set('kv.readonlyToken', oldRo);
    }
  });
});

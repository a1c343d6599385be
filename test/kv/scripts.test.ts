/**
 * Long-running Lua scripts and temporary Redis conditions:
 * - a script or function running past `SVC_KV_SCRIPT_TIMEOUT_MS` is killed by svc (SCRIPT KILL /
 *   FUNCTION KILL on a side connection); its caller gets an error and every other request works again;
 * - while Redis answers `BUSY` (watchdog off), requests get 503 with `Retry-After`, not 400.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Redis } from '@upstash/redis';
import type { KvServer } from '../../src/kv/index.js';
import { RedisConnection } from '../../src/kv/redis/connection.js';
import { startTestSvc } from '../helpers/env.js';
import { ACL_ALLOWED_COMMANDS, call, until } from './helpers.js';

type Svc = Awaited<ReturnType<typeof startTestSvc>>;

/** Resolves `p`, or rejects after `ms` (a script nobody kills would hang the test otherwise). */
function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([p, new Promise<T>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: no answer in ${ms} ms`)), ms)))]).finally(() =>
    clearTimeout(timer),
  );
}

/** Kills whatever script runs, on a connection of svc's admin user (test clean-up). */
async function killScripts(svc: Svc): Promise<void> {
  const backend = (svc.servers.kv as KvServer).backend;
  const c = await RedisConnection.connect(backend.endpoint, backend.admin);
  try {
    await c.send(['SCRIPT', 'KILL']);
    await c.send(['FUNCTION', 'KILL']);
  } finally {
    c.close();
  }
}

/**
 * A token of a new ACL user that may run everything: each test that gets a script killed uses its
 * own, since a killed script puts its token's scripts in a cool-down (`ScriptAdmission`).
 */
async function freshToken(base: string, token: string, user: string): Promise<string> {
  const run = async (...args: string[]) => {
    const r = await call(base, '/', { token, method: 'POST', body: JSON.stringify(args) });
    assert.equal(r.status, 200, r.text);
    return r.json.result;
  };
  assert.equal(await run('ACL', 'SETUSER', user, 'reset', 'on', `>${user}-pw`, '~*', '&*', ...ACL_ALLOWED_COMMANDS), 'OK');
  return (await run('ACL', 'RESTTOKEN', user, `${user}-pw`)) as string;
}

const SPIN_LIBRARY = "#!lua name=spinlib\nredis.register_function('spin', function() while true do end end)";

describe('script watchdog (SVC_KV_SCRIPT_TIMEOUT_MS=800)', () => {
  let svc: Svc;
  let base: string;
  let token: string;
  let redis: Redis;
  before(async () => {
    svc = await startTestSvc(['kv'], { env: { SVC_KV_SCRIPT_TIMEOUT_MS: '800' } });
    base = svc.urls.kv!;
    token = svc.ctx.credentials.get('kv.token');
    redis = new Redis({ url: base, token, retry: false });
  });
  after(async () => {
    await killScripts(svc).catch(() => {});
    await svc?.close();
  });

  test('a never-ending EVAL is killed; its caller gets an error, other requests succeed', async () => {
    await redis.set('k', 'v');
    const started = Date.now();
    const looping = within(redis.eval('while true do end', [], []), 30_000, 'EVAL').then(
      () => assert.fail('the endless script returned'),
      (err: Error) => err,
    );
    // another client's request during the script: answered (after the kill), not stuck behind it
    const other = within(call(base, '/get/k', { token }), 30_000, 'GET during the script');
    const err = await looping;
    assert.match(err.message, /script killed by svc: it ran longer than 800 ms/);
    assert.ok(Date.now() - started >= 700, 'killed only after the limit');
    const o = await other;
    assert.ok(o.status === 200 || o.status === 503, `status ${o.status}`);
    if (o.status === 200) assert.equal(o.json.result, 'v');
    assert.equal(await redis.get('k'), 'v');
  });

  test('a never-ending function (FCALL) is killed with FUNCTION KILL', async () => {
    const load = await call(base, '/', { token, method: 'POST', body: JSON.stringify(['FUNCTION', 'LOAD', 'REPLACE', SPIN_LIBRARY]) });
    assert.equal(load.status, 200, load.text);
    const user = await freshToken(base, token, 'fcall-user');
    const r = await within(call(base, '/fcall/spin/0', { token: user }), 30_000, 'FCALL');
    assert.equal(r.status, 400);
    assert.match(r.json.error, /script killed by svc/);
    assert.equal((await call(base, '/ping', { token })).json.result, 'PONG');
    // the token that ran it is in a cool-down now: its next script is refused, its other commands run
    const again = await call(base, '/eval/return%201/0', { token: user });
    assert.equal(again.status, 429, again.text);
    assert.match(again.json.error, /^ERR scripts of this token are refused for another \d+ s: svc killed a script of it that ran longer than 800 ms/);
    assert.equal((await call(base, '/ping', { token: user })).json.result, 'PONG');
  });

  test('a script in a pipeline and in a transaction is killed too', async () => {
    const res = await within(
      call(base, '/pipeline', { token: await freshToken(base, token, 'pipeline-user'), method: 'POST', body: JSON.stringify([['SET', 'p', '1'], ['EVAL', 'while true do end', '0'], ['GET', 'p']]) }),
      30_000,
      'pipeline',
    );
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json[0].result, 'OK');
    assert.match(res.json[1].error, /script killed by svc/);
    assert.equal(res.json[2].result, '1');
    const m = await within(
      call(base, '/multi-exec', { token: await freshToken(base, token, 'multi-user'), method: 'POST', body: JSON.stringify([['SET', 'm', '1'], ['EVAL', 'while true do end', '0']]) }),
      30_000,
      'transaction',
    );
    assert.equal(m.status, 200, m.text);
    assert.equal(m.json[0].result, 'OK');
    assert.match(m.json[1].error, /script killed by svc/);
  });

  test('a short script is not touched', async () => {
    const other = new Redis({ url: base, token: await freshToken(base, token, 'short-user'), retry: false });
    const r = await other.eval('local x = 0 for i = 1, 100000 do x = x + i end return x', [], []);
    assert.equal(r, 5000050000);
  });
});

describe('temporary Redis conditions answer 503 with Retry-After (watchdog off)', () => {
  let svc: Svc;
  let base: string;
  let token: string;
  before(async () => {
    svc = await startTestSvc(['kv'], { env: { SVC_KV_SCRIPT_TIMEOUT_MS: '0' } });
    base = svc.urls.kv!;
    token = svc.ctx.credentials.get('kv.token');
  });
  after(async () => {
    await killScripts(svc).catch(() => {});
    await svc?.close();
  });

  test('BUSY while a script runs: 503 + Retry-After for single commands, pipelines and transactions', async () => {
    await call(base, '/set/b/1', { token });
    const looping = call(base, '/eval/while%20true%20do%20end/0', { token });
    // Redis answers BUSY once the script has run busy-reply-threshold (5 s by default); a request
    // pipelined on the script's own pooled connection waits behind it, hence the short timeouts
    const get = (path: string, init: Parameters<typeof call>[2] = {}) =>
      call(base, path, { token, ...init, signal: AbortSignal.timeout(1500) }).catch(() => undefined);
    const busy = await until(async () => (await Promise.all([get('/get/b'), get('/get/b')])).find((r) => r?.status === 503), 60_000);
    assert.match(busy!.json.error, /^BUSY /);
    assert.equal(busy!.headers.get('retry-after'), '1');
    const pipeline = () => get('/pipeline', { method: 'POST', body: JSON.stringify([['GET', 'b'], ['GET', 'b']]) });
    const p = (await until(async () => (await Promise.all([pipeline(), pipeline()])).find((r) => r !== undefined), 20_000))!;
    assert.equal(p.status, 503, p.text);
    assert.match(p.json.error, /^BUSY /);
    assert.equal(p.headers.get('retry-after'), '1');
    const m = (await get('/multi-exec', { method: 'POST', body: JSON.stringify([['GET', 'b']]) }))!;
    assert.equal(m.status, 503, m.text);
    assert.ok(m.headers.get('retry-after'));
    // the SDK surfaces it as an error (it retries network errors only)
    const redis = new Redis({ url: base, token, retry: false, signal: () => AbortSignal.timeout(1500) });
    await until(async () => {
      try {
        await redis.get('b');
        return false;
      } catch (err) {
        return /BUSY/.test((err as Error).message);
      }
    }, 20_000);
    await killScripts(svc);
    const killed = await looping;
    assert.equal(killed.status, 400);
    assert.match(killed.json.error, /killed by user/);
    assert.equal((await call(base, '/get/b', { token })).json.result, '1');
  });

  test('a client error that merely starts like one (BUSYKEY) stays 400', async () => {
    await call(base, '/set/dump-src/x', { token });
    const dump = await call(base, '/dump/dump-src', { token, headers: { 'upstash-encoding': 'base64' } });
    const payload = Buffer.from(dump.json.result, 'base64');
    const r = await call(base, '/restore/dump-src/0', { token, method: 'POST', body: payload });
    assert.equal(r.status, 400);
    assert.match(r.json.error, /^BUSYKEY/);
  });
});

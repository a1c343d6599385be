/**
 * Connection pools of `ACL RESTTOKEN` identities: more than 64 identities evict the least recently
 * used pool without failing a request still in flight on it; `ACL SETUSER` / `DELUSER` of a user
 * retire its pool, so a deleted and re-created user works at once and a changed password stops the
 * old token. Through @upstash/redis.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Redis } from '@upstash/redis';
import { startTestSvc } from '../helpers/env.js';
import { ACL_ALLOWED_COMMANDS, call } from './helpers.js';

let svc: Awaited<ReturnType<typeof startTestSvc>>;
let admin: Redis;

before(async () => {
  svc = await startTestSvc(['kv']);
  admin = new Redis({ url: svc.urls.kv!, token: svc.ctx.credentials.get('kv.token'), retry: false });
});
after(async () => {
  await svc?.close();
});

/** Runs one command with the standard token (raw HTTP: the SDK has no ACL methods). */
async function command(...args: string[]): Promise<unknown> {
  const r = await call(svc.urls.kv!, '/', { token: svc.ctx.credentials.get('kv.token'), method: 'POST', body: JSON.stringify(args) });
  assert.equal(r.status, 200, r.text);
  return r.json.result;
}

/** Creates ACL user `name` with `password` (all keys, all commands) and returns a client of its REST token. */
async function aclClient(name: string, password: string): Promise<Redis> {
  assert.equal(await command('ACL', 'SETUSER', name, 'reset', 'on', `>${password}`, '~*', '&*', ...ACL_ALLOWED_COMMANDS), 'OK');
  const token = (await command('ACL', 'RESTTOKEN', name, password)) as string;
  return new Redis({ url: svc.urls.kv!, token, retry: false });
}

describe('ACL token pools', () => {
  test('evicting a pool (over 64 identities) lets its in-flight request finish', async () => {
    const clients: Redis[] = [];
    for (let i = 0; i < 70; i++) clients.push(await aclClient(`pool-user-${i}`, `pw-${i}`));
    // user 0's request runs ~300 ms inside Redis; meanwhile 69 other identities each need a pool,
    // which evicts user 0's (the least recently used) while its request is in flight
    const slow = clients[0].eval('local t = redis.call("TIME") local s = t[1] * 1000000 + t[2] ' +
      'repeat local n = redis.call("TIME") until n[1] * 1000000 + n[2] - s > 300000 return "done"', [], []);
    await new Promise((r) => setTimeout(r, 20));
    const others = await Promise.allSettled(clients.slice(1).map((c, i) => c.set(`pool-key-${i}`, i)));
    assert.equal(await slow, 'done');
    assert.deepEqual(others.filter((r) => r.status === 'rejected'), []);
    // every identity keeps working, evicted or not
    const again = await Promise.allSettled(clients.map((c) => c.incr('pool-counter')));
    assert.deepEqual(again.filter((r) => r.status === 'rejected').map((r) => String((r as PromiseRejectedResult).reason)), []);
    assert.equal(await admin.get('pool-counter'), 70);
  });

  test('a deleted and re-created user works at once; a changed password stops the old token', async () => {
    const u = await aclClient('churn-user', 'first');
    assert.equal(await u.set('churn', 1), 'OK');
    for (let round = 0; round < 5; round++) {
      assert.equal(await command('ACL', 'DELUSER', 'churn-user'), 1);
      await aclClient('churn-user', 'first');
      // the first requests after the re-creation must not fail on the old, now closed connection
      assert.equal(await u.incr('churn'), round + 2);
      assert.equal(await u.get('churn'), round + 2);
    }
    assert.equal(await command('ACL', 'SETUSER', 'churn-user', 'resetpass', '>second'), 'OK');
    await assert.rejects(u.get('churn'), /WRONGPASS|invalid|401|Unauthorized/i);
    const fresh = await aclClient('churn-user', 'second');
    assert.equal(await fresh.get('churn'), 6);
  });
});

/**
 * Resetting the kv password through the management API, observed on the RUNNING kv area (spec
 * "Authentication", key-value tokens 3-5): both tokens and every `ACL RESTTOKEN` token are refused
 * (401) right away, the new tokens work (200), also after a restart on the same data dir; every
 * ACL user not managed by svc is deleted, so one created with a leaked token cannot log in to the
 * database directly (AUTH on its socket) after the reset.
 * Runs when the kv area module is registered in AREA_MODULES.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AREA_MODULES } from '../../src/main.js';
import { startTestSvc, tempDir } from '../helpers/env.js';
import type { KvServer } from '../../src/kv/index.js';
import { RedisConnection } from '../../src/kv/redis/connection.js';
import { SimpleString } from '../../src/kv/resp.js';
import { ACL_ALLOWED_COMMANDS } from '../kv/helpers.js';
import { bearerStatus, mgmt } from './helpers.js';

const skip = AREA_MODULES.kv ? false : 'kv area module not registered in AREA_MODULES';

/** POST {kv}/ with a JSON command array and a Bearer token; returns status and body. */
async function kvCommand(kvUrl: string, token: string, command: string[]): Promise<{ status: number; body: any }> {
  const res = await fetch(kvUrl + '/', {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(command),
  });
  return { status: res.status, body: await res.json() };
}

const ping = (kvUrl: string, token: string) => bearerStatus(kvUrl + '/', token, { method: 'POST', body: '["ping"]' });

test('kv reset-password: old standard, read-only and ACL REST tokens 401; new ones 200; survives restart', { skip }, async () => {
  const { dir, cleanup } = tempDir();
  try {
    let svc = await startTestSvc(['kv', 'mgmt'], { dataDir: dir });
    let fresh: { token: string; readonlyToken: string };
    const store = svc.ctx.credentials;
    const old = { token: store.get('kv.token'), readonlyToken: store.get('kv.readonlyToken') };
    try {
      const kv = svc.urls.kv!;
      // The kv area's readiness, as the management API reports it.
      const health = await mgmt(svc, '/v2/health', { auth: null });
      assert.equal(health.status, 200);
      assert.deepEqual(health.body, { status: 'ok', areas: { kv: 'ok', mgmt: 'ok' } });
      assert.deepEqual(await kvCommand(kv, old.token, ['ping']), { status: 200, body: { result: 'PONG' } });
      assert.equal(await ping(kv, old.readonlyToken), 200);

      // An access-control user and its REST token (ACL RESTTOKEN).
      const setuser = await kvCommand(kv, old.token, ['ACL', 'SETUSER', 'mgmt-test-user', 'on', '>s3cret-pw', '~*', '&*', ...ACL_ALLOWED_COMMANDS]);
      assert.equal(setuser.status, 200, JSON.stringify(setuser.body));
      const minted = await kvCommand(kv, old.token, ['ACL', 'RESTTOKEN', 'mgmt-test-user', 's3cret-pw']);
      assert.equal(minted.status, 200, JSON.stringify(minted.body));
      const aclToken: string = minted.body.result;
      assert.equal(typeof aclToken, 'string');
      assert.equal(await ping(kv, aclToken), 200);

      const r = await mgmt(svc, '/v2/credentials/kv/reset-password', { method: 'POST' });
      assert.equal(r.status, 200);
      fresh = { token: r.body.token, readonlyToken: r.body.readonlyToken };

      // In the running server, immediately.
      assert.equal(await ping(kv, old.token), 401);
      assert.equal(await bearerStatus(`${kv}/ping?_token=${encodeURIComponent(old.token)}`, null), 401);
      assert.equal(await ping(kv, old.readonlyToken), 401);
      assert.equal(await ping(kv, aclToken), 401);
      assert.equal(await ping(kv, fresh.token), 200);
      assert.equal(await bearerStatus(`${kv}/ping?_token=${encodeURIComponent(fresh.token)}`, null), 200);
      assert.equal(await ping(kv, fresh.readonlyToken), 200);
      // The ACL user itself is gone (a leaked token may have created it): no new token for it.
      const again = await kvCommand(kv, fresh.token, ['ACL', 'RESTTOKEN', 'mgmt-test-user', 's3cret-pw']);
      assert.equal(again.status, 400, JSON.stringify(again.body));
      assert.deepEqual((await kvCommand(kv, fresh.token, ['ACL', 'USERS'])).body.result.includes('mgmt-test-user'), false);
    } finally {
      await svc.close();
    }

    svc = await startTestSvc(['kv', 'mgmt'], { dataDir: dir });
    try {
      const kv = svc.urls.kv!;
      assert.equal(await ping(kv, fresh.token), 200);
      assert.equal(await ping(kv, fresh.readonlyToken), 200);
      assert.equal(await ping(kv, old.token), 401);
      assert.equal(await ping(kv, old.readonlyToken), 401);
    } finally {
      await svc.close();
    }
  } finally {
    cleanup();
  }
});

test('kv reset-password deletes the ACL users a leaked token created; svc\'s own users and the new tokens keep working', { skip }, async () => {
  const svc = await startTestSvc(['kv', 'mgmt']);
  try {
    const kv = svc.urls.kv!;
    const leaked = svc.ctx.credentials.get('kv.token');
    const backend = (svc.servers.kv as KvServer).backend;
    // what an attacker holding the leaked token leaves behind: two users with passwords they know
    for (const u of ['backdoor-1', 'backdoor-2']) {
      const r = await kvCommand(kv, leaked, ['ACL', 'SETUSER', u, 'on', '>known-pw', '~*', '&*', ...ACL_ALLOWED_COMMANDS]);
      assert.equal(r.status, 200, JSON.stringify(r.body));
    }
    // before the reset: the user logs in to the database itself (the socket or loopback port)
    const direct = await RedisConnection.connect(backend.endpoint, { user: 'backdoor-1', password: 'known-pw' }, 10_000);
    assert.deepEqual(await direct.send(['SET', 'planted', '1']), new SimpleString('OK'));
    direct.close();

    const r = await mgmt(svc, '/v2/credentials/kv/reset-password', { method: 'POST' });
    assert.equal(r.status, 200);
    // the answer comes after the deletion: the users are gone at once
    await assert.rejects(RedisConnection.connect(backend.endpoint, { user: 'backdoor-1', password: 'known-pw' }, 10_000), /WRONGPASS|invalid/i);
    await assert.rejects(RedisConnection.connect(backend.endpoint, { user: 'backdoor-2', password: 'known-pw' }, 10_000), /WRONGPASS|invalid/i);
    const users = await kvCommand(kv, r.body.token, ['ACL', 'USERS']);
    assert.equal(users.status, 200);
    assert.deepEqual(users.body.result.filter((u: string) => u.startsWith('backdoor')), []);
    // svc's own users are untouched: both new tokens work, the data is there
    assert.deepEqual(await kvCommand(kv, r.body.token, ['GET', 'planted']), { status: 200, body: { result: '1' } });
    assert.deepEqual(await kvCommand(kv, r.body.readonlyToken, ['GET', 'planted']), { status: 200, body: { result: '1' } });
    // a user created after the reset (with the new token) works as before
    assert.equal((await kvCommand(kv, r.body.token, ['ACL', 'SETUSER', 'after-reset', 'on', '>pw2', '~*', ...ACL_ALLOWED_COMMANDS])).status, 200);
    const minted = await kvCommand(kv, r.body.token, ['ACL', 'RESTTOKEN', 'after-reset', 'pw2']);
    assert.equal(minted.status, 200);
    assert.equal(await ping(kv, minted.body.result), 200);
  } finally {
    await svc.close();
  }
});

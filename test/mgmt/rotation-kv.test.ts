/**
 * Resetting the kv password through the management API, observed on the RUNNING kv area (spec
 * "Authentication", key-value tokens 3-5): both tokens and every `ACL RESTTOKEN` token are refused
 * (401) right away, the new tokens work (200), also after a restart on the same data dir.
 * Runs when the kv area module is registered in AREA_MODULES.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AREA_MODULES } from '../../src/main.js';
import { startTestSvc, tempDir } from '../helpers/env.js';
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
      // A token minted after the reset works again.
      const again = await kvCommand(kv, fresh.token, ['ACL', 'RESTTOKEN', 'mgmt-test-user', 's3cret-pw']);
      assert.equal(again.status, 200);
      assert.equal(await ping(kv, again.body.result), 200);
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

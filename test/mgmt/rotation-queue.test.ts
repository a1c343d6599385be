/**
 * Queue token and signing-key rotation through the management API, observed on the RUNNING queue
 * area: the old token is refused (401) at once, the new one works (200), `GET /v2/keys` shows the
 * rotated keys, and all of it survives a restart on the same data dir.
 * Runs when the queue area module is registered in AREA_MODULES.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AREA_MODULES } from '../../src/main.js';
import { startTestSvc, tempDir } from '../helpers/env.js';
import { bearerStatus, mgmt } from './helpers.js';

const skip = AREA_MODULES.queue ? false : 'queue area module not registered in AREA_MODULES';

async function keys(queueUrl: string, token: string): Promise<{ status: number; body: any }> {
  const res = await fetch(`${queueUrl}/v2/keys`, { headers: { authorization: `Bearer ${token}` } });
  return { status: res.status, body: await res.json() };
}

test('queue token and signing keys: rotated in the running queue area; survive restart', { skip }, async () => {
  const { dir, cleanup } = tempDir();
  try {
    let svc = await startTestSvc(['queue', 'mgmt'], { dataDir: dir });
    const oldToken = svc.ctx.credentials.get('queue.token');
    let token: string;
    let rotatedKeys: { current: string; next: string };
    try {
      const q = svc.urls.queue!;
      const before = await keys(q, oldToken);
      assert.equal(before.status, 200);

      const t = await mgmt(svc, '/v2/credentials/queue/token/rotate', { method: 'POST' });
      assert.equal(t.status, 200);
      token = t.body.token;
      const userId = (tok: string) => JSON.parse(Buffer.from(tok, 'base64').toString('utf8')).UserID;
      assert.equal(userId(token), userId(oldToken), 'the UserID of the queue token is kept');
      assert.equal(await bearerStatus(`${q}/v2/keys`, oldToken), 401);
      assert.equal(await bearerStatus(`${q}/v2/keys?qstash_token=${encodeURIComponent(oldToken)}`, null), 401);
      assert.equal(await bearerStatus(`${q}/v2/keys`, token), 200);
      assert.equal(await bearerStatus(`${q}/v2/keys?qstash_token=${encodeURIComponent(token)}`, null), 200);

      const k = await mgmt(svc, '/v2/credentials/queue/signing-keys/rotate', { method: 'POST' });
      assert.equal(k.status, 200);
      assert.equal(k.body.current, before.body.next, 'next becomes current, as POST /v2/keys/rotate does');
      rotatedKeys = { current: k.body.current, next: k.body.next };
      assert.deepEqual((await keys(q, token)).body, rotatedKeys);

      // The queue's own rotation continues from the management API's result.
      const own = await fetch(`${q}/v2/keys/rotate`, { method: 'POST', headers: { authorization: `Bearer ${token}` } });
      assert.equal(own.status, 200);
      const ownBody = (await own.json()) as { current: string; next: string };
      assert.equal(ownBody.current, rotatedKeys.next);
      rotatedKeys = ownBody;
    } finally {
      await svc.close();
    }

    svc = await startTestSvc(['queue', 'mgmt'], { dataDir: dir });
    try {
      const q = svc.urls.queue!;
      assert.equal(await bearerStatus(`${q}/v2/keys`, oldToken), 401);
      const after = await keys(q, token);
      assert.equal(after.status, 200);
      assert.deepEqual(after.body, rotatedKeys);
    } finally {
      await svc.close();
    }
  } finally {
    cleanup();
  }
});

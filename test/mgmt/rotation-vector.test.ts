/**
 * Vector index token rotation through the management API, observed on the RUNNING vector area:
 * old standard and read-only tokens 401 at once, new ones 200, also after a restart.
 * Runs when the vector area module is registered in AREA_MODULES.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AREA_MODULES } from '../../src/main.js';
import { startTestSvc, tempDir } from '../helpers/env.js';
import { bearerStatus, mgmt } from './helpers.js';

const skip = AREA_MODULES.vector ? false : 'vector area module not registered in AREA_MODULES';

const info = (vectorUrl: string, token: string) => bearerStatus(`${vectorUrl}/info`, token, { method: 'POST' });

test('vector default index tokens: rotated in the running vector area; survive restart', { skip }, async () => {
  const { dir, cleanup } = tempDir();
  try {
    let svc = await startTestSvc(['vector', 'mgmt'], { dataDir: dir, env: { SVC_VECTOR_DIMENSION: '3' } });
    const store = svc.ctx.credentials;
    const old = { token: store.get('vector.default.token'), readonlyToken: store.get('vector.default.readonlyToken') };
    let fresh: { token: string; readonlyToken: string };
    try {
      const v = svc.urls.vector!;
      assert.equal(await info(v, old.token), 200);
      assert.equal(await info(v, old.readonlyToken), 200);

      const r = await mgmt(svc, '/v2/credentials/vector/default/rotate', { method: 'POST' });
      assert.equal(r.status, 200);
      fresh = { token: r.body.token, readonlyToken: r.body.readonlyToken };
      assert.equal(await info(v, old.token), 401);
      assert.equal(await info(v, old.readonlyToken), 401);
      assert.equal(await info(v, fresh.token), 200);
      assert.equal(await info(v, fresh.readonlyToken), 200);
    } finally {
      await svc.close();
    }

    svc = await startTestSvc(['vector', 'mgmt'], { dataDir: dir, env: { SVC_VECTOR_DIMENSION: '3' } });
    try {
      const v = svc.urls.vector!;
      assert.equal(await info(v, old.token), 401);
      assert.equal(await info(v, fresh.token), 200);
      assert.equal(await info(v, fresh.readonlyToken), 200);
    } finally {
      await svc.close();
    }
  } finally {
    cleanup();
  }
});

/**
 * `GET /v2/health` and `GET /healthz`: public, per-area readiness from
 * `AreaContext.health`, 200 when every area is ok and 503 otherwise.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startTestSvc } from '../helpers/env.js';
import { mgmt } from './helpers.js';

test('health: public, ok with every area ready; degraded (503) when one is not', async () => {
  const svc = await startTestSvc(['mgmt']);
  try {
    let r = await mgmt(svc, '/v2/health', { auth: null });
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('cache-control'), 'no-store');
    assert.deepEqual(r.body, { status: 'ok', areas: { mgmt: 'ok' } });

    r = await mgmt(svc, '/healthz', { auth: null });
    assert.equal(r.status, 200);
    assert.deepEqual(r.body, { status: 'ok' });
    for (const p of ['/v2/health', '/healthz']) assert.equal((await mgmt(svc, p, { method: 'HEAD', auth: null })).status, 200);

    // Readiness functions as main.ts registers them for other areas: false, async true, throwing.
    svc.ctx.health.set('kv', () => false);
    svc.ctx.health.set('vector', async () => true);
    r = await mgmt(svc, '/v2/health', { auth: null });
    assert.equal(r.status, 503);
    assert.deepEqual(r.body, { status: 'degraded', areas: { mgmt: 'ok', kv: 'down', vector: 'ok' } });

    svc.ctx.health.set('kv', () => {
      throw new Error('boom');
    });
    r = await mgmt(svc, '/v2/health', { auth: null });
    assert.equal(r.status, 503);
    assert.equal(r.body.areas.kv, 'down');

    svc.ctx.health.set('kv', async () => true);
    r = await mgmt(svc, '/v2/health', { auth: null });
    assert.equal(r.status, 200);
    assert.deepEqual(r.body, { status: 'ok', areas: { mgmt: 'ok', kv: 'ok', vector: 'ok' } });
  } finally {
    await svc.close();
  }
});

test('health: a readiness check that hangs counts as down after the timeout (2 s)', async () => {
  const svc = await startTestSvc(['mgmt']);
  try {
    svc.ctx.health.set('queue', () => new Promise<boolean>(() => {}));
    const t0 = Date.now();
    const r = await mgmt(svc, '/v2/health', { auth: null });
    const ms = Date.now() - t0;
    assert.equal(r.status, 503);
    assert.deepEqual(r.body, { status: 'degraded', areas: { mgmt: 'ok', queue: 'down' } });
    assert.ok(ms >= 1_900 && ms < 5_000, `took ${ms} ms`);
  } finally {
    await svc.close();
  }
});

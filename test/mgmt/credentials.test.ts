/**
 * Credential management routes against the store and credentials.json (management area alone).
 * The effect on the other areas' running servers is tested in `rotation-<area>.test.ts`.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { startTestSvc, tempDir } from '../helpers/env.js';
import { account, basic, mgmt } from './helpers.js';

const stored = (dataDir: string): Record<string, string> =>
  JSON.parse(fs.readFileSync(path.join(dataDir, 'credentials.json'), 'utf8'));

test('every rotation: new values returned, in the store, persisted, no-store; warnings empty', async () => {
  const svc = await startTestSvc(['mgmt']);
  try {
    const store = svc.ctx.credentials;
    const before = {
      queue: store.get('queue.token'),
      current: store.get('queue.currentSigningKey', () => 'sig_current0'),
      next: store.get('queue.nextSigningKey', () => 'sig_next0'),
      kv: store.get('kv.token'),
      kvRo: store.get('kv.readonlyToken'),
      acl: store.get('kv.aclTokenSecret'),
    };

    let r = await mgmt(svc, '/v2/credentials/queue/token/rotate', { method: 'POST' });
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('cache-control'), 'no-store');
    assert.deepEqual(Object.keys(r.body).sort(), ['token', 'warnings']);
    assert.notEqual(r.body.token, before.queue);
    // The queue token shape workflow-js decodes: base64 {"UserID", "Password"}.
    const payload = JSON.parse(Buffer.from(r.body.token, 'base64').toString('utf8'));
    assert.equal(payload.UserID, 'svc');
    assert.ok(typeof payload.Password === 'string' && payload.Password.length >= 32);
    assert.equal(store.peek('queue.token'), r.body.token);
    assert.equal(stored(svc.dataDir)['queue.token'], r.body.token);
    assert.deepEqual(r.body.warnings, []);

    r = await mgmt(svc, '/v2/credentials/queue/signing-keys/rotate', { method: 'POST' });
    assert.equal(r.status, 200);
    assert.equal(r.body.current, 'sig_next0', 'the old next key becomes current');
    assert.match(r.body.next, /^sig_[A-Za-z0-9_-]{28}$/);
    assert.notEqual(r.body.next, 'sig_next0');
    assert.equal(store.peek('queue.currentSigningKey'), r.body.current);
    assert.equal(store.peek('queue.nextSigningKey'), r.body.next);
    assert.equal(stored(svc.dataDir)['queue.nextSigningKey'], r.body.next);
    const second = await mgmt(svc, '/v2/credentials/queue/signing-keys/rotate', { method: 'POST' });
    assert.equal(second.body.current, r.body.next);

    // A JSON body (as some clients send) is accepted and ignored.
    r = await mgmt(svc, '/v2/credentials/kv/reset-password', {
      method: 'POST',
      body: '{}',
      headers: { 'content-type': 'application/json' },
    });
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('cache-control'), 'no-store');
    assert.deepEqual(Object.keys(r.body).sort(), ['readonlyToken', 'token', 'warnings']);
    assert.notEqual(r.body.token, before.kv);
    assert.notEqual(r.body.readonlyToken, before.kvRo);
    assert.notEqual(r.body.token, r.body.readonlyToken);
    assert.equal(store.peek('kv.token'), r.body.token);
    assert.equal(store.peek('kv.readonlyToken'), r.body.readonlyToken);
    assert.notEqual(store.peek('kv.aclTokenSecret'), before.acl, 'ACL REST tokens are revoked too');
    const file = stored(svc.dataDir);
    assert.equal(file['kv.token'], r.body.token);
    assert.equal(file['kv.aclTokenSecret'], store.peek('kv.aclTokenSecret'));
  } finally {
    await svc.close();
  }
});

test('a body over 64 KiB: 413 JSON, nothing rotated', async () => {
  const svc = await startTestSvc(['mgmt']);
  try {
    const token = svc.ctx.credentials.get('queue.token');
    const r = await mgmt(svc, '/v2/credentials/queue/token/rotate', { method: 'POST', body: 'x'.repeat(100_000) });
    assert.equal(r.status, 413);
    assert.equal(typeof r.body.error, 'string');
    assert.equal(svc.ctx.credentials.peek('queue.token'), token);
  } finally {
    await svc.close();
  }
});

test('vector index tokens: 404 for an index without credentials, rotation for one with', async () => {
  const svc = await startTestSvc(['mgmt']);
  try {
    const store = svc.ctx.credentials;
    let r = await mgmt(svc, '/v2/credentials/vector/books/rotate', { method: 'POST' });
    assert.equal(r.status, 404);
    assert.deepEqual(r.body, { error: 'vector index not found: "books"' });
    assert.equal(store.peek('vector.books.token'), undefined, 'a 404 creates nothing');
    assert.equal(store.peek('vector.books.readonlyToken'), undefined);

    // Tokens as the vector area creates them for an index named "books".
    store.set('vector.books.token', 'old-std');
    store.set('vector.books.readonlyToken', 'old-ro');
    r = await mgmt(svc, `/v2/credentials/vector/${encodeURIComponent('books')}/rotate`, { method: 'POST' });
    assert.equal(r.status, 200);
    assert.equal(r.body.index, 'books');
    assert.notEqual(r.body.token, 'old-std');
    assert.notEqual(r.body.readonlyToken, 'old-ro');
    assert.equal(store.peek('vector.books.token'), r.body.token);
    assert.equal(stored(svc.dataDir)['vector.books.readonlyToken'], r.body.readonlyToken);
  } finally {
    await svc.close();
  }
});

test('a credential pinned by env: rotated now, with a warning, and env wins again on restart', async () => {
  const { dir, cleanup } = tempDir();
  const env = { SVC_QUEUE_TOKEN: 'pinned-queue-token', SVC_KV_TOKEN: 'pinned-kv-token' };
  try {
    let svc = await startTestSvc(['mgmt'], { dataDir: dir, env });
    let rotated: string;
    try {
      const r = await mgmt(svc, '/v2/credentials/queue/token/rotate', { method: 'POST' });
      assert.equal(r.status, 200);
      rotated = r.body.token;
      assert.equal(svc.ctx.credentials.peek('queue.token'), rotated);
      assert.equal(r.body.warnings.length, 1);
      assert.match(r.body.warnings[0], /queue\.token is pinned by SVC_QUEUE_TOKEN/);
      assert.match(r.body.warnings[0], /on restart SVC_QUEUE_TOKEN wins again/);
      const kv = await mgmt(svc, '/v2/credentials/kv/reset-password', { method: 'POST' });
      assert.equal(kv.body.warnings.length, 1, 'only kv.token is pinned');
      assert.match(kv.body.warnings[0], /SVC_KV_TOKEN/);
    } finally {
      await svc.close();
    }
    svc = await startTestSvc(['mgmt'], { dataDir: dir, env });
    try {
      assert.equal(svc.ctx.credentials.get('queue.token'), 'pinned-queue-token');
      assert.equal(svc.ctx.credentials.get('kv.token'), 'pinned-kv-token');
    } finally {
      await svc.close();
    }
  } finally {
    cleanup();
  }
});

test('persistence: rotated credentials and the management account survive a restart', async () => {
  const { dir, cleanup } = tempDir();
  try {
    let svc = await startTestSvc(['mgmt'], { dataDir: dir });
    const results: Record<string, any> = {};
    let acct: { user: string; password: string };
    try {
      acct = account(svc);
      svc.ctx.credentials.set('vector.default.token', 'x');
      for (const p of ['queue/token', 'queue/signing-keys', 'kv/reset-password', 'vector/default']) {
        const url = p === 'kv/reset-password' ? `/v2/credentials/${p}` : `/v2/credentials/${p}/rotate`;
        const r = await mgmt(svc, url, { method: 'POST' });
        assert.equal(r.status, 200, url);
        results[p] = r.body;
      }
    } finally {
      await svc.close();
    }
    svc = await startTestSvc(['mgmt'], { dataDir: dir });
    try {
      const s = svc.ctx.credentials;
      assert.equal(s.get('queue.token'), results['queue/token'].token);
      assert.equal(s.get('queue.currentSigningKey'), results['queue/signing-keys'].current);
      assert.equal(s.get('queue.nextSigningKey'), results['queue/signing-keys'].next);
      assert.equal(s.get('kv.token'), results['kv/reset-password'].token);
      assert.equal(s.get('kv.readonlyToken'), results['kv/reset-password'].readonlyToken);
      assert.equal(s.get('vector.default.token'), results['vector/default'].token);
      assert.equal(s.get('vector.default.readonlyToken'), results['vector/default'].readonlyToken);
      assert.deepEqual(account(svc), acct);
      assert.equal((await mgmt(svc, '/v2/mq/ipv4', { auth: basic(acct.user, acct.password) })).status, 200);
    } finally {
      await svc.close();
    }
  } finally {
    cleanup();
  }
});

/**
 * The dense embedder of an index created through the management API, as an attacker holding the
 * management token would aim it: with `SVC_VECTOR_BLOCK_PRIVATE_EMBEDDERS` on (by default it
 * follows `SVC_QUEUE_BLOCK_PRIVATE_DESTINATIONS`) a loopback/private embedder URL is refused at
 * create (400), and a DNS name resolving to loopback is refused at connect time (no request
 * reaches the listener), also for an index created before the switch was turned on; redirects of
 * an embedder are never followed.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import dns from 'node:dns/promises';
import os from 'node:os';
import { after, describe, it } from 'node:test';
import { Index } from '@upstash/vector';
import { startTestSvc, tempDir } from '../helpers/env.js';
import { isBlockedAddress } from '../../src/private-address.js';
import { mgmt, post, sdkError, LOCAL_VECTOR_STORE } from './helpers.js';

/** A listener counting its requests; answers an embedding of dimension 3, or a redirect to `redirectTo`. */
async function listener(redirectTo?: string): Promise<{ url: string; hits: () => number; close: () => Promise<void> }> {
  let hits = 0;
  const server = http.createServer((req, res) => {
    hits++;
    req.resume();
    req.on('end', () => {
      if (redirectTo) {
        res.writeHead(302, { location: redirectTo });
        res.end();
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ data: [{ index: 0, embedding: [1, 0, 0] }] }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return { url: `http://127.0.0.1:${port}/v1/embeddings`, hits: () => hits, close: () => new Promise((r) => server.close(() => r())) };
}

describe('embedder URLs of indexes created through the management API', () => {
  const dirs: { cleanup(): void }[] = [];
  after(() => dirs.forEach((d) => d.cleanup()));

  it('refuses private embedder addresses at create and at connect when blocking is on', async () => {
    const tmp = tempDir();
    dirs.push(tmp);
    const target = await listener();
    const port = new URL(target.url).port;
    // the default follows SVC_QUEUE_BLOCK_PRIVATE_DESTINATIONS
    const svc = await startTestSvc(['vector', 'mgmt'], { dataDir: tmp.dir, env: { ...LOCAL_VECTOR_STORE, SVC_QUEUE_BLOCK_PRIVATE_DESTINATIONS: 'true' } });
    try {
      for (const host of ['127.0.0.1', 'localhost', '[::1]', '2130706433', '0x7f.1', '10.0.0.1', '169.254.169.254', '[::ffff:127.0.0.1]', 'x.localhost']) {
        const r = await mgmt(svc, '/v2/vector/index', post({ name: 'e', similarity_function: 'COSINE', dimension_count: 3, embedder: { url: `http://${host}:${port}/v1/embeddings`, model: 'm' } }));
        assert.equal(r.status, 400, `${host}: ${JSON.stringify(r.body)}`);
        assert.match(JSON.stringify(r.body), /SVC_VECTOR_BLOCK_PRIVATE_EMBEDDERS/);
      }
      const bad = await mgmt(svc, '/v2/vector/index', post({ name: 'e', similarity_function: 'COSINE', dimension_count: 3, embedder: { url: 'http://[zz/v1', model: 'm' } }));
      assert.equal(bad.status, 400, JSON.stringify(bad.body));

      // a DNS name that resolves to loopback passes the create check and is refused at connect time
      const name = os.hostname();
      const addrs = await dns.lookup(name, { all: true });
      assert.ok(addrs.length > 0 && addrs.every((a) => isBlockedAddress(a.address)), `${name} must resolve to loopback here: ${JSON.stringify(addrs)}`);
      const created = await mgmt(svc, '/v2/vector/index', post({ name: 'e', similarity_function: 'COSINE', dimension_count: 3, embedder: { url: `http://${name}:${port}/v1/embeddings`, model: 'm' } }));
      assert.equal(created.status, 200, JSON.stringify(created.body));
      const index = new Index({ url: created.body.endpoint, token: created.body.token });
      const msg = await sdkError(index.upsert({ id: 'a', data: 'hello' }));
      assert.match(msg, /not a public address/);
      assert.equal(target.hits(), 0, 'no request reached the private listener');
    } finally {
      await svc.close();
      await target.close();
    }
  });

  it('does not follow an embedder redirect (blocking off, loopback embedder allowed); turning blocking on holds that index to it', async () => {
    const tmp = tempDir();
    dirs.push(tmp);
    const target = await listener();
    const redirector = await listener(target.url);
    const svc = await startTestSvc(['vector', 'mgmt'], { dataDir: tmp.dir, env: LOCAL_VECTOR_STORE });
    try {
      const created = await mgmt(svc, '/v2/vector/index', post({ name: 'r', similarity_function: 'COSINE', dimension_count: 3, embedder: { url: redirector.url, model: 'm' } }));
      assert.equal(created.status, 200, JSON.stringify(created.body));
      const index = new Index({ url: created.body.endpoint, token: created.body.token });
      const msg = await sdkError(index.upsert({ id: 'a', data: 'hello' }));
      assert.match(msg, /answered 302/);
      assert.equal(redirector.hits(), 1);
      assert.equal(target.hits(), 0, 'the redirect was not followed');

      // the same embedder without the redirect works (loopback is fine with blocking off)
      const direct = await mgmt(svc, '/v2/vector/index', post({ name: 'd', similarity_function: 'COSINE', dimension_count: 3, embedder: { url: target.url, model: 'm' } }));
      assert.equal(direct.status, 200, JSON.stringify(direct.body));
      const ok = new Index({ url: direct.body.endpoint, token: direct.body.token });
      await ok.upsert({ id: 'a', data: 'hello' });
      assert.equal(target.hits(), 1);
      await svc.close();

      // the same data dir with SVC_VECTOR_BLOCK_PRIVATE_EMBEDDERS on: the index created before is held to it
      const again = await startTestSvc(['vector', 'mgmt'], { dataDir: tmp.dir, env: { ...LOCAL_VECTOR_STORE, SVC_VECTOR_BLOCK_PRIVATE_EMBEDDERS: 'true' } });
      try {
        const ix = new Index({ url: `${again.urls.vector}/${direct.body.id}`, token: direct.body.token });
        assert.match(await sdkError(ix.upsert({ id: 'b', data: 'again' })), /not a public address/);
        assert.equal(target.hits(), 1, 'no request reached the loopback embedder');
        assert.equal((await ix.fetch(['a']))[0]?.id, 'a', 'the index still serves');
      } finally {
        await again.close();
      }
    } finally {
      await svc.close().catch(() => undefined);
      await redirector.close();
      await target.close();
    }
  });
});

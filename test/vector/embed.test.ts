/**
 * Data endpoints: an OpenAI-compatible `/v1/embeddings` server started
 * by the test (hashed character trigrams, 64-d), the built-in BM25 sparse embedder, `upsert-data`,
 * `query-data`, `resumable-query-data`, hybrid `queryMode`, and 422 when the endpoint fails.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { QueryMode } from '@upstash/vector';
import { Bm25Embedder, tokenize } from '../../src/vector/engine/embedders.js';
import { raw, startVector } from './helpers.js';

const DIM = 64;
function embed(text: string): number[] {
  const v = new Array(DIM).fill(0);
  const t = ` ${text.toLowerCase()} `;
  for (let i = 0; i + 3 <= t.length; i++) {
    let h = 0;
    for (const c of t.slice(i, i + 3)) h = (h * 31 + c.charCodeAt(0)) >>> 0;
    v[h % DIM] += 1;
  }
  return v;
}

describe('data embedding', () => {
  let svc: Awaited<ReturnType<typeof startVector>>;
  let server: http.Server;
  const seen: { model?: string; auth?: string }[] = [];
  before(async () => {
    server = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        const b = JSON.parse(body);
        seen.push({ model: b.model, auth: req.headers.authorization });
        if (b.input.includes('FAIL')) {
          res.writeHead(500).end('boom');
          return;
        }
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ object: 'list', data: b.input.map((t: string, index: number) => ({ object: 'embedding', index, embedding: embed(t) })) }));
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/embeddings`;
    const dense = { url, model: 'test-model', apiKey: 'k1', name: 'TEST_MODEL' };
    svc = await startVector([
      { name: 'emb', type: 'DENSE', dimension: DIM, embedder: { dense } },
      { name: 'bm25', type: 'SPARSE', embedder: { sparse: 'BM25' } },
      { name: 'hyb', type: 'HYBRID', dimension: DIM, embedder: { dense, sparse: 'BM25' } },
    ]);
  });
  after(async () => {
    await svc.close();
    await new Promise((r) => server.close(r));
  });

  test('dense: upsert-data / query-data, identical text scores 1, data returned, range with data', async () => {
    const index = svc.client('emb');
    await index.upsert([
      { id: 'a', data: 'the quick brown fox jumps', metadata: { k: 1 } },
      { id: 'b', data: 'a completely different sentence about databases' },
    ]);
    assert.equal(seen.at(-1)!.model, 'test-model');
    assert.equal(seen.at(-1)!.auth, 'Bearer k1');
    const r = await index.query({ data: 'the quick brown fox jumps', topK: 2, includeData: true, includeMetadata: true });
    assert.deepEqual(r[0], { id: 'a', score: 1, data: 'the quick brown fox jumps', metadata: { k: 1 } });
    const page = await index.range({ cursor: 0, limit: 5, includeData: true });
    assert.deepEqual(page.vectors.map((v) => v.data), ['the quick brown fox jumps', 'a completely different sentence about databases']);
    await index.update({ id: 'b', data: 'changed data' });
    assert.equal((await index.fetch(['b'], { includeData: true }))[0]!.data, 'changed data');
    const { result, fetchNext, stop } = await index.resumableQuery({ data: 'quick fox', topK: 1, maxIdle: 30 });
    assert.equal(result.length, 1);
    assert.equal((await fetchNext(1)).length, 1);
    await stop();
    assert.equal(((await index.info()) as any).denseIndex.embeddingModel, 'TEST_MODEL');
    const fail = await raw(`${svc.indexUrl('emb')}/query-data`, svc.token('emb'), JSON.stringify({ data: 'FAIL' }));
    assert.equal(fail.status, 422);
  });

  test('BM25 sparse: tokenizer, document TF weights, IDF query ranks the matching document first', async () => {
    assert.deepEqual(tokenize('The Cats are running!'), ['cat', 'runn']);
    const doc = new Bm25Embedder().document('cat cat dog');
    // f=2, |D|=3: 2·2.2/(2 + 1.2·(0.25 + 0.75·3/32)) — stored as float32.
    const expect2 = (2 * 2.2) / (2 + 1.2 * (0.25 + (0.75 * 3) / 32));
    assert.ok(doc.values.some((v) => Math.abs(v - expect2) < 1e-6));
    const index = svc.client('bm25');
    await index.upsert([
      { id: 'd1', data: 'vector databases store embeddings' },
      { id: 'd2', data: 'cats and dogs are pets' },
      { id: 'd3', data: 'redis is a key value store' },
    ]);
    const r = await index.query({ data: 'which pets: cats or dogs?', topK: 3 });
    assert.equal(r[0].id, 'd2');
    assert.ok(!r.some((x) => x.id === 'd1'));
    assert.deepEqual(((await index.info()) as any).sparseIndex, { embeddingModel: 'BM25' });
  });

  test('hybrid with both embedders: queryMode HYBRID / DENSE / SPARSE', async () => {
    const index = svc.client('hyb');
    await index.upsert([
      { id: 'h1', data: 'apples and oranges' },
      { id: 'h2', data: 'engines and gearboxes' },
    ]);
    const [hy] = await index.query({ data: 'apples and oranges', topK: 1 });
    assert.equal(hy.id, 'h1');
    const [de] = await index.query({ data: 'apples and oranges', topK: 1, queryMode: QueryMode.DENSE });
    assert.deepEqual(de, { id: 'h1', score: 1 });
    const sp = await index.query({ data: 'gearboxes', topK: 5, queryMode: QueryMode.SPARSE });
    assert.deepEqual(sp.map((x) => x.id), ['h2']);
    const [fetched] = await index.fetch(['h1'], { includeVectors: true });
    assert.equal(fetched!.vector!.length, DIM);
    assert.ok(fetched!.sparseVector!.indices.length > 0);
  });

  test('update with new data re-embeds it (dense, BM25 sparse, hybrid both): query-data finds the new text', async () => {
    const oldText = 'tulips bloom in the spring garden';
    const newText = 'submarines dive under arctic ice';
    // dense
    const emb = svc.client('emb');
    await emb.upsert([
      { id: 'u1', data: oldText, metadata: { keep: true } },
      { id: 'u2', data: 'an unrelated line about kitchen recipes' },
    ]);
    assert.deepEqual(await emb.update({ id: 'u1', data: newText }), { updated: 1 });
    const [d] = await emb.query({ data: newText, topK: 1, includeData: true, includeMetadata: true });
    assert.deepEqual(d, { id: 'u1', score: 1, data: newText, metadata: { keep: true } });
    const [dv] = await emb.fetch(['u1'], { includeVectors: true });
    assert.deepEqual(dv!.vector, Array.from(Float32Array.from(embed(newText))));
    assert.ok((await emb.query({ data: oldText, topK: 10 })).every((x) => x.id !== 'u1' || x.score < 1), 'the old text no longer matches exactly');
    // a vector given with the data is kept (only the parts not given are embedded)
    const mine = Array.from({ length: DIM }, (_, i) => (i === 3 ? 1 : 0));
    await emb.update({ id: 'u2', data: 'text stored beside a vector of my own', vector: mine });
    const [u2] = await emb.fetch(['u2'], { includeVectors: true, includeData: true });
    assert.deepEqual(u2!.vector, mine);
    assert.equal(u2!.data, 'text stored beside a vector of my own');

    // sparse (BM25)
    const bm = svc.client('bm25');
    await bm.upsert([
      { id: 's1', data: oldText },
      { id: 's2', data: 'penguins waddle across frozen shores' },
    ]);
    await bm.update({ id: 's1', data: newText });
    const sp = await bm.query({ data: 'submarines arctic', topK: 5 });
    assert.deepEqual(sp.map((x) => x.id), ['s1']);
    assert.deepEqual(await bm.query({ data: 'tulips garden', topK: 5 }), []);

    // hybrid: both parts re-embedded
    const hy = svc.client('hyb');
    await hy.upsert([
      { id: 'y1', data: oldText },
      { id: 'y2', data: 'engines and gearboxes in a workshop' },
    ]);
    await hy.update({ id: 'y1', data: newText, metadata: { v: 2 } });
    const [hd] = await hy.query({ data: newText, topK: 1, queryMode: QueryMode.DENSE });
    assert.deepEqual(hd, { id: 'y1', score: 1 });
    const hs = await hy.query({ data: 'submarines arctic', topK: 5, queryMode: QueryMode.SPARSE });
    assert.deepEqual(hs.map((x) => x.id), ['y1']);
    assert.deepEqual(await hy.query({ data: 'tulips garden', topK: 5, queryMode: QueryMode.SPARSE }), []);
    const [hh] = await hy.query({ data: newText, topK: 1, includeMetadata: true });
    assert.equal(hh.id, 'y1');
    assert.deepEqual(hh.metadata, { v: 2 });

    // an update of metadata alone calls no embedder
    const calls = seen.length;
    await emb.update({ id: 'u1', metadata: { keep: false } });
    assert.equal(seen.length, calls);
    // an update of a missing id answers 0 and stores nothing
    assert.deepEqual(await emb.update({ id: 'nope', data: newText }), { updated: 0 });
    assert.deepEqual(await emb.fetch(['nope']), [null]);
  });
});

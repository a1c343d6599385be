/**
 * A full disk under the vector store: the index's own SQLite connection is capped with
 * `PRAGMA max_page_count` (SQLite then fails writes that need a new page with a real SQLITE_FULL,
 * as on a full disk). Writes answer 507 with `Retry-After` and an error saying the disk is full
 * (not 500 `commit failed`), every write acknowledged before survives a restart, and writes resume
 * once space returns. A write that failed leaves nothing visible: not its new records (fetch,
 * query, filter, range, info), not its changes to existing ones, not the namespace it would have
 * created. Through @upstash/vector and raw HTTP.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { VectorServer } from '../../src/vector/index.js';
import { tempDir } from '../helpers/env.js';
import { randomVectors, raw, startVector } from './helpers.js';

test('vector disk full: 507 + Retry-After, nothing acknowledged lost, writes resume', { timeout: 180_000 }, async () => {
  const data = tempDir('svc-vector-full-');
  const env = { SVC_VECTOR_DIMENSION: '64' };
  try {
    let svc = await startVector([], { env, dataDir: data.dir });
    const acked = randomVectors(50, 64, 7).map((vector, i) => ({ id: `before-${i}`, vector, metadata: { i } }));
    try {
      await fullDiskPhase(svc, acked);
    } finally {
      await svc.close();
    }


    // nothing acknowledged was lost
    svc = await startVector([], { env, dataDir: data.dir });
    const got = await svc.client().fetch([...acked.map((a) => a.id), 'full-0', 'full-399'], { includeMetadata: true });
    assert.equal(got.filter(Boolean).length, acked.length + 2);
    assert.deepEqual(got[7]?.metadata, { i: 7 });
    await svc.close();
  } finally {
    data.cleanup();
  }
});

/** Acknowledges `acked`, fills the disk, checks the 507s, frees space and writes again. */
async function fullDiskPhase(svc: Awaited<ReturnType<typeof startVector>>, acked: { id: string; vector: number[]; metadata: { i: number } }[]): Promise<void> {
  const index = svc.client();
  assert.equal(await index.upsert(acked), 'Success');
  const db = (svc.servers.vector as VectorServer).indexes.get('default')!.store.db;
  db.pragma(`max_page_count = ${db.pragma('page_count', { simple: true }) as number}`);

  const big = randomVectors(400, 64, 8).map((vector, i) => ({ id: `full-${i}`, vector, metadata: { text: 'x'.repeat(2000) } }));
  const r = await raw(`${svc.indexUrl()}/upsert`, svc.token(), JSON.stringify(big));
  assert.equal(r.status, 507, JSON.stringify(r.body));
  assert.match(r.body.error, /disk .*is full/);
  const again = await fetch(`${svc.indexUrl()}/upsert`, { method: 'POST', headers: { authorization: `Bearer ${svc.token()}` }, body: JSON.stringify(big) });
  assert.equal(again.status, 507);
  assert.ok(Number(again.headers.get('retry-after')) > 0, 'Retry-After');
  await again.arrayBuffer();
  await assert.rejects(index.upsert(big), /disk .*is full/);
  // reads keep working meanwhile
  assert.equal((await index.fetch(['before-0']))[0]?.id, 'before-0');
  await assertFailedWritesInvisible(svc, acked, big);

  // space returns: the same write succeeds
  db.pragma('max_page_count = 1073741823');
  assert.equal(await index.upsert(big), 'Success');
}

/** Writes refused for a full disk are not visible to reads, and changes to existing records neither. */
async function assertFailedWritesInvisible(
  svc: Awaited<ReturnType<typeof startVector>>,
  acked: { id: string; vector: number[]; metadata: { i: number } }[],
  big: { id: string; vector: number[]; metadata: { text: string } }[],
): Promise<void> {
  const index = svc.client();
  assert.deepEqual(await index.fetch(['full-0', 'full-399']), [null, null]);
  const [top] = await index.query({ vector: big[0].vector, topK: 1 });
  assert.notEqual(top.id, 'full-0');
  assert.deepEqual(await index.query({ vector: big[0].vector, topK: 5, filter: "text GLOB 'x*'" }), []);
  assert.equal((await index.info()).vectorCount, acked.length);
  const page = await index.range({ cursor: 0, limit: 1000 });
  assert.equal(page.vectors.length, acked.length);
  // One upsert: first a rewrite of an existing record (same sizes: fits in its page), then new
  // records too large for the disk. The rewrite succeeds in SQLite before the batch fails, and
  // the whole write is rolled back: the record keeps its stored vector and metadata in memory too.
  const r = await raw(`${svc.indexUrl()}/upsert`, svc.token(), JSON.stringify([
    { id: 'before-3', vector: big[0].vector, metadata: { i: 9 } },
    { id: 'sneak', vector: big[1].vector, metadata: { i: 8 } },
    ...big.slice(2, 40).map((b) => ({ ...b, metadata: { text: 'y'.repeat(20_000) } })),
  ]));
  assert.equal(r.status, 507, JSON.stringify(r.body));
  const kept = await index.fetch(['before-3', 'sneak'], { includeMetadata: true, includeVectors: true });
  assert.deepEqual(kept[0]?.metadata, { i: 3 });
  assert.deepEqual(kept[0]?.vector?.map(Math.fround), acked[3].vector.map(Math.fround));
  assert.equal(kept[1], null);
  const [self] = await index.query({ vector: acked[3].vector, topK: 1 });
  assert.equal(self.id, 'before-3');
  const [near] = await index.query({ vector: big[0].vector, topK: 1, includeMetadata: true });
  assert.notEqual(near.id, 'before-3');
  assert.deepEqual((await index.query({ vector: big[0].vector, topK: 5, filter: 'i = 9 OR i = 8' })).map((h) => h.id).sort(), ['before-8', 'before-9']);
  // a namespace the failed write would have created does not appear
  await assert.rejects(index.upsert(big, { namespace: 'born-full' }), /disk .*is full/);
  assert.equal((await index.listNamespaces()).includes('born-full'), false);
  assert.deepEqual(await index.fetch(['full-0'], { namespace: 'born-full' }), [null]);
}

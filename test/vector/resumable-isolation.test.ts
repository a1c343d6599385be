/**
 * Resumable queries belong to their index: `resumable-query-next` / `-end` with a token of another
 * index (even the default index's) answer "does not exist"; the active-query table is bounded per
 * index (1000, then 429), so a read-only client of one index cannot lock out the others.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { MAX_SESSIONS_PER_INDEX } from '../../src/vector/http/resumable.js';
import { raw, startVector } from './helpers.js';

let svc: Awaited<ReturnType<typeof startVector>>;

before(async () => {
  svc = await startVector([{ name: 'other', type: 'DENSE', dimension: 4, metric: 'COSINE' }], { env: { SVC_VECTOR_DIMENSION: '4' } });
  const vectors = Array.from({ length: 8 }, (_, i) => ({ id: `v${i}`, vector: [1, i, i * i, 1] }));
  await svc.client('default').upsert(vectors);
  await svc.client('other').upsert(vectors.map((v) => ({ ...v, id: `secret-${v.id}` })));
});
after(async () => {
  await svc?.close();
});

const start = (name: string, token: string, maxIdle?: number) =>
  raw(`${svc.indexUrl(name)}/resumable-query`, token, JSON.stringify({ vector: [1, 2, 3, 4], topK: 1, maxIdle }));

describe('resumable query isolation', () => {
  test("another index's token cannot read or end a query", async () => {
    const started = await start('other', svc.token('other', true));
    assert.equal(started.status, 200, JSON.stringify(started.body));
    const uuid = started.body.result.uuid;
    assert.equal(typeof uuid, 'string');
    for (const [name, readonly] of [['default', true], ['default', false]] as const) {
      const next = await raw(`${svc.indexUrl(name)}/resumable-query-next`, svc.token(name, readonly), JSON.stringify({ uuid, additionalK: 5 }));
      assert.equal(next.status, 400, `next with ${name} ${readonly ? 'read-only' : 'standard'} token: ${JSON.stringify(next.body)}`);
      assert.match(next.body.error, /does not exist or has expired/);
      const end = await raw(`${svc.indexUrl(name)}/resumable-query-end`, svc.token(name, readonly), JSON.stringify({ uuid }));
      assert.equal(end.status, 400);
    }
    // the owner still reads it: nothing was consumed or ended by the attempts above
    const mine = await raw(`${svc.indexUrl('other')}/resumable-query-next`, svc.token('other', true), JSON.stringify({ uuid, additionalK: 3 }));
    assert.equal(mine.status, 200);
    assert.equal(mine.body.result.length, 3);
    assert.ok(mine.body.result.every((r: { id: string }) => r.id.startsWith('secret-')));
    assert.equal((await raw(`${svc.indexUrl('other')}/resumable-query-end`, svc.token('other'), JSON.stringify({ uuid }))).body.result, 'Success');
  });

  test('the table is bounded per index: a read-only client filling one index does not lock out another', async () => {
    const ro = svc.token('default', true);
    const uuids: string[] = [];
    for (let i = 0; i < MAX_SESSIONS_PER_INDEX; i += 50) {
      const batch = await Promise.all(Array.from({ length: Math.min(50, MAX_SESSIONS_PER_INDEX - i) }, () => start('default', ro, 1e9)));
      for (const r of batch) {
        assert.equal(r.status, 200, JSON.stringify(r.body));
        uuids.push(r.body.result.uuid);
      }
    }
    const full = await start('default', ro);
    assert.equal(full.status, 429, JSON.stringify(full.body));
    assert.match(full.body.error, /Too many active resumable queries/);
    // the other index is not affected, through the SDK
    const { result, fetchNext, stop } = await svc.client('other', true).resumableQuery({ vector: [1, 2, 3, 4], topK: 2, maxIdle: 60 });
    assert.equal(result.length, 2);
    assert.equal((await fetchNext(2)).length, 2);
    assert.equal(await stop(), 'Success');
    // ending one frees a place on the full index
    assert.equal((await raw(`${svc.indexUrl()}/resumable-query-end`, ro, JSON.stringify({ uuid: uuids.pop() }))).status, 200);
    const again = await svc.client('default', true).resumableQuery({ vector: [1, 2, 3, 4], topK: 1, maxIdle: 60 });
    assert.equal(again.result.length, 1);
    await again.stop();
    for (const uuid of uuids) await raw(`${svc.indexUrl()}/resumable-query-end`, ro, JSON.stringify({ uuid }));
  });
});

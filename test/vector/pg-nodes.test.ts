/**
 * The vector area on PostgreSQL (`SVC_VECTOR_DATABASE_URL`): several svc nodes on one database,
 * each serving every index from its own memory, through the official `@upstash/vector` SDK.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startTestPostgres, type TestPostgres } from '../helpers/postgres.js';
import { randomVectors, startVector } from './helpers.js';
import { waitFor } from '../helpers/wait.js';

let pg: TestPostgres;
before(async () => {
  pg = await startTestPostgres();
});
after(async () => {
  await pg?.stop();
});

type Node = Awaited<ReturnType<typeof startVector>>;

async function nodes(url: string, n: number, indexes: object[] = []): Promise<Node[]> {
  const out: Node[] = [];
  for (let i = 0; i < n; i++) out.push(await startVector(indexes, { env: { SVC_VECTOR_DATABASE_URL: url, SVC_VECTOR_DATABASE_SCHEMA: 'public', SVC_VECTOR_DIMENSION: '8' } }));
  return out;
}

test('three nodes: writes spread over all nodes, every node answers the same once caught up', async () => {
  const url = await pg.newDatabase();
  const ns = await nodes(url, 3);
  try {
    const vecs = randomVectors(300, 8, 1);
    await Promise.all(
      vecs.map((v, i) => ns[i % 3].client().upsert({ id: `v${i}`, vector: v, metadata: { i } })),
    );
    for (const n of ns) {
      await waitFor("300 vectors on every node", async () => (await n.client().info()).vectorCount === 300, 30_000);
    }
    const q = randomVectors(5, 8, 2);
    for (const v of q) {
      const answers = await Promise.all(ns.map((n) => n.client().query({ vector: v, topK: 10 })));
      const ids = answers.map((a) => a.map((r) => r.id));
      assert.deepEqual(ids[1], ids[0]);
      assert.deepEqual(ids[2], ids[0]);
    }
    const ranges = await Promise.all(ns.map((n) => n.client().range({ cursor: 0, limit: 1000 })));
    assert.deepEqual(ranges[1].vectors.map((r) => r.id), ranges[0].vectors.map((r) => r.id));
    assert.deepEqual(ranges[2].vectors.map((r) => r.id), ranges[0].vectors.map((r) => r.id));
  } finally {
    for (const n of ns) await n.close();
  }
});

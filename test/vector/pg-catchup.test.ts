/**
 * The catch-up read of the vector area on PostgreSQL (`store-pg.ts` `CHANGES_SQL`: a page of an
 * index's changes, each upsert with its record when the record still holds that write), which
 * every follower runs on each notification and a writer runs before each group commit.
 *
 * - Its plan is bounded by the page whatever the statistics say: PostgreSQL's own
 *   `EXPLAIN (ANALYZE)` of the statement on a real database, written through the real write path
 *   (`VectorIndex` on `PgIndexLog`, writes of 100 as a bench writer sends them), with no
 *   statistics yet (a fresh database before autovacuum's first ANALYZE), after ANALYZE, and with
 *   statistics that describe another index only. Every read of `vector_records` goes through the
 *   primary key, at most once per change of the page, with no row filtered out; before, a planner
 *   without statistics read `vector_records_pos` and filtered every record of the namespace for
 *   each change (a follower fell 8-13 s behind a fast writer).
 * - Its answers: a record rewritten later or deleted is not returned with the older write, and
 *   the records of another index with the same namespace, id and sequence number never are.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { createLogger } from '../../src/logger.js';
import { VectorIndex } from '../../src/vector/engine/vector-index.js';
import { CHANGES_SQL, PgVectorStore } from '../../src/vector/engine/store-pg.js';
import type { IndexDefinition } from '../../src/vector/definitions.js';
import { startTestPostgres, withPg, type TestPostgres } from '../helpers/postgres.js';
import { tempDir } from '../helpers/env.js';
import { denseDefinition, randomVectors } from './helpers.js';

let pg: TestPostgres;
before(async () => {
  pg = await startTestPostgres();
});
after(async () => {
  await pg?.stop();
});

const logger = createLogger('silent');

/** A plan node of `EXPLAIN (FORMAT JSON)`, with the fields read here. */
interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Actual Loops'?: number;
  'Actual Rows'?: number;
  'Rows Removed by Filter'?: number;
  Plans?: PlanNode[];
}

/** Every node of `plan` (depth first). */
function nodes(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(nodes)];
}

/**
 * Runs the catch-up read of `index` after `from` under `EXPLAIN (ANALYZE)` and asserts its bounds:
 * every scan of `vector_records` is an index scan of the primary key, run at most once per change
 * read, with no row filtered out; every scan of `vector_changes` uses its primary key. Resolves to
 * the number of changes read.
 */
async function assertBounded(url: string, index: string, from: number, what: string): Promise<number> {
  const plan = await withPg(url, async (c) => {
    const r = await c.query<{ 'QUERY PLAN': { Plan: PlanNode }[] }>(`EXPLAIN (ANALYZE, FORMAT JSON) ${CHANGES_SQL}`, [index, from]);
    return r.rows[0]['QUERY PLAN'][0].Plan;
  });
  const all = nodes(plan);
  const shown = JSON.stringify(all.map((n) => [n['Node Type'], n['Relation Name'], n['Index Name'], n['Actual Loops'], n['Actual Rows'], n['Rows Removed by Filter']]));
  const changes = plan['Actual Rows']!;
  const records = all.filter((n) => n['Relation Name'] === 'vector_records');
  assert.ok(records.length > 0, `${what}: the records are read (${shown})`);
  for (const n of records) {
    assert.equal(n['Node Type'], 'Index Scan', `${what}: records read by an index scan (${shown})`);
    assert.equal(n['Index Name'], 'vector_records_pkey', `${what}: records read through the primary key (${shown})`);
    assert.ok(n['Actual Loops']! <= changes, `${what}: at most one record lookup per change (${shown})`);
    assert.equal(n['Rows Removed by Filter'] ?? 0, 0, `${what}: no record read and thrown away (${shown})`);
  }
  for (const n of all.filter((x) => x['Relation Name'] === 'vector_changes')) {
    assert.ok(/vector_changes_pkey/.test(JSON.stringify(n)), `${what}: changes read through their primary key (${shown})`);
    assert.equal(n['Rows Removed by Filter'] ?? 0, 0, `${what}: no change read and thrown away (${shown})`);
  }
  return changes;
}

/** Upserts `count` records `<prefix><i>` into `idx` in writes of 100 (what the bench's writer sends). */
async function write(idx: VectorIndex, prefix: string, count: number, seed: number): Promise<void> {
  const vecs = randomVectors(count, 8, seed);
  for (let b = 0; b < count; b += 100) await idx.upsert('', vecs.slice(b, b + 100).map((vector, i) => ({ id: `${prefix}${b + i}`, vector })));
}

/**
 * Runs `fn` with a store on a new database and an opener of `VectorIndex`es on it (one data dir);
 * closes them all after. `prepare` runs on the new database before the indexes are registered.
 */
async function onNewDatabase(
  defs: IndexDefinition[],
  fn: (url: string, open: (def: IndexDefinition) => Promise<VectorIndex>, db: PgVectorStore) => Promise<void>,
  prepare?: (url: string) => Promise<unknown>,
): Promise<void> {
  const url = await pg.newDatabase();
  const db = await PgVectorStore.open(url, 'public', logger);
  const dir = tempDir();
  const indexes: VectorIndex[] = [];
  try {
    await prepare?.(url);
    await db.registerIndexes(defs);
    await fn(url, async (def) => {
      const idx = await VectorIndex.open(def, dir.dir, logger, db.index(def.name));
      indexes.push(idx);
      return idx;
    }, db);
  } finally {
    for (const idx of indexes) await idx.close();
    await db.close();
    dir.cleanup();
  }
}

test('catch-up read: each record is read through the primary key, once per change of the page, with no statistics, after ANALYZE and with statistics of another index', async () => {
  const first = denseDefinition(8);
  const second: IndexDefinition = { ...first, name: 'second' };
  // no ANALYZE but the test's own: the first case is a fresh database's
  const noAutovacuum = (url: string) => withPg(url, (c) => c.query('ALTER TABLE vector_records SET (autovacuum_enabled = off); ALTER TABLE vector_changes SET (autovacuum_enabled = off)'));
  await onNewDatabase([first, second], async (url, open) => {
    const a = await open(first);
    await write(a, 'v', 4000, 1);
    assert.equal(a.seq, 4000);
    const stats = await withPg(url, (c) => c.query("SELECT count(*)::int AS n FROM pg_stats WHERE tablename IN ('vector_records', 'vector_changes')"));
    assert.equal(stats.rows[0].n, 0, 'no statistics yet');
    assert.equal(await assertBounded(url, 'default', 3500, 'no statistics'), 500);

    await withPg(url, (c) => c.query('ANALYZE vector_records, vector_changes'));
    assert.equal(await assertBounded(url, 'default', 3500, 'after ANALYZE'), 500);

    // the statistics describe index default only: index second grows past them
    await write(await open(second), 'w', 4000, 2);
    assert.equal(await assertBounded(url, 'second', 3500, 'statistics of another index'), 500);
  }, noAutovacuum);
});

test('catch-up read: an upsert comes with its record only while the record holds that write, never with another index\'s record', async () => {
  // index "later" sorts after "default": its records follow default's in the primary key's order
  const first: IndexDefinition = { ...denseDefinition(2), metric: 'EUCLIDEAN' };
  const later: IndexDefinition = { ...first, name: 'later' };
  await onNewDatabase([first, later], async (_url, open, db) => {
    const a = await open(first);
    const b = await open(later);
    // later: zz at sequence number 1, the same namespace (1) and id as default's first write
    await b.upsert('', [{ id: 'zz', vector: [9, 9] }]);
    await a.upsert('', [{ id: 'zz', vector: [1, 1] }]); // 1, deleted at 2: the next row in key order is later's zz (seq 1)
    await a.delete('', { ids: ['zz'] }); // 2
    await a.upsert('', [{ id: 'a', vector: [2, 2] }]); // 3, rewritten at 4
    await a.upsert('', [{ id: 'a', vector: [3, 3] }]); // 4
    await a.upsert('', [{ id: 'b', vector: [4, 4] }]); // 5
    const got = await db.index('default').changesSince(0);
    const vec = (v: Buffer | null | undefined) => (v ? [...new Float32Array(v.buffer.slice(v.byteOffset, v.byteOffset + v.byteLength))] : v);
    assert.deepEqual(
      got.map((c) => [c.seq, c.kind, c.id, c.record ? vec(c.record.vector) : 'no record']),
      [
        [1, 'upsert', 'zz', 'no record'],
        [2, 'delete', 'zz', 'no record'],
        [3, 'upsert', 'a', 'no record'],
        [4, 'upsert', 'a', [3, 3]],
        [5, 'upsert', 'b', [4, 4]],
      ],
    );
    assert.deepEqual((await db.index('default').changesSince(3)).map((c) => c.seq), [4, 5], 'a page after a sequence number');
    const other = await db.index('later').changesSince(0);
    assert.deepEqual(other.map((c) => [c.seq, c.id, vec(c.record?.vector)]), [[1, 'zz', [9, 9]]]);
  });
});

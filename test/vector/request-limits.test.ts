/**
 * What one vector request may make svc compute and send (docs/readme/vector.md, "Request
 * limits"), end to end through the official `@upstash/vector` SDK (raw HTTP where it checks
 * nothing more): `topK` and a resumable query's `topK` / `additionalK` above
 * `SVC_VECTOR_MAX_TOP_K` answer 400 naming the limit and the variable; a `range` `limit` above
 * `SVC_VECTOR_MAX_RANGE_LIMIT` is clamped and the SDK's loop over `nextCursor` still reads the whole
 * namespace; an array of queries longer than `SVC_VECTOR_MAX_BATCH_QUERIES`, or whose `topK` add up
 * to more than `SVC_VECTOR_MAX_BATCH_RESULTS`, answers 400; a `fetch` of more ids than
 * `SVC_VECTOR_MAX_FETCH_IDS` answers 400 (a delete by ids is not capped); a GLOB
 * pattern over 4,096 characters answers 400. One below each limit works. The same on the
 * PostgreSQL store (resumable queries kept in the database).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Index } from '@upstash/vector';
import { startTestPostgres, type TestPostgres } from '../helpers/postgres.js';
import { raw, startVector } from './helpers.js';

type Svc = Awaited<ReturnType<typeof startVector>>;

/** The error an SDK call throws (its message is the wire's `error` text), or fails when it succeeds. */
async function sdkError(what: string, call: () => Promise<unknown>): Promise<string> {
  try {
    await call();
  } catch (err) {
    return (err as Error).message;
  }
  return assert.fail(`${what}: no error`);
}

/** Every id of the namespace by the SDK's `range` loop with page size `limit`; also the pages' lengths. */
async function walk(index: Index, limit: number, namespace = ''): Promise<{ ids: string[]; pages: number[] }> {
  const ids: string[] = [];
  const pages: number[] = [];
  let cursor: string | number = 0;
  for (;;) {
    const page: { nextCursor: string; vectors: { id: string | number }[] } = await index.namespace(namespace).range({ cursor, limit });
    pages.push(page.vectors.length);
    ids.push(...page.vectors.map((v) => String(v.id)));
    if (page.nextCursor === '') return { ids, pages };
    cursor = page.nextCursor;
  }
}

/**
 * The checks with small limits (top K 50, range pages of 7, 5 queries per array) on `svc`, whose
 * default namespace holds ids `r0`…`r59` (2-d vectors).
 */
async function smallLimitChecks(svc: Svc): Promise<void> {
  const index = svc.client();
  const url = svc.indexUrl();
  const token = svc.token();

  // topK: above the limit 400 (SDK and raw), at it every record it asks for
  const over = await sdkError('topK 51', () => index.query({ vector: [1, 0], topK: 51 }));
  assert.equal(over, 'topK 51 is above the maximum of 50 (SVC_VECTOR_MAX_TOP_K); page through more results with a resumable query');
  const huge = await raw(`${url}/query`, token, JSON.stringify({ vector: [1, 0], topK: 1e9, includeMetadata: true }));
  assert.equal(huge.status, 400);
  assert.match(huge.body.error, /^topK 1000000000 is above the maximum of 50 \(SVC_VECTOR_MAX_TOP_K\)/);
  assert.equal(huge.body.status, 400);
  assert.equal((await index.query({ vector: [1, 0], topK: 50 })).length, 50);

  // a read-only token is refused the same way (the limit is not about writes)
  const ro = await raw(`${url}/query`, svc.token('default', true), JSON.stringify({ vector: [1, 0], topK: 51 }));
  assert.equal(ro.status, 400);

  // an array of queries: 6 > 5 refused before any runs, also when a later one has a too-large topK
  const q = (topK: number) => ({ vector: [1, 0], topK });
  const many = await sdkError('6 queries', () => index.queryMany([q(1), q(1), q(1), q(1), q(1), q(1)]));
  assert.equal(many, 'query: 6 queries in one request, at most 5 are allowed (SVC_VECTOR_MAX_BATCH_QUERIES); send them in several requests');
  const five = await index.queryMany([q(1), q(2), q(3), q(4), q(50)]);
  assert.deepEqual(five.map((r) => r.length), [1, 2, 3, 4, 50]);
  assert.match(await sdkError('topK 51 in an array', () => index.queryMany([q(1), q(51)])), /^topK 51 is above the maximum of 50/);
  // their topK add up to at most 60: 50 + 10 answers, 50 + 11 is refused before any runs
  assert.deepEqual((await index.queryMany([q(50), q(10)])).map((r) => r.length), [50, 10]);
  const sum = await sdkError('61 results in all', () => index.queryMany([q(50), q(11)]));
  assert.equal(sum, 'query: 2 queries ask for 61 results in all, at most 60 are allowed (SVC_VECTOR_MAX_BATCH_RESULTS); send them in several requests or lower topK');

  // resumable queries: start and next bounded by the same limit, one at it works
  assert.match(await sdkError('resumable topK 51', () => index.resumableQuery({ vector: [1, 0], topK: 51, maxIdle: 60 })), /^topK 51 is above the maximum of 50 \(SVC_VECTOR_MAX_TOP_K\)/);
  const rq = await index.resumableQuery({ vector: [1, 0], topK: 50, maxIdle: 60 });
  assert.equal(rq.result.length, 50);
  const nextOver = await sdkError('additionalK 51', () => rq.fetchNext(51));
  assert.equal(nextOver, 'additionalK 51 is above the maximum of 50 (SVC_VECTOR_MAX_TOP_K); fetch more results in several batches');
  const rest = await rq.fetchNext(50);
  assert.equal(rest.length, 10, 'the 10 records the first batch did not return');
  assert.equal(new Set([...rq.result, ...rest].map((r) => String(r.id))).size, 60);
  await rq.stop();

  // range: a larger limit is clamped to 7 with a cursor after the page; the SDK loop reads all 60
  const first = await index.range({ cursor: 0, limit: 1e12, includeMetadata: true });
  assert.equal(first.vectors.length, 7);
  assert.equal(first.nextCursor, '7');
  assert.deepEqual(first.vectors.map((v) => v.id), ['r0', 'r1', 'r2', 'r3', 'r4', 'r5', 'r6']);
  const all = await walk(index, 1_000_000);
  assert.deepEqual(all.ids, Array.from({ length: 60 }, (_, i) => `r${i}`));
  assert.deepEqual(all.pages, [7, 7, 7, 7, 7, 7, 7, 7, 4]);
  // below the limit: pages as asked
  assert.deepEqual((await walk(index, 6)).pages, Array(10).fill(6));
  // with a prefix: clamped pages of the matches only (r1, r10…r19: 11 ids)
  const p = await index.range({ cursor: 0, limit: 100, prefix: 'r1' });
  assert.deepEqual(p.vectors.map((v) => v.id), ['r1', 'r10', 'r11', 'r12', 'r13', 'r14', 'r15']);
  const p2 = await index.range({ cursor: p.nextCursor, limit: 100, prefix: 'r1' });
  assert.deepEqual(p2.vectors.map((v) => v.id), ['r16', 'r17', 'r18', 'r19']);
  assert.equal(p2.nextCursor, '');

  // fetch by ids: 21 > 20 refused before any is read (SDK and raw), 20 answer; a delete is not capped
  const ids = (n: number) => Array.from({ length: n }, (_, i) => `r${i}`);
  const fetchOver = await sdkError('fetch 21 ids', () => index.fetch(ids(21), { includeVectors: true }));
  assert.equal(fetchOver, 'fetch: 21 ids in one request, at most 20 are allowed (SVC_VECTOR_MAX_FETCH_IDS); fetch them in several requests, or page with range');
  const rawOver = await raw(`${url}/fetch`, token, JSON.stringify({ ids: Array.from({ length: 200_000 }, (_, i) => i), includeVectors: true }));
  assert.equal(rawOver.status, 400);
  assert.match(rawOver.body.error, /^fetch: 200000 ids in one request, at most 20 are allowed/);
  assert.deepEqual((await index.fetch(ids(20))).map((r) => r?.id), ids(20));
  assert.deepEqual(await index.delete(Array.from({ length: 30 }, (_, i) => `absent-${i}`)), { deleted: 0 });

  // GLOB: a pattern of 4,097 characters is refused, one of 4,096 matches
  const long = `*${'?'.repeat(4096)}`;
  const globOver = await sdkError('long GLOB', () => index.query({ vector: [1, 0], topK: 5, filter: `tag GLOB '${long}'` }));
  assert.equal(globOver, 'Invalid filter: GLOB pattern is 4097 characters long at position 9 (at most 4096 are allowed)');
  const hits = await index.query({ vector: [1, 0], topK: 5, filter: `tag GLOB '${long.slice(0, 4096)}'` });
  assert.deepEqual(hits.map((h) => h.id), ['r0'], 'only r0 has a tag of 4,095 characters or more');
}

/** Upserts ids `r0`…`r59` (2-d vectors; r0 with a 5,000-character `tag`). */
async function seed(svc: Svc): Promise<void> {
  await svc.client().upsert(Array.from({ length: 60 }, (_, i) => ({ id: `r${i}`, vector: [1, (i + 1) / 100], metadata: { tag: i === 0 ? 'x'.repeat(5000) : 'short' } })));
}

const SMALL = { SVC_VECTOR_DIMENSION: '2', SVC_VECTOR_MAX_TOP_K: '50', SVC_VECTOR_MAX_RANGE_LIMIT: '7', SVC_VECTOR_MAX_BATCH_QUERIES: '5', SVC_VECTOR_MAX_BATCH_RESULTS: '60', SVC_VECTOR_MAX_FETCH_IDS: '20' };

describe('vector request limits (SQLite store)', () => {
  let svc: Svc;
  before(async () => {
    svc = await startVector([], { env: SMALL });
    await seed(svc);
  });
  after(async () => {
    await svc?.close();
  });

  test('topK, resumable topK/additionalK, batch length, range page and GLOB length at and past configured limits', async () => {
    await smallLimitChecks(svc);
  });
});

describe('vector request limits at their defaults', () => {
  let svc: Svc;
  const N = 10_005;
  before(async () => {
    svc = await startVector([], { env: { SVC_VECTOR_DIMENSION: '2' } });
    const items = Array.from({ length: N }, (_, i) => ({ id: `d${i}`, vector: [Math.cos(i), Math.sin(i)] }));
    await svc.client().upsert(items);
  });
  after(async () => {
    await svc?.close();
  });

  test('topK 10,000 answers, 10,001 is 400; 1,000 queries in an array answer, 1,001 is 400, and so are 110,000 results in all', async () => {
    const index = svc.client();
    assert.equal((await index.query({ vector: [1, 0], topK: 10_000 })).length, 10_000);
    assert.match(await sdkError('topK 10001', () => index.query({ vector: [1, 0], topK: 10_001 })), /^topK 10001 is above the maximum of 10000 \(SVC_VECTOR_MAX_TOP_K\)/);
    const queries = (n: number) => Array.from({ length: n }, (_, i) => ({ vector: [Math.cos(i), Math.sin(i)], topK: 1 }));
    const answers = await index.queryMany(queries(1000));
    assert.equal(answers.length, 1000);
    assert.ok(answers.every((a) => a.length === 1 && a[0].score > 0.9999), 'each query finds its own point (or one as close on the circle)');
    assert.match(await sdkError('1001 queries', () => index.queryMany(queries(1001))), /^query: 1001 queries in one request, at most 1000 are allowed \(SVC_VECTOR_MAX_BATCH_QUERIES\)/);
    // 11 queries of topK 10,000 ask for 110,000 results: above the default 100,000 in all
    const wide = Array.from({ length: 11 }, () => ({ vector: [1, 0], topK: 10_000 }));
    assert.match(await sdkError('110,000 results', () => index.queryMany(wide)), /^query: 11 queries ask for 110000 results in all, at most 100000 are allowed \(SVC_VECTOR_MAX_BATCH_RESULTS\)/);
  });

  test('range limit 1e12 is clamped to 10,000 a page; the SDK loop reads all 10,005 records', async () => {
    const index = svc.client();
    const page = await index.range({ cursor: 0, limit: 1e12 });
    assert.equal(page.vectors.length, 10_000);
    assert.equal(page.nextCursor, '10000');
    const all = await walk(index, 1e12);
    assert.deepEqual(all.pages, [10_000, 5]);
    assert.deepEqual(all.ids, Array.from({ length: N }, (_, i) => `d${i}`));
  });
});

describe('vector request limits on the PostgreSQL store', () => {
  let pg: TestPostgres;
  let svc: Svc;
  before(async () => {
    pg = await startTestPostgres();
    const url = await pg.newDatabase();
    svc = await startVector([], { env: { ...SMALL, SVC_VECTOR_DATABASE_URL: url, SVC_VECTOR_DATABASE_SCHEMA: 'public' } });
    await seed(svc);
  });
  after(async () => {
    await svc?.close();
    await pg?.stop();
  });

  test('the same limits hold (resumable queries kept in the database)', async () => {
    await smallLimitChecks(svc);
  });
});

/**
 * Bad input to the vector area answers 400, never 500: JSON nested past MAX_JSON_DEPTH (metadata
 * 5,000 levels deep used to overflow the stack in JSON.stringify), deeply nested values where a
 * scalar is expected, filters with thousands of parentheses, bad percent-encoding; GLOB patterns
 * built to be slow (thousands of unclosed `[`, a star before thousands of `?` against a 60 kB
 * value) cost milliseconds of CPU, not seconds, and past 4,096 characters are refused.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { MAX_JSON_DEPTH } from '../../src/http/json-depth.js';
import { raw, startVector } from './helpers.js';

let svc: Awaited<ReturnType<typeof startVector>>;

before(async () => {
  svc = await startVector([], { env: { SVC_VECTOR_DIMENSION: '2' } });
});
after(async () => {
  await svc?.close();
});

/** `{"a":{"a":...{"a":1}}}` with `depth` objects. */
const nestedObject = (depth: number): string => '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);
const nestedArray = (depth: number): string => '['.repeat(depth) + ']'.repeat(depth);
const post = (endpoint: string, body: string) => raw(`${svc.indexUrl()}/${endpoint}`, svc.token(), body);

describe('vector hostile input', () => {
  test('metadata nested 5,000 levels deep: 400; nested within the limit: stored and read back', async () => {
    for (const endpoint of ['upsert', 'update']) {
      const r = await post(endpoint, `{"id":"deep","vector":[1,0],"metadata":${nestedObject(5000)}}`);
      assert.equal(r.status, 400, `${endpoint}: ${JSON.stringify(r.body)}`);
      assert.match(r.body.error, new RegExp(`nested deeper than ${MAX_JSON_DEPTH} levels`));
    }
    // the body itself is one level, so metadata may nest MAX_JSON_DEPTH - 1 levels
    const ok = await post('upsert', `{"id":"ok","vector":[1,0],"metadata":${nestedObject(MAX_JSON_DEPTH - 1)}}`);
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
    const got = await svc.client().fetch(['ok'], { includeMetadata: true });
    let m: any = got[0]?.metadata;
    let depth = 0;
    while (m && typeof m === 'object') {
      m = m.a;
      depth++;
    }
    assert.equal(depth, MAX_JSON_DEPTH - 1);
    const over = await post('upsert', `{"id":"over","vector":[1,0],"metadata":${nestedObject(MAX_JSON_DEPTH)}}`);
    assert.equal(over.status, 400);
  });

  test('deep arrays where scalars are expected, deep filters, bad namespaces: 400', async () => {
    for (const [endpoint, body] of [
      ['range', `{"cursor":${nestedArray(5000)},"limit":1}`],
      ['range', `{"cursor":${nestedArray(50)},"limit":1}`],
      ['query', `{"vector":${nestedArray(5000)},"topK":1}`],
      ['fetch', `{"ids":${nestedArray(5000)}}`],
      ['query', `{"vector":[1,0],"topK":1,"filter":"${'('.repeat(5000)}a = 1${')'.repeat(5000)}"}`],
      ['query', `{"vector":[1,0],"topK":1,"filter":"${'NOT ('.repeat(3000)}a = 1${')'.repeat(3000)}"}`],
      ['upsert', nestedArray(100_000)],
    ] as const) {
      const r = await post(endpoint, body);
      assert.equal(r.status, 400, `${endpoint} ${body.slice(0, 60)}: ${r.status} ${JSON.stringify(r.body).slice(0, 200)}`);
    }
    const bad = await raw(`${svc.indexUrl()}/upsert/%E0%A4%A`, svc.token(), '{"id":"x","vector":[1,0]}');
    assert.equal(bad.status, 400);
    // still serving
    const q = await svc.client().query({ vector: [1, 0], topK: 1 });
    assert.equal(q.length, 1);
  });
  test('GLOB patterns built to be slow are answered within a CPU bound (linear parse, bit-parallel match) or refused past 4,096 characters', async () => {
    // one record with a 60 kB string: the matcher's work is proportional to it
    const up = await post('upsert', JSON.stringify([{ id: 'long', vector: [1, 0], metadata: { x: 'a'.repeat(60_000) } }]));
    assert.equal(up.status, 200, JSON.stringify(up.body));
    /** CPU seconds this process (svc runs in it) spends on one filtered query. */
    const cpuOf = async (filter: string): Promise<number> => {
      const before = process.cpuUsage();
      const r = await post('query', JSON.stringify({ vector: [1, 0], topK: 5, filter }));
      const used = process.cpuUsage(before);
      assert.equal(r.status, 200, JSON.stringify(r.body));
      assert.deepEqual(r.body.result, []);
      return (used.user + used.system) / 1e6;
    };
    // filter-sized patterns (16,381 unclosed sets; a star before 65,500 '?', about 0.9 CPU-s per
    // record against this value) are refused before anything is matched
    for (const pattern of ['[a-z'.repeat(16_381), `*${'?'.repeat(65_500)}b`]) {
      const r = await post('query', JSON.stringify({ vector: [1, 0], topK: 5, filter: `x GLOB '${pattern}'` }));
      assert.equal(r.status, 400);
      assert.equal(r.body.error, `Invalid filter: GLOB pattern is ${pattern.length} characters long at position 7 (at most 4096 are allowed)`);
    }
    // 1,024 unclosed sets (4,096 characters): each used to be scanned to the end of the pattern
    const unclosed = await cpuOf(`x GLOB '${'[a-z'.repeat(1024)}'`);
    assert.ok(unclosed < 1.5, `unclosed sets: ${unclosed.toFixed(2)} CPU-s`);
    // a star before 4,094 '?': the tokens after the star used to be re-run from each of the 60,000 positions
    const stars = await cpuOf(`x GLOB '*${'?'.repeat(4094)}b'`);
    assert.ok(stars < 1.5, `star and '?' run: ${stars.toFixed(2)} CPU-s`);
    // still right: the same kind of pattern matches where it should
    const hit = await post('query', JSON.stringify({ vector: [1, 0], topK: 5, filter: `x GLOB '*${'?'.repeat(1000)}'` }));
    assert.deepEqual(hit.body.result.map((h: { id: string }) => h.id), ['long']);
  });
});

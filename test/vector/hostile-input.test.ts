/**
 * Bad input to the vector area answers 400, never 500: JSON nested past MAX_JSON_DEPTH (metadata
 * 5,000 levels deep used to overflow the stack in JSON.stringify), deeply nested values where a
 * scalar is expected, filters with thousands of parentheses, bad percent-encoding.
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
});

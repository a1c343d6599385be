/**
 * A small seeded fuzz run (300 hostile requests per area, `test/fuzz/fuzz.ts`): no 5xx except
 * 503 with Retry-After / 507, no crash, every area answers correctly afterwards. `npm run fuzz`
 * runs 10,000 per area.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { fuzzFreshSvc } from './run.js';

test('300 hostile requests per area: no 5xx, no crash, correct answers afterwards', async () => {
  const seed = Number(process.env.SVC_FUZZ_SEED ?? 1);
  const run = await fuzzFreshSvc(seed, Number(process.env.SVC_FUZZ_REQUESTS ?? 300));
  assert.deepEqual(run.crashes, []);
  assert.deepEqual(run.failures, [], `seed ${seed}: ${run.failures.length} failures`);
  assert.deepEqual(run.afterwards, []);
  assert.ok(run.requests >= 1200);
});

/**
 * The vector area hands free malloc memory back after a burst of writes (src/vector/index.ts):
 * malloc_trim once the writes have been quiet for MEMORY_TRIM_QUIET_MS, again after the next major
 * GC, and not while writes go on. Observed through the area's debug log calls (the real trims run).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import v8 from 'node:v8';
import vm from 'node:vm';
import { MEMORY_TRIM_QUIET_MS, TRIM_CHECK_MS } from '../../src/vector/index.js';
import { randomVectors, startVector } from './helpers.js';

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

test('malloc_trim runs once writes are quiet and after the next major GC, not during writes', { timeout: 60_000 }, async () => {
  const svc = await startVector([], { env: { SVC_VECTOR_DIMENSION: '16' } });
  try {
    const trims: { when: string; released: boolean }[] = [];
    const logger = svc.ctx.logger as unknown as { debug: (o: object, msg: string) => void };
    logger.debug = (o, msg) => {
      if (msg.includes('free memory handed back')) trims.push(o as { when: string; released: boolean });
    };
    const index = svc.client();
    const vs = randomVectors(400, 16, 61);
    const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
    // writes more often than the quiet time: no trim
    const until = performance.now() + MEMORY_TRIM_QUIET_MS + 3 * TRIM_CHECK_MS;
    for (let i = 0; performance.now() < until; i = (i + 1) % 400) {
      await index.upsert({ id: String(i), vector: vs[i] });
      await sleep(TRIM_CHECK_MS / 2);
    }
    assert.equal(trims.length, 0, 'no trim while writes arrive');
    const deadline = performance.now() + MEMORY_TRIM_QUIET_MS + 10 * TRIM_CHECK_MS;
    while (trims.length === 0 && performance.now() < deadline) await sleep(TRIM_CHECK_MS / 2);
    assert.equal(trims[0]?.when, 'writes quiet');
    assert.equal(typeof trims[0].released, 'boolean');
    await sleep(3 * TRIM_CHECK_MS);
    assert.equal(trims.length, 1, 'one trim per burst until a major GC');
    gc();
    const gcDeadline = performance.now() + 5000;
    while (trims.length < 2 && performance.now() < gcDeadline) await sleep(50);
    assert.equal(trims[1]?.when, 'major GC after writes');
    gc();
    await sleep(500);
    assert.equal(trims.length, 2, 'once per burst after a GC');
  } finally {
    await svc.close();
  }
});

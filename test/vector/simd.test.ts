/**
 * The SIMD scan kernel of filtered queries (`src/vector/engine/simd.ts`) against the JavaScript
 * loop it replaces: codes move into WebAssembly memory when a namespace grows past
 * `SIMD_MIN_BYTES`, batch dot products agree with the scalar ones, padding of dimensions that are
 * not a multiple of 16 is invisible, and snapshots round-trip.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { QuantizedVectors, SIMD_MIN_BYTES, storedForm } from '../../src/vector/engine/dense.js';
import { randomVectors } from './helpers.js';

test('codes move to the SIMD kernel past SIMD_MIN_BYTES; batch dots agree with the scalar loop (d = 100, padded to 112)', () => {
  const d = 100;
  const q = new QuantizedVectors(d, 16);
  assert.equal(q.stride, 112);
  const n = Math.ceil(SIMD_MIN_BYTES / q.stride) + 500;
  const vs = randomVectors(n, d, 21).map((v) => storedForm('COSINE', v));
  vs.forEach((v, i) => {
    q.set(i, v);
    if (i === 200) assert.equal(q.simd, false, 'small namespaces stay in JavaScript');
  });
  assert.equal(q.simd, true);
  const query = Float32Array.from(storedForm('COSINE', randomVectors(1, d, 22)[0]));
  const labels = Int32Array.from({ length: n }, (_, i) => n - 1 - i);
  const out = new Float32Array(n);
  q.dots(query, labels, n, out);
  let worst = 0;
  for (let i = 0; i < n; i++) worst = Math.max(worst, Math.abs(out[i] - q.dot(query, labels[i])));
  assert.ok(worst < 1e-4, `largest difference ${worst}`);
  // the codes written before the move are still there: their dots match the float32 ones roughly
  const exact = (l: number) => vs[l].reduce((s, x, j) => s + x * query[j], 0);
  for (const l of [0, 1, 200, n - 1]) assert.ok(Math.abs(q.dot(query, l) - exact(l)) < 0.02, `label ${l}`);
  // growing inside the kernel's memory keeps codes, scales and norms (they move to new offsets)
  const cap = q.capacity;
  const far = storedForm('COSINE', randomVectors(1, d, 23)[0]);
  q.set(cap * 2, far);
  assert.ok(q.capacity > cap * 2);
  for (const l of [0, 1, 200, n - 1]) assert.ok(Math.abs(q.dot(query, l) - exact(l)) < 0.02, `label ${l} after growth`);
  const farDot = far.reduce((s, x, j) => s + x * query[j], 0);
  assert.ok(Math.abs(q.dot(query, cap * 2) - farDot) < 0.02);
  const grown = new Float32Array(n);
  q.dots(query, labels, n, grown);
  assert.deepEqual(grown, out);
  // snapshot round trip (codes in stride layout)
  const copy = QuantizedVectors.deserialize(Buffer.concat(q.serialize(n)), d, n);
  assert.equal(copy.simd, true);
  const again = new Float32Array(n);
  copy.dots(query, labels, n, again);
  assert.deepEqual(again, out);
  assert.throws(() => QuantizedVectors.deserialize(Buffer.concat(q.serialize(n)), d + 16, n), /size mismatch/);
});

test('select keeps exactly the keys under the threshold, in input order, on the kernel and in JavaScript', () => {
  const d = 40;
  for (const n of [300, Math.ceil(SIMD_MIN_BYTES / 48) + 10]) {
    const q = new QuantizedVectors(d, 16);
    const vs = randomVectors(n, d, 41).map((v) => storedForm('EUCLIDEAN', v));
    vs.forEach((v, i) => q.set(i, v));
    assert.equal(q.simd, n > 300);
    const query = Float32Array.from(randomVectors(1, d, 42)[0]);
    const labels = Int32Array.from({ length: n }, (_, i) => (i * 7) % n);
    // l2 keys: -2·dot + |v|²
    const all = q.select(query, labels, n, -2, 1, Infinity);
    assert.equal(all.n, n);
    const keys = Array.from(all.keys);
    assert.deepEqual(Array.from(all.labels), Array.from(labels));
    for (let i = 0; i < n; i += 37) {
      const want = -2 * q.dot(query, labels[i]) + q.norm2[labels[i]];
      assert.ok(Math.abs(keys[i] - want) < 1e-3, `key ${i}: ${keys[i]} vs ${want}`);
    }
    const threshold = [...keys].sort((a, b) => a - b)[20];
    const some = q.select(query, labels, n, -2, 1, threshold);
    const expect = keys.map((k, i) => [k, labels[i]] as const).filter(([k]) => k < threshold);
    assert.equal(some.n, expect.length);
    assert.deepEqual(Array.from(some.labels), expect.map(([, l]) => l));
  }
});

/**
 * Micro-benchmark of the compiled filter evaluator (src/vector/filter): time to evaluate typical
 * filters over 100k in-memory metadata records, the cost a full-scan filtered query or a
 * `delete {filter}` pays per namespace. Reports ms per 100k records (median of 5 passes) as test
 * diagnostics and fails only on a generous bound (an order of magnitude above what this 2-core
 * machine measures) so that an accidental re-interpretation per record or a pathological slowdown
 * is caught without timing flakiness.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { compileFilter } from '../../src/vector/filter/index.js';

const N = 100_000;
const GENRES = ['drama', 'comedy', 'horror', 'documentary', 'action'];

function records(): Record<string, unknown>[] {
  let seed = 7;
  const rnd = (): number => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff);
  return Array.from({ length: N }, (_, i) => ({
    id: `doc-${i}`,
    genre: GENRES[Math.floor(rnd() * GENRES.length)],
    year: 1950 + Math.floor(rnd() * 75),
    rating: Math.round(rnd() * 100) / 10,
    tags: ['a', 'b', 'c', 'd', 'e', 'f'].filter(() => rnd() < 0.3),
    info: { lang: rnd() < 0.5 ? 'en' : 'de', country: { code: rnd() < 0.2 ? 'US' : 'FR' } },
    title: `Title ${i} ${GENRES[i % 5]}`,
    published: rnd() < 0.8,
  }));
}

test('evaluating filters over 100k records', (t) => {
  const data = records();
  const filters = {
    equality: "genre = 'drama'",
    typical: "genre IN ('drama', 'comedy') AND year >= 2000 AND info.lang = 'en' AND tags CONTAINS 'c'",
    nested: "(info.country.code = 'US' OR rating > 8.5) AND published = true AND HAS FIELD tags[0]",
    glob: "title GLOB 'Title 1*drama' OR title GLOB '*[0-9]9 com*'",
  };
  const bound = Number(process.env.FILTER_BENCH_BOUND_MS ?? 1000);
  for (const [name, text] of Object.entries(filters)) {
    const f = compileFilter(text);
    let count = 0;
    const times: number[] = [];
    for (let pass = 0; pass < 6; pass++) {
      const t0 = performance.now();
      count = 0;
      for (let i = 0; i < N; i++) if (f.matches(data[i])) count++;
      if (pass > 0) times.push(performance.now() - t0); // pass 0 warms up the JIT
    }
    times.sort((a, b) => a - b);
    const median = times[2];
    t.diagnostic(`${name}: ${median.toFixed(1)} ms / 100k records (${((median * 1e6) / N).toFixed(0)} ns each), ${count} matches — ${text}`);
    assert.ok(count > 0 && count < N, `${name} should select some but not all records (${count})`);
    assert.ok(median < bound, `${name}: ${median.toFixed(1)} ms per 100k records exceeds ${bound} ms`);
  }
});

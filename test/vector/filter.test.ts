/**
 * Unit tests of the metadata filter language (src/vector/filter; user docs in docs/readme/vector-filter.md):
 * every operator, the reference's edge table (one test per row, on its 4 Mastra documents),
 * precedence, parentheses, paths, literals and escapes, GLOB, syntax errors with positions,
 * limits and the public helpers. Pure and fast: no server.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  compileFilter,
  estimateSelectivity,
  FILTER_LIMITS,
  FilterSyntaxError,
  isFilterSyntaxError,
  parseFilter,
  printFilter,
} from '../../src/vector/filter/index.js';

/** The four documents of Mastra's Upstash integration test. */
const CITIES: Record<string, unknown>[] = [
  {
    name: 'Istanbul',
    population: 15460000,
    location: { continent: 'Asia', coordinates: { latitude: 41.0082, longitude: 28.9784 } },
    tags: ['historic', 'coastal', 'metropolitan'],
    industries: ['Tourism', 'Finance', 'Technology'],
    founded: 330,
    isCapital: false,
    lastCensus: null,
  },
  {
    name: 'Berlin',
    population: 3669495,
    location: { continent: 'Europe', coordinates: { latitude: 52.52, longitude: 13.405 } },
    tags: ['historic', 'cultural', 'metropolitan'],
    industries: ['Technology', 'Arts', 'Tourism'],
    founded: 1237,
    isCapital: true,
    lastCensus: 2021,
  },
  {
    name: 'San Francisco',
    population: 873965,
    location: { continent: 'North America', coordinates: { latitude: 37.7749, longitude: -122.4194 } },
    tags: ['coastal', 'tech', 'metropolitan'],
    industries: ['Technology', 'Finance', 'Tourism'],
    founded: 1776,
    isCapital: false,
    lastCensus: 2020,
  },
  {
    name: "City's Name",
    description: 'Contains "quotes"',
    population: 0,
    temperature: -10,
    microscopicDetail: 1e-10,
    isCapital: false,
    tags: ['nothing'],
  },
];

/** Names of the cities matching `filter`. */
function hits(filter: string, docs = CITIES): string[] {
  const f = compileFilter(filter);
  return docs.filter((d) => f.matches(d)).map((d) => String(d.name));
}

/** Whether `filter` matches the single record `m`. */
function on(m: Record<string, unknown> | null | undefined, filter: string): boolean {
  return compileFilter(filter).matches(m);
}

/** Asserts a FilterSyntaxError at `position` whose message matches `re` and names the position. */
function throwsAt(filter: string, position: number, re?: RegExp): void {
  assert.throws(
    () => compileFilter(filter),
    (err: unknown) => {
      assert.ok(err instanceof FilterSyntaxError, `expected FilterSyntaxError for ${filter}`);
      assert.equal(err.position, position, `position for ${JSON.stringify(filter)}: ${err.message}`);
      assert.match(err.message, new RegExp(`^Invalid filter: .* at position ${position}\\b`));
      if (re) assert.match(err.message, re);
      return true;
    },
  );
}

describe('edge table of the filter language (Mastra documents, one test per row)', () => {
  test("name != 'Berlin' → 3", () => {
    assert.deepEqual(hits("name != 'Berlin'"), ['Istanbul', 'San Francisco', "City's Name"]);
  });
  test('!= on a missing field is false → 1 (SF)', () => {
    assert.deepEqual(hits("(location.continent != 'Asia' AND location.continent != 'Europe')"), ['San Francisco']);
  });
  test('range on nested coordinates, missing → false → 2', () => {
    assert.deepEqual(hits('(location.coordinates.latitude >= 40 AND location.coordinates.longitude <= 100)'), [
      'Istanbul',
      'Berlin',
    ]);
  });
  test('a null-valued key counts as present → 1', () => {
    assert.deepEqual(hits('(HAS NOT FIELD lastCensus AND HAS FIELD population)'), ["City's Name"]);
  });
  test('HAS FIELD on an object-valued path → 3', () => {
    assert.deepEqual(hits('HAS FIELD location.coordinates'), ['Istanbul', 'Berlin', 'San Francisco']);
  });
  test('HAS NOT FIELD unknownField → 4', () => {
    assert.equal(hits('HAS NOT FIELD unknownField').length, 4);
  });
  test("tags NOT CONTAINS 'tech' → 3", () => {
    assert.deepEqual(hits("tags NOT CONTAINS 'tech'"), ['Istanbul', 'Berlin', "City's Name"]);
  });
  test("name NOT GLOB 'A*' → 4", () => {
    assert.equal(hits("name NOT GLOB 'A*'").length, 4);
  });
  test('three NOT GLOBs → 1', () => {
    assert.deepEqual(hits("(name NOT GLOB '*bul' AND name NOT GLOB '*lin' AND name NOT GLOB '*cisco')"), ["City's Name"]);
  });
  test('both quote styles → 1 each', () => {
    assert.deepEqual(hits(`name = "City's Name"`), ["City's Name"]);
    assert.deepEqual(hits(`description = 'Contains "quotes"'`), ["City's Name"]);
    assert.deepEqual(hits(`description GLOB '*"quotes"*'`), ["City's Name"]);
  });
  test('number equality incl. zero, negatives, decimals, tiny decimals → 1 each', () => {
    assert.deepEqual(hits('population = 0'), ["City's Name"]);
    assert.deepEqual(hits('temperature = -10'), ["City's Name"]);
    assert.deepEqual(hits('location.coordinates.latitude = 41.0082'), ['Istanbul']);
    assert.deepEqual(hits('microscopicDetail = 0.0000000001'), ["City's Name"]);
  });
  test('array indexing [0] and [#-1] → 1 each', () => {
    assert.deepEqual(hits("industries[0] = 'Tourism'"), ['Istanbul']);
    assert.deepEqual(hits("industries[#-1] = 'Technology'"), ['Istanbul']);
  });
  test('industries[], industries[ and .invalidPath are syntax errors', () => {
    throwsAt("industries[] = 'Tourism'", 11, /empty index/);
    throwsAt("industries[ = 'Tourism'", 10, /unclosed '\['/);
    throwsAt(".invalidPath = 'value'", 0, /unexpected character '\.'/);
  });
  test("industries#-1] = 'Tourism' → 0 hits, no error (plain absent key)", () => {
    assert.deepEqual(hits("industries#-1] = 'Tourism'"), []);
    assert.deepEqual(hits("industries#-1] = 'x'", [{ name: 'k', 'industries#-1]': 'x' }]), ['k']);
  });
  test('HAS FIELD x OR/AND HAS NOT FIELD x are the constants TRUE / FALSE', () => {
    const t = compileFilter('(HAS FIELD empty OR HAS NOT FIELD empty)');
    const f = compileFilter('(HAS FIELD empty AND HAS NOT FIELD empty)');
    assert.equal(hits(t.source).length, 4);
    assert.equal(hits(f.source).length, 0);
    assert.equal(t.matchesAll, true);
    assert.equal(f.matchesNone, true);
    assert.equal(on({ empty: null }, f.source), false);
  });
  test('an IN list of 1000 values is rejected', () => {
    const list = Array.from({ length: 1000 }, (_, i) => `'value${i}'`).join(', ');
    throwsAt(`tags IN (${list})`, 8, /IN list too long.*at most 500/);
  });
  test('deep AND/OR nesting over missing keys → [] quickly, no error', () => {
    const deep = "(a.b.c.d.e = 1 AND (f.g.h.i.j = 2 OR (k.l.m.n.o = 3 AND p.q.r.s.t = 4)))";
    const combos = Array.from(
      { length: 10 },
      (_, i) => `(field${i} > ${i} OR array${i} CONTAINS 'value${i}' OR nested${i}.field IN ('value${i}', 'other${i}'))`,
    ).join(' AND ');
    const t0 = performance.now();
    assert.deepEqual(hits(deep), []);
    assert.deepEqual(hits(`(${combos})`), []);
    assert.ok(performance.now() - t0 < 1000);
  });
});

describe('operators', () => {
  const m = { s: 'abc', n: 5, f: 2.5, t: true, z: false, arr: ['a', 1, true], nul: null, obj: { k: 1 } };
  test('=', () => {
    assert.equal(on(m, "s = 'abc'"), true);
    assert.equal(on(m, "s = 'ABC'"), false, 'case-sensitive');
    assert.equal(on(m, 'n = 5'), true);
    assert.equal(on(m, 'n = 5.0'), true);
    assert.equal(on(m, 'f = 2.5'), true);
    assert.equal(on(m, 't = true'), true);
    assert.equal(on(m, 'z = false'), true);
    assert.equal(on(m, 'z = true'), false);
  });
  test('!=', () => {
    assert.equal(on(m, "s != 'x'"), true);
    assert.equal(on(m, "s != 'abc'"), false);
    assert.equal(on(m, 'n != 6'), true);
    assert.equal(on(m, 'n != 5'), false);
    assert.equal(on(m, 't != false'), true);
    assert.equal(on(m, 't != true'), false);
  });
  test('< <= > >= on numbers', () => {
    assert.deepEqual(
      ['n < 5', 'n <= 5', 'n > 5', 'n >= 5', 'n < 5.5', 'n > -1', 'f >= 2.5', 'f > 2.5'].map((x) => on(m, x)),
      [false, true, false, true, true, true, true, false],
    );
  });
  test('GLOB / NOT GLOB', () => {
    assert.equal(on(m, "s GLOB 'a*'"), true);
    assert.equal(on(m, "s GLOB 'A*'"), false, 'case-sensitive');
    assert.equal(on(m, "s NOT GLOB 'A*'"), true);
    assert.equal(on(m, "s NOT GLOB '*c'"), false);
  });
  test('IN / NOT IN', () => {
    assert.equal(on(m, "s IN ('x', 'abc')"), true);
    assert.equal(on(m, "s IN ('x', 'y')"), false);
    assert.equal(on(m, 'n IN (1, 5, 9)'), true);
    assert.equal(on(m, 't IN (true)'), true);
    assert.equal(on(m, "s NOT IN ('x', 'y')"), true);
    assert.equal(on(m, "s NOT IN ('x', 'abc')"), false);
    assert.equal(on(m, 'n NOT IN (1, 2)'), true);
    assert.equal(on(m, 'n NOT IN (5)'), false);
  });
  test('CONTAINS / NOT CONTAINS on arrays', () => {
    assert.equal(on(m, "arr CONTAINS 'a'"), true);
    assert.equal(on(m, 'arr CONTAINS 1'), true);
    assert.equal(on(m, 'arr CONTAINS true'), true);
    assert.equal(on(m, "arr CONTAINS 'b'"), false);
    assert.equal(on(m, "arr NOT CONTAINS 'b'"), true);
    assert.equal(on(m, "arr NOT CONTAINS 'a'"), false);
    assert.equal(on({ arr: [] }, "arr NOT CONTAINS 'a'"), true);
    assert.equal(on({ arr: [] }, "arr CONTAINS 'a'"), false);
  });
  test('CONTAINS on a non-array is false for both forms (no substring search)', () => {
    assert.equal(on(m, "s CONTAINS 'b'"), false);
    assert.equal(on(m, "s NOT CONTAINS 'z'"), false);
    assert.equal(on(m, 'obj CONTAINS 1'), false);
    assert.equal(on(m, 'obj NOT CONTAINS 1'), false);
  });
  test('HAS FIELD / HAS NOT FIELD, null counts as present', () => {
    assert.equal(on(m, 'HAS FIELD nul'), true);
    assert.equal(on(m, 'HAS NOT FIELD nul'), false);
    assert.equal(on(m, 'HAS FIELD obj.k'), true);
    assert.equal(on(m, 'HAS FIELD obj.q'), false);
    assert.equal(on(m, 'HAS NOT FIELD obj.q'), true);
    assert.equal(on(m, 'HAS FIELD arr[2]'), true);
    assert.equal(on(m, 'HAS FIELD arr[3]'), false);
    assert.equal(on(m, 'HAS FIELD arr[#-3]'), true);
    assert.equal(on(m, 'HAS FIELD arr[#-4]'), false);
  });
  test('keywords are case-insensitive', () => {
    assert.equal(on(m, "s not glob 'x*' and n in (5) Or s = 'q'"), true);
    assert.equal(on(m, 'has field nul AND has not field zz AND t = TRUE AND z = False'), true);
    assert.equal(on(m, "arr contains 'a' AND arr Not Contains 'q' AND n NoT In (1)"), true);
  });
});

describe('missing fields, null values and type mismatches', () => {
  const missing = [
    "x = 'a'", "x != 'a'", 'x = 1', 'x != 1', 'x = true', 'x != true', 'x < 1', 'x <= 1', 'x > 1', 'x >= 1',
    "x GLOB '*'", "x NOT GLOB 'a'", "x IN ('a', 1)", "x NOT IN ('a')", 'x NOT IN (1, 2)', "x CONTAINS 'a'",
    "x NOT CONTAINS 'a'", 'HAS FIELD x',
  ];
  test('a missing field makes every comparison false (including != and every NOT form)', () => {
    for (const f of missing) assert.equal(on({ y: 1 }, f), false, f);
    assert.equal(on({ y: 1 }, 'HAS NOT FIELD x'), true);
  });
  test('a null value is present but comparable with nothing', () => {
    for (const f of missing.slice(0, -1)) assert.equal(on({ x: null }, f), false, f);
    assert.equal(on({ x: null }, 'HAS FIELD x'), true);
    assert.equal(on({ x: null }, 'HAS NOT FIELD x'), false);
  });
  test('null, undefined, array or non-object metadata reads as {}', () => {
    for (const meta of [null, undefined, [1, 2] as unknown as Record<string, unknown>, 'str' as unknown as Record<string, unknown>]) {
      assert.equal(on(meta, "x = 'a'"), false);
      assert.equal(on(meta, "x != 'a'"), false);
      assert.equal(on(meta, 'HAS NOT FIELD x'), true);
      assert.equal(on(meta, 'HAS FIELD length'), false);
    }
  });
  test('type mismatches are false for both = and != (population = \'abc\', name > 5)', () => {
    const r = { name: 'Berlin', population: 3669495, obj: { a: 1 }, arr: [1] };
    for (const f of ["population = 'abc'", "population != 'abc'", 'name > 5', 'name <= 5', 'name = 5', 'name != 5',
      'obj = 1', 'obj != 1', 'arr = 1', 'arr != 1', "population GLOB '3*'", "population NOT GLOB 'x'", 'name IN (1, 2)',
      'name NOT IN (1, 2)', 'population NOT IN (\'a\')']) {
      assert.equal(on(r, f), false, f);
    }
  });
  test('booleans and the numbers 1/0 are interchangeable, other numbers do not compare with booleans', () => {
    assert.equal(on({ b: true }, 'b = 1'), true);
    assert.equal(on({ b: false }, 'b = 0'), true);
    assert.equal(on({ b: true }, 'b != 0'), true);
    assert.equal(on({ b: true }, 'b != 1'), false);
    assert.equal(on({ b: 1 }, 'b = true'), true);
    assert.equal(on({ b: 0 }, 'b != true'), true);
    assert.equal(on({ b: true }, 'b = 2'), false);
    assert.equal(on({ b: true }, 'b != 2'), false, 'true vs 2 is a type mismatch');
    assert.equal(on({ b: 5 }, 'b != true'), false, '5 vs true is a type mismatch');
    assert.equal(on({ b: true }, 'b > 0'), false, 'ordering needs a number field');
    assert.equal(on({ b: [true, 0] }, 'b CONTAINS 1'), true);
    assert.equal(on({ b: [1] }, 'b CONTAINS true'), true);
    assert.equal(on({ b: true }, 'b IN (1, 7)'), true);
    assert.equal(on({ b: true }, 'b NOT IN (0)'), true);
    assert.equal(on({ b: true }, 'b NOT IN (0, 7)'), false, 'NOT IN is AND of !=; true != 7 is a mismatch');
  });
  test('NOT IN is the AND of != (a mixed-type list fails every value)', () => {
    assert.equal(on({ s: 'b' }, "s NOT IN ('a', 'c')"), true);
    assert.equal(on({ s: 'b' }, "s NOT IN ('a', 1)"), false);
    assert.equal(on({ n: 3 }, "n NOT IN (1, 'a')"), false);
    assert.equal(on({ n: 3 }, 'n NOT IN (1, true)'), false);
    assert.equal(on({ n: 1 }, 'n NOT IN (2, false)'), true);
  });
  test('inherited object properties are never fields', () => {
    for (const k of ['constructor', 'toString', '__proto__', 'hasOwnProperty', 'valueOf']) {
      assert.equal(on({}, `HAS FIELD ${k}`), false, k);
      assert.equal(on({ a: {} }, `HAS FIELD a.${k}`), false, k);
    }
    assert.equal(on(JSON.parse('{"__proto__": "x", "constructor": 5}'), "__proto__ = 'x' AND constructor = 5"), true);
    assert.equal(on({ a: [1, 2] }, 'HAS FIELD a.length'), false, 'arrays have no keys');
  });
});

describe('precedence and parentheses', () => {
  const r = { a: 1, b: 0, c: 1 };
  test('AND binds tighter than OR: A AND B OR C ≡ (A AND B) OR C', () => {
    assert.equal(on(r, 'a = 0 AND b = 0 OR c = 1'), true);
    assert.equal(on(r, 'c = 1 OR a = 0 AND b = 1'), true);
    assert.equal(on(r, 'a = 0 AND (b = 0 OR c = 1)'), false);
    assert.equal(on({ a: 0, b: 1, c: 0 }, 'a = 1 OR b = 1 AND c = 1'), false);
  });
  test('the tree has AND under OR, flattened chains', () => {
    const ast = parseFilter('a = 1 AND b = 2 AND c = 3 OR d = 4 OR e = 5 AND f = 6')!;
    assert.equal(ast.kind, 'or');
    assert.equal(printFilter(ast), 'a = 1 AND b = 2 AND c = 3 OR d = 4 OR e = 5 AND f = 6');
    if (ast.kind !== 'or') throw new Error();
    assert.deepEqual(ast.children.map((c) => c.kind), ['and', 'compare', 'and']);
  });
  test('parentheses override, nest, and may be redundant', () => {
    assert.equal(on(r, '((((a = 1))))'), true);
    assert.equal(on(r, '(a = 0 OR b = 0) AND (c = 0 OR (a = 1 AND (b = 0)))'), true);
    assert.equal(printFilter(parseFilter('(a = 1 OR b = 2) AND c = 3')!), '(a = 1 OR b = 2) AND c = 3');
  });
  test('nesting limit', () => {
    const ok = '('.repeat(FILTER_LIMITS.maxDepth) + 'a = 1' + ')'.repeat(FILTER_LIMITS.maxDepth);
    assert.equal(on(r, ok), true);
    throwsAt('('.repeat(FILTER_LIMITS.maxDepth + 1) + 'a = 1' + ')'.repeat(FILTER_LIMITS.maxDepth + 1), FILTER_LIMITS.maxDepth, /nested too deeply/);
  });
  test('constant folding keeps evaluation correct around TRUE/FALSE idioms', () => {
    const f = compileFilter('(HAS FIELD e OR HAS NOT FIELD e) AND a = 1');
    assert.equal(f.matchesAll || f.matchesNone, false);
    assert.equal(f.matches(r), true);
    assert.equal(f.matches({ a: 2 }), false);
    assert.equal(compileFilter('(HAS FIELD e AND HAS NOT FIELD e) OR a = 1').matches(r), true);
    assert.equal(compileFilter('(HAS FIELD e AND HAS NOT FIELD e) OR (HAS FIELD e AND HAS NOT FIELD e)').matchesNone, true);
  });
});

describe('field paths', () => {
  const r = {
    a: { b: { c: 'deep' } },
    arr: [10, 20, 30],
    objs: [{ n: 'x', tags: ['p', 'q'] }, { n: 'y' }],
    grid: [[1, 2], [3, 4]],
    '0': 'zero',
    'k-e#y': 1,
    and: 'kw',
    not: 'n',
    has: 'h',
  };
  test('dotted paths at any depth', () => {
    assert.equal(on(r, "a.b.c = 'deep'"), true);
    assert.equal(on(r, "a.b.c.d = 'deep'"), false);
    assert.equal(on(r, 'HAS FIELD a.b'), true);
    assert.equal(on(r, "a.b = 'deep'"), false);
  });
  test('[i] zero-based and [#-k] from the end', () => {
    assert.equal(on(r, 'arr[0] = 10 AND arr[2] = 30 AND arr[#-1] = 30 AND arr[#-3] = 10'), true);
    assert.equal(on(r, 'arr[3] = 10 OR arr[#-4] = 10 OR arr[#-0] = 10 OR arr[99999999999999999999] = 1'), false);
    assert.equal(on(r, 'arr[01] = 20'), true);
  });
  test('indexes and keys chained', () => {
    assert.equal(on(r, "objs[0].n = 'x' AND objs[#-1].n = 'y' AND objs[0].tags[#-1] = 'q'"), true);
    assert.equal(on(r, 'grid[1][0] = 3 AND grid[#-1][#-1] = 4'), true);
    assert.equal(on(r, "HAS NOT FIELD objs[1].tags AND HAS FIELD objs[0].tags[1]"), true);
  });
  test('an index on a non-array or a key on an array is missing', () => {
    assert.equal(on(r, 'HAS FIELD a[0]'), false);
    assert.equal(on(r, 'HAS FIELD arr.0'), false);
    assert.equal(on(r, 'arr.0 != 1'), false);
  });
  test('key names may use the identifier alphabet: digits after a dot, #, -, and keywords', () => {
    assert.equal(on({ x: { '0': 'zero' } }, "x.0 = 'zero'"), true);
    assert.equal(on(r, 'k-e#y = 1'), true);
    assert.equal(on(r, "and = 'kw' AND not = 'n' AND has = 'h'"), true);
    assert.equal(on(r, "not IN ('n') AND not NOT IN ('q') AND HAS FIELD and AND HAS FIELD has"), true);
  });
  test('malformed paths are syntax errors pointing into the path', () => {
    throwsAt('a..b = 1', 2, /empty key/);
    throwsAt('x = 1 AND a.b. = 1', 13, /ends with '\.'/);
    throwsAt('a[0]x = 1', 4, /after '\]'/);
    throwsAt('a[-1] = 1', 2, /invalid index '\[-1\]'/);
    throwsAt('a[#] = 1', 2, /invalid index/);
    throwsAt('a[x] = 1', 2, /invalid index/);
    throwsAt('a.[0] = 1', 2, /empty key/);
    throwsAt('a[0]] = 1', 4, /after '\]'/);
    throwsAt('a[ 0] = 1', 4, /unexpected character '\]'/);
  });
});

describe('literals', () => {
  test('numbers: ints, floats, negatives, exponents, leading zeros', () => {
    const r = { i: 42, f: 3.25, neg: -7, negf: -0.5, tiny: 1e-10, big: 15460000, zero: 0 };
    for (const f of ['i = 42', 'f = 3.25', 'neg = -7', 'negf = -0.5', 'tiny = 1e-10', 'tiny = 1E-10', 'tiny = 0.1e-9',
      'big = 1.546e7', 'big = 1546e+4', 'zero = -0', 'zero = 0.0', 'i = 042', 'neg<-6', 'neg>=-7']) {
      assert.equal(on(r, f), true, f);
    }
  });
  test('bad numbers', () => {
    throwsAt('x = 5abc', 4, /invalid number '5abc'/);
    throwsAt('x = 1.', 4, /invalid number/);
    throwsAt('x = 1.2.3', 4, /invalid number '1\.2\.3'/);
    throwsAt('x = .5', 4, /unexpected character '\.'/);
    throwsAt('x = - 5', 4, /unexpected character '-'/);
    throwsAt('x = +5', 4, /unexpected character '\+'/);
    throwsAt('x = 1e999', 4, /out of range/);
    throwsAt('x = 1e', 4, /invalid number/);
  });
  test('booleans true/false in any case; null is not a literal', () => {
    assert.equal(on({ b: true }, 'b = TRUE AND b != False'), true);
    throwsAt('b = null', 4, /null is not a value/);
    throwsAt('b = yes', 4, /expected a string, number or boolean after '='/);
  });
  test('strings: both quote styles, escapes \\\\ \\\' \\", doubled quotes, other backslashes kept', () => {
    assert.equal(on({ s: "it's" }, "s = 'it\\'s'"), true);
    assert.equal(on({ s: "it's" }, "s = 'it''s'"), true);
    assert.equal(on({ s: "it's" }, `s = "it's"`), true);
    assert.equal(on({ s: 'say "hi"' }, `s = "say \\"hi\\""`), true);
    assert.equal(on({ s: 'say "hi"' }, `s = "say ""hi"""`), true);
    assert.equal(on({ s: 'a\\b' }, "s = 'a\\\\b'"), true);
    assert.equal(on({ s: 'C:\\Users' }, "s = 'C:\\Users'"), true, 'unknown escape kept as written');
    assert.equal(on({ s: '' }, "s = ''"), true);
    assert.equal(on({ s: '' }, 's = ""'), true);
    assert.equal(on({ s: "'" }, "s = ''''"), true);
    assert.equal(on({ s: 'ünï 😀 中文' }, "s = 'ünï 😀 中文'"), true);
    assert.equal(on({ s: 'a AND b = (c)' }, "s = 'a AND b = (c)'"), true);
    assert.equal(on({ s: 'x\ny' }, "s = 'x\ny'"), true);
  });
  test('unterminated strings point at the opening quote', () => {
    throwsAt("name = 'abc", 7, /unterminated string.*no closing single quote/);
    throwsAt('name = "abc\\"', 7, /unterminated string.*double quote/);
    throwsAt("x = 'a' AND y = 'b", 16, /unterminated/);
  });
});

describe('GLOB', () => {
  const g = (value: string, pattern: string): boolean => on({ v: value }, `v GLOB '${pattern.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`);
  test('the documented example ?[sz]*[^m-z]', () => {
    assert.equal(g('Istanbul', '?[sz]*[^m-z]'), true);
    assert.equal(g('Izmir', '?[sz]*[^m-z]'), false, 'ends in r, inside m-z');
    assert.equal(g('Aztec', '?[sz]*[^m-z]'), true);
  });
  test('* any run (also empty, also /), ? exactly one code point', () => {
    assert.equal(g('', '*'), true);
    assert.equal(g('abc', 'a*'), true);
    assert.equal(g('abc', '*c'), true);
    assert.equal(g('abc', '*b*'), true);
    assert.equal(g('abc', 'a*c'), true);
    assert.equal(g('ac', 'a*c'), true);
    assert.equal(g('a/b/c', 'a*c'), true);
    assert.equal(g('abc', '?b?'), true);
    assert.equal(g('abc', '??'), false);
    assert.equal(g('😀', '?'), true, 'astral code point is one character');
    assert.equal(g('a😀b', 'a?b'), true);
    assert.equal(g('aXbXc', '*X*X*'), true);
    assert.equal(g('abcabd', '*abd'), true);
    assert.equal(g('mississippi', 'm*iss*ppi'), true);
    assert.equal(g('mississippi', 'm*iss*ppx'), false);
    assert.equal(g('abc', ''), false);
    assert.equal(g('', ''), true);
  });
  test('sets: members, ranges, negation, ] and - as members, reversed ranges, unclosed [', () => {
    assert.equal(g('b', '[abc]'), true);
    assert.equal(g('d', '[abc]'), false);
    assert.equal(g('q', '[a-z]'), true);
    assert.equal(g('Q', '[a-z]'), false, 'case-sensitive');
    assert.equal(g('d', '[^abc]'), true);
    assert.equal(g('a', '[^abc]'), false);
    assert.equal(g('5', '[^a-z]'), true);
    assert.equal(g(']', '[]a]'), true);
    assert.equal(g(']', '[^]a]'), false);
    assert.equal(g('-', '[a-]'), true);
    assert.equal(g('-', '[-a]'), true);
    assert.equal(g('b', '[a-]'), false);
    assert.equal(g('m', '[z-a]'), false);
    assert.equal(g('!', '[!a]'), true, "'!' is a member, only ^ negates");
    assert.equal(g('[ab', '[ab'), true, 'unclosed [ is literal');
    assert.equal(g('x', '[0-9a-fx]'), true);
    assert.equal(g('😀', '[😀]'), true);
  });
  test('backslash escapes wildcards inside the pattern', () => {
    assert.equal(g('a*b', 'a\\*b'), true);
    assert.equal(g('axb', 'a\\*b'), false);
    assert.equal(g('a?', 'a\\?'), true);
    assert.equal(g('ab', 'a\\?'), false);
    assert.equal(g('[x]', '\\[x]'), true);
    assert.equal(g('a\\', 'a\\'), true, 'trailing lone backslash is literal');
    assert.equal(g(']', '[\\]]'), true);
    // written in filter text: 'a\*b' keeps the backslash (unknown string escape), so GLOB sees \*
    assert.equal(on({ v: 'a*b' }, "v GLOB 'a\\*b'"), true);
    assert.equal(on({ v: 'aXb' }, "v GLOB 'a\\*b'"), false);
  });
  test('GLOB on a non-string is false for both forms', () => {
    assert.equal(on({ v: 5 }, "v GLOB '*'"), false);
    assert.equal(on({ v: ['a'] }, "v NOT GLOB 'b'"), false);
  });
  test('no catastrophic backtracking', () => {
    const t0 = performance.now();
    assert.equal(g('a'.repeat(20000), '*a*a*a*a*a*a*a*a*a*a*b'), false);
    assert.equal(g('a'.repeat(20000), '*a?a*a[a]a*a*a*a*a*a*b'), false);
    assert.ok(performance.now() - t0 < 2000);
  });
});

describe('syntax errors with positions', () => {
  test('unexpected tokens', () => {
    throwsAt("country = 'Turkey' AND AND x = 1", 23, /unexpected 'AND' .*expected a condition/);
    throwsAt('a = 1 OR', 8, /unexpected end of filter/);
    throwsAt('a = 1 b = 2', 6, /unexpected 'b'.*expected AND, OR or the end/);
    throwsAt('a = 1)', 5, /no matching '\('/);
    throwsAt('(a = 1', 6, /close the '\(' at position 0/);
    throwsAt('()', 1, /unexpected '\)'/);
    throwsAt('AND', 0, /unexpected 'AND'.*expected a condition/);
    throwsAt('= 1', 0, /unexpected '='/);
    throwsAt('a', 1, /expected an operator/);
    throwsAt('a 1', 2, /expected an operator/);
    throwsAt('a == 1', 3, /expected a string, number or boolean/);
    throwsAt('a <> 1', 3, /expected a number after '<'/);
    throwsAt('a = 1 && b = 2', 6, /unexpected character '&'/);
    throwsAt('a ! b', 2, /use '!=' or NOT/);
  });
  test('operator/literal mismatches the grammar forbids', () => {
    throwsAt("x > 'a'", 4, /expected a number after '>'/);
    throwsAt('x <= true', 5, /expected a number/);
    throwsAt('x GLOB 5', 7, /expected a quoted pattern/);
    throwsAt('x IN 1', 5, /expected '\(' after IN/);
    throwsAt('x IN ()', 6, /in the IN list/);
    throwsAt('x IN (1,)', 8, /in the IN list/);
    throwsAt('x IN (1 2)', 8, /expected ',' or '\)'/);
    throwsAt('x NOT = 1', 6, /expected GLOB, IN or CONTAINS after NOT/);
    throwsAt("x CONTAINS", 10, /after CONTAINS/);
  });
  test('there is no unary NOT', () => {
    throwsAt('NOT x = 1', 0, /no unary NOT/);
    throwsAt('a = 1 AND NOT (b = 2)', 10, /no unary NOT/);
  });
  test('HAS needs FIELD; HAS FIELD needs a path', () => {
    throwsAt('HAS FIELD', 9, /expected a field path after FIELD/);
    throwsAt("HAS FIELD 'x'", 10, /expected a field path/);
    throwsAt('HAS x', 0, /unexpected 'HAS'.*expected a condition/);
    throwsAt('has x = 1', 0, /unexpected 'has'/);
  });
  test('limits', () => {
    const ok = Array.from({ length: FILTER_LIMITS.maxInValues }, (_, i) => i).join(',');
    assert.equal(on({ x: 499 }, `x IN (${ok})`), true);
    throwsAt(`x IN (${ok},500)`, 5, /IN list too long/);
    throwsAt(`x = '${'a'.repeat(FILTER_LIMITS.maxLength)}'`, FILTER_LIMITS.maxLength, /characters long/);
    // a GLOB pattern of at most maxGlobLength characters (after unescaping) is accepted, one more is not
    const pattern = `*${'?'.repeat(FILTER_LIMITS.maxGlobLength - 1)}`;
    assert.equal(on({ x: 'a'.repeat(FILTER_LIMITS.maxGlobLength) }, `x GLOB '${pattern}'`), true);
    assert.equal(on({ x: "'".repeat(FILTER_LIMITS.maxGlobLength) }, `x GLOB '${"''".repeat(FILTER_LIMITS.maxGlobLength)}'`), true);
    throwsAt(`a = 1 AND x NOT GLOB '${pattern}?'`, 21, /GLOB pattern is 4097 characters long .*at most 4096 are allowed/);
  });
  test('errors are FilterSyntaxError instances (HTTP 400 in the engine)', () => {
    try {
      compileFilter('a = ');
      assert.fail('no error');
    } catch (err) {
      assert.ok(isFilterSyntaxError(err));
      assert.ok(err instanceof Error);
      assert.equal((err as FilterSyntaxError).name, 'FilterSyntaxError');
      assert.equal((err as FilterSyntaxError).message, 'Invalid filter: unexpected end of filter at position 4 (expected a string, number or boolean after \'=\')');
    }
  });
});

describe('public helpers', () => {
  test('blank filters match everything', () => {
    for (const t of ['', '   ', '\n\t ']) {
      const f = compileFilter(t);
      assert.equal(f.matchesAll, true);
      assert.equal(f.ast, null);
      assert.equal(f.matches(null), true);
      assert.equal(f.matches({ a: 1 }), true);
    }
  });
  test('fields lists the distinct paths read, in order', () => {
    assert.deepEqual(compileFilter("a.b = 1 AND (tags[0] = 'x' OR a.b != 2 OR HAS FIELD z)").fields, ['a.b', 'tags[0]', 'z']);
  });
  test('compiled filters are cached by text and frozen', () => {
    const a = compileFilter('q = 1');
    assert.equal(compileFilter('q = 1'), a);
    assert.ok(Object.isFrozen(a));
  });
  test('printFilter output parses back to the same tree', () => {
    const src = `a.b[#-1] NOT IN ('x''y', "q\\"", 1.5e-7, TRUE) OR (HAS NOT FIELD z AND s NOT GLOB 'a\\\\*' AND t CONTAINS -3)`;
    const printed = printFilter(parseFilter(src)!);
    assert.equal(printFilter(parseFilter(printed)!), printed);
    const r = { a: { b: [1, "x'y"] }, s: 'a\\b', t: [-3] };
    assert.equal(compileFilter(src).matches(r), compileFilter(printed).matches(r));
  });
  test('a non-string filter is a FilterSyntaxError, not a crash', () => {
    assert.throws(() => compileFilter(42 as unknown as string), FilterSyntaxError);
    assert.throws(() => compileFilter(null as unknown as string), FilterSyntaxError);
  });
  test('printFilter keeps parenthesised groups as groups', () => {
    const src = '(a = 1 AND b = 2) AND c = 3 OR (d = 4 OR e = 5)';
    assert.equal(printFilter(parseFilter(src)!), src);
  });
  test('estimateSelectivity on a sample', () => {
    const sample = Array.from({ length: 1000 }, (_, i) => ({ i }));
    assert.equal(estimateSelectivity(compileFilter('i < 100'), sample), 0.1);
    assert.equal(estimateSelectivity(compileFilter(''), sample), 1);
    assert.equal(estimateSelectivity(compileFilter('HAS FIELD q AND HAS NOT FIELD q'), []), 0);
    assert.equal(estimateSelectivity(compileFilter('i < 100'), []), 1);
  });
});

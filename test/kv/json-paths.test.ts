/**
 * JSON.* library: array commands, JSONPath features (slices, negative indexes, unions,
 * recursive descent, filters) and legacy-path equivalents, against a real redis-server.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { errorOf, startRedis, type Reply, type TestRedis } from './json-helpers.js';

let r: TestRedis;
let n = 0;
const key = (): string => `jp:${++n}`;
const json = (...a: Array<string | number>): Promise<Reply> => r.json(...a);
const get = async (k: string, ...paths: string[]): Promise<unknown> => {
  const reply = await json('JSON.GET', k, ...paths);
  if (typeof reply !== 'string') throw new Error(`JSON.GET ${paths.join(' ')}: ${JSON.stringify(reply)}`);
  return JSON.parse(reply);
};
const doc = async (value: unknown): Promise<string> => {
  const k = key();
  assert.equal(await json('JSON.SET', k, '$', JSON.stringify(value)), 'OK');
  return k;
};

before(async () => {
  r = await startRedis();
});
after(async () => {
  await r.close();
});

describe('array commands', () => {
  test('ARRAPPEND and ARRLEN', async () => {
    const k = await doc({ a: [1], n: { a: [] }, s: 'x' });
    assert.deepEqual(await json('JSON.ARRAPPEND', k, '$..a', '2', '{"x":[]}'), [3, 2]);
    assert.equal(await json('JSON.ARRAPPEND', k, '.a', '"z"'), 4);
    assert.deepEqual(await json('JSON.ARRAPPEND', k, '$.s', '1'), [null]);
    assert.equal(errorOf(await json('JSON.ARRAPPEND', k, '.s', '1')), 'ERR Path does not exist or not an array');
    assert.deepEqual(await json('JSON.ARRLEN', k, '$..a'), [4, 2]);
    assert.deepEqual(await json('JSON.ARRLEN', k, '$.*'), [4, null, null]);
    assert.equal(await json('JSON.ARRLEN', k, '.a'), 4);
    assert.equal(errorOf(await json('JSON.ARRLEN', k, '.s')), 'ERR Path does not exist or not an array');
    assert.equal(errorOf(await json('JSON.ARRLEN', k, '.nope')), 'ERR Path does not exist');
    assert.equal(await json('JSON.ARRLEN', 'jp:missing', '.a'), null);
    assert.deepEqual(await get(k), { a: [1, 2, { x: [] }, 'z'], n: { a: [2, { x: [] }] }, s: 'x' });
  });

  test('ARRINDEX with start/stop, type-exact comparison', async () => {
    const k = await doc({ a: [1, 2, 3, 2, '2', { x: [1] }, 1.0], b: 's' });
    assert.deepEqual(await json('JSON.ARRINDEX', k, '$.a', '2'), [1]);
    assert.deepEqual(await json('JSON.ARRINDEX', k, '$.a', '2', '2'), [3]);
    assert.deepEqual(await json('JSON.ARRINDEX', k, '$.a', '2', '-4'), [3]);
    assert.deepEqual(await json('JSON.ARRINDEX', k, '$.a', '2', '0', '1'), [-1]);
    assert.deepEqual(await json('JSON.ARRINDEX', k, '$.a', '"2"'), [4]);
    assert.deepEqual(await json('JSON.ARRINDEX', k, '$.a', '{"x":[1]}'), [5]);
    assert.deepEqual(await json('JSON.ARRINDEX', k, '$.*', '1'), [0, null]);
    assert.equal(await json('JSON.ARRINDEX', k, '.a', '3'), 2);
    assert.equal(await json('JSON.ARRINDEX', k, '.a', '9'), -1);
    assert.equal(errorOf(await json('JSON.ARRINDEX', k, '.b', '1')), 'WRONGTYPE wrong type of path value - expected array but found string');
    assert.equal(errorOf(await json('JSON.ARRINDEX', k, '.a', '1', 'x')), 'ERR value is not an integer or out of range');
    assert.equal(errorOf(await json('JSON.ARRINDEX', 'jp:missing', '.a', '1')), 'ERR Path does not exist');
  });

  test('ARRINSERT', async () => {
    const k = await doc({ a: [1, 2, 3], b: 1 });
    assert.deepEqual(await json('JSON.ARRINSERT', k, '$.a', '0', '"x"', '"y"'), [5]);
    assert.deepEqual(await json('JSON.ARRINSERT', k, '$.a', '-1', '9'), [6]);
    assert.equal(await json('JSON.ARRINSERT', k, '.a', '6', 'null'), 7);
    assert.deepEqual(await get(k, '.a'), ['x', 'y', 1, 2, 9, 3, null]);
    assert.equal(errorOf(await json('JSON.ARRINSERT', k, '.a', '8', '1')), 'ERR index out of bounds');
    assert.equal(errorOf(await json('JSON.ARRINSERT', k, '.a', '-8', '1')), 'ERR index out of bounds');
    assert.deepEqual(await json('JSON.ARRINSERT', k, '$.b', '0', '1'), [null]);
    assert.equal(errorOf(await json('JSON.ARRINSERT', k, '.b', '0', '1')), 'ERR Path does not exist or not an array');
  });

  test('ARRPOP: default last, index clamping, empty array nil, nested arrays deepest first', async () => {
    const k = await doc({ a: [1, 2, 3, { x: 'y' }], e: [], s: 1 });
    assert.equal(await json('JSON.ARRPOP', k, '.a'), '{"x":"y"}');
    assert.deepEqual(await json('JSON.ARRPOP', k, '$.a', '0'), ['1']);
    assert.deepEqual(await json('JSON.ARRPOP', k, '$.a', '99'), ['3']);
    assert.deepEqual(await json('JSON.ARRPOP', k, '$.*', '-5'), ['2', null, null]);
    assert.equal(await json('JSON.ARRPOP', k, '.e'), null);
    assert.equal(errorOf(await json('JSON.ARRPOP', k, '.s')), 'ERR Path does not exist or not an array');
    const k2 = await doc([[1, 2, 3], [4, 5, 6]]);
    assert.equal(await json('JSON.ARRPOP', k2), '[4,5,6]');
    const k3 = await doc({ a: [[1, 2, 3], [4, 5, 6]] });
    // matches $.a, $.a[0], $.a[1] and six numbers (nil); children are popped before the parent
    assert.deepEqual(await json('JSON.ARRPOP', k3, '$..*', '-1'), ['[4,5]', '3', '6', null, null, null, null, null, null]);
    assert.deepEqual(await get(k3), { a: [[1, 2]] });
  });

  test('ARRTRIM', async () => {
    const k = await doc({ a: [0, 1, 2, 3, 4, 5], b: [1, 2], c: [1], s: 'x' });
    assert.deepEqual(await json('JSON.ARRTRIM', k, '$.a', '1', '-2'), [4]);
    assert.deepEqual(await get(k, '.a'), [1, 2, 3, 4]);
    assert.equal(await json('JSON.ARRTRIM', k, '.a', '1', '100'), 3);
    assert.deepEqual(await json('JSON.ARRTRIM', k, '$.b', '5', '10'), [0]);
    assert.deepEqual(await json('JSON.ARRTRIM', k, '$.c', '0', '0'), [1]);
    assert.deepEqual(await json('JSON.ARRTRIM', k, '$.*', '0', '0'), [1, 0, 1, null]);
    assert.deepEqual(await get(k), { a: [2], b: [], c: [1], s: 'x' });
    assert.equal(errorOf(await json('JSON.ARRTRIM', k, '.s', '0', '1')), 'ERR Path does not exist or not an array');
  });
});

describe('JSONPath', () => {
  const store = {
    store: {
      book: [
        { category: 'reference', author: 'Nigel Rees', title: 'Sayings', price: 8.95 },
        { category: 'fiction', author: 'Evelyn Waugh', title: 'Sword', price: 12.99 },
        { category: 'fiction', author: 'Herman Melville', title: 'Moby Dick', isbn: '0-553', price: 8.99 },
        { category: 'fiction', author: 'J. R. R. Tolkien', title: 'The Lord', isbn: '0-395', price: 22.99 },
      ],
      bicycle: { color: 'red', price: 19.95 },
    },
    limit: 10,
  };
  let k: string;
  before(async () => {
    k = await doc(store);
  });

  test('child, wildcard, recursive descent (pre-order)', async () => {
    assert.deepEqual(await get(k, '$.store.book[*].author'), ['Nigel Rees', 'Evelyn Waugh', 'Herman Melville', 'J. R. R. Tolkien']);
    assert.deepEqual(await get(k, '$..price'), [8.95, 12.99, 8.99, 22.99, 19.95]);
    assert.deepEqual(await get(k, '$..book..price'), [8.95, 12.99, 8.99, 22.99]);
    assert.equal(((await get(k, '$..*')) as unknown[]).length, 28);
    assert.deepEqual(await get(k, '$.store.*.color'), ['red']);
    assert.deepEqual(await get(k, "$['store']['bicycle']['color']"), ['red']);
    assert.deepEqual(await get(k, '$.store["bicycle"].color'), ['red']);
    assert.deepEqual(await get(k, "$.store.bicycle['color','price']"), ['red', 19.95]);
    assert.deepEqual(await get(k, '$..book[2].isbn'), ['0-553']);
    assert.deepEqual(await get(k, '$.*'), [store.store, 10]);
  });

  test('indexes, negative indexes, unions and slices', async () => {
    const titles = (p: string): Promise<unknown> => get(k, `$.store.book${p}.title`);
    assert.deepEqual(await titles('[-1]'), ['The Lord']);
    assert.deepEqual(await titles('[0,2]'), ['Sayings', 'Moby Dick']);
    assert.deepEqual(await titles('[1:3]'), ['Sword', 'Moby Dick']);
    assert.deepEqual(await titles('[:2]'), ['Sayings', 'Sword']);
    assert.deepEqual(await titles('[-2:]'), ['Moby Dick', 'The Lord']);
    assert.deepEqual(await titles('[::2]'), ['Sayings', 'Moby Dick']);
    assert.deepEqual(await titles('[9]'), []);
    assert.deepEqual(await get(k, '.store.book[-1].title'), 'The Lord');
    assert.deepEqual(await get(k, 'store.book[1].price'), 12.99);
  });

  test('filters: comparisons, &&, ||, !, existence, $ references, regex', async () => {
    const t = (f: string): Promise<unknown> => get(k, `$.store.book[?(${f})].title`);
    assert.deepEqual(await t('@.price < 10'), ['Sayings', 'Moby Dick']);
    assert.deepEqual(await t('@.price<=8.99'), ['Sayings', 'Moby Dick']);
    assert.deepEqual(await t('@.price > 20'), ['The Lord']);
    assert.deepEqual(await t('@.price >= 22.99'), ['The Lord']);
    assert.deepEqual(await t("@.category == 'reference'"), ['Sayings']);
    assert.deepEqual(await t('@.category != "fiction"'), ['Sayings']);
    assert.deepEqual(await t('@.isbn'), ['Moby Dick', 'The Lord']);
    assert.deepEqual(await t('!@.isbn'), ['Sayings', 'Sword']);
    assert.deepEqual(await t("@.category == 'fiction' && @.price < 10"), ['Moby Dick']);
    assert.deepEqual(await t("@.price > 20 || @.category == 'reference'"), ['Sayings', 'The Lord']);
    assert.deepEqual(await t("(@.price > 20 || @.price < 9) && @.isbn"), ['Moby Dick', 'The Lord']);
    assert.deepEqual(await t('@.price < $.limit'), ['Sayings', 'Moby Dick']);
    assert.deepEqual(await t("@.author =~ 'M[a-z]+ville$'"), ['Moby Dick']);
    assert.deepEqual(await t("@.title =~ '^S.*d$'"), ['Sword']);
    assert.deepEqual(await t("@.isbn =~ '\\d-\\d+'"), ['Moby Dick', 'The Lord']);
    assert.deepEqual(await get(k, '$..book[?(@.price > 20)].price'), [22.99]);
    assert.deepEqual(await get(k, '$.store[?(@.color)].price'), [19.95]);
    const nums = await doc([1, 5, 'a', true, null, 3]);
    assert.deepEqual(await get(nums, '$[?(@ > 2)]'), [5, 3]);
    assert.deepEqual(await get(nums, '$[?(@ == true)]'), [true]);
    assert.deepEqual(await get(nums, '$[?(@ == null)]'), [null]);
    assert.match(errorOf(await json('JSON.GET', k, "$.store.book[?(@.title =~ '(a|b)')]")), /^ERR unsupported regular expression/);
  });

  test('writes through filters and wildcards', async () => {
    const w = await doc(store);
    assert.equal(await json('JSON.SET', w, '$.store.book[?(@.price < 10)].price', '5'), 'OK');
    assert.equal(await json('JSON.NUMINCRBY', w, '$.store.book[?(@.price == 5)].price', '0.5'), '[5.5,5.5]');
    assert.equal(await json('JSON.DEL', w, '$.store.book[?(@.category == "fiction")]'), 3);
    assert.deepEqual(await get(w, '$.store.book[*].title'), ['Sayings']);
  });

  test('invalid paths are errors', async () => {
    for (const p of ['$.a[', '$[1:2:0]', '$.a[?(@.x ==)]', '$..', "$['a"]) {
      assert.match(errorOf(await json('JSON.GET', k, p)), /^ERR JSON Path error/, p);
    }
  });
});

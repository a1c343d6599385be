/**
 * JSON.* library against a model: seeded random sequences of writes on one document (legacy
 * paths), each applied to a plain JS value as well, with the document text compared after every
 * command. Exercises the parsed-tree cache and the source-span reuse of the encoder (a stale
 * span or cached tree would show up as a text difference), including cache flushes by errors.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { errorOf, startRedis, type TestRedis } from './json-helpers.js';

type J = null | boolean | number | string | J[] | { [k: string]: J };
type Seg = string | number;

let r: TestRedis;
before(async () => {
  r = await startRedis();
});
after(async () => {
  await r.close();
});

function prng(seed: number): () => number {
  return () => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed / 2147483648;
  };
}

function run(seed: number, steps: number): Promise<void> {
  const rand = prng(seed);
  const int = (n: number): number => Math.floor(rand() * n);
  let keyN = 0;
  const value = (depth: number): J => {
    const c = int(depth > 2 ? 5 : 7);
    if (c === 0) return null;
    if (c === 1) return rand() < 0.5;
    if (c === 2) return int(1000) - 500;
    if (c === 3) return ['', 'x', 'é"\\\n', 'abc', '😀'][int(5)];
    if (c === 4) return `s${int(100)}`;
    if (c === 5) return Array.from({ length: int(4) }, () => value(depth + 1));
    const o: { [k: string]: J } = {};
    for (let i = int(4); i > 0; i--) o[`k${keyN++}`] = value(depth + 1);
    return o;
  };
  const text = (segs: Seg[]): string => (segs.length ? segs.map((s) => (typeof s === 'number' ? `[${s}]` : `.${s}`)).join('') : '.');
  const at = (root: J, segs: Seg[]): J => segs.reduce<J>((v, s) => (v as Record<string, J>)[s as string], root);
  const paths = (v: J, segs: Seg[] = [], out: Array<[Seg[], J]> = []): Array<[Seg[], J]> => {
    out.push([segs, v]);
    if (Array.isArray(v)) v.forEach((c, i) => paths(c, [...segs, i], out));
    else if (v && typeof v === 'object') for (const k of Object.keys(v)) paths(v[k], [...segs, k], out);
    return out;
  };
  const pick = (root: J, want: (v: J) => boolean): [Seg[], J] | undefined => {
    const all = paths(root).filter(([, v]) => want(v));
    return all.length ? all[int(all.length)] : undefined;
  };
  const isArr = (v: J): v is J[] => Array.isArray(v);
  const isObj = (v: J): v is { [k: string]: J } => !!v && typeof v === 'object' && !Array.isArray(v);
  const merge = (t: J, p: J): J => {
    if (!isObj(p)) return p;
    const out: { [k: string]: J } = isObj(t) ? t : {};
    for (const [k, v] of Object.entries(p)) {
      if (v === null) delete out[k];
      else out[k] = merge(out[k] ?? null, v);
    }
    return out;
  };

  return (async () => {
    const key = `model:${seed}`;
    let model: J = { k: value(0), a: [1, { b: 'c' }], n: 1 };
    assert.equal(await r.json('JSON.SET', key, '$', JSON.stringify(model)), 'OK');
    for (let step = 0; step < steps; step++) {
      const op = int(12);
      let cmd: Array<string | number> | undefined;
      if (op === 0) {
        const p: [Seg[], J] = pick(model, () => true)!;
        const v = value(1);
        cmd = ['JSON.SET', key, text(p[0]), JSON.stringify(v)];
        if (p[0].length === 0) model = v;
        else {
          const parent = at(model, p[0].slice(0, -1)) as Record<string, J>;
          parent[p[0][p[0].length - 1] as string] = v;
        }
      } else if (op === 1) {
        const p = pick(model, isObj);
        if (!p) continue;
        const k = `k${keyN++}`;
        const v = value(1);
        cmd = ['JSON.SET', key, text([...p[0], k]), JSON.stringify(v)];
        (p[1] as Record<string, J>)[k] = v;
      } else if (op === 2) {
        const p: [Seg[], J] = pick(model, () => true)!;
        if (p[0].length === 0) continue;
        cmd = ['JSON.DEL', key, text(p[0])];
        const parent = at(model, p[0].slice(0, -1));
        const last = p[0][p[0].length - 1];
        if (isArr(parent)) parent.splice(last as number, 1);
        else delete (parent as Record<string, J>)[last as string];
      } else if (op === 3 || op === 4 || op === 5 || op === 6) {
        const p = pick(model, isArr);
        if (!p) continue;
        const arr = p[1] as J[];
        if (op === 3) {
          const v = value(1);
          cmd = ['JSON.ARRAPPEND', key, text(p[0]), JSON.stringify(v)];
          arr.push(v);
        } else if (op === 4) {
          if (!arr.length) continue;
          const i = int(arr.length);
          cmd = ['JSON.ARRPOP', key, text(p[0]), i];
          arr.splice(i, 1);
        } else if (op === 5) {
          const i = int(arr.length + 1);
          const v = value(1);
          cmd = ['JSON.ARRINSERT', key, text(p[0]), i, JSON.stringify(v)];
          arr.splice(i, 0, v);
        } else {
          if (!arr.length) continue;
          const a = int(arr.length);
          const b = a + int(arr.length - a);
          cmd = ['JSON.ARRTRIM', key, text(p[0]), a, b];
          arr.splice(0, arr.length, ...arr.slice(a, b + 1));
        }
      } else if (op === 7) {
        const p = pick(model, (v) => typeof v === 'number');
        if (!p) continue;
        const d = int(20) - 10;
        cmd = ['JSON.NUMINCRBY', key, text(p[0]), d];
        if (p[0].length === 0) model = (model as number) + d;
        else (at(model, p[0].slice(0, -1)) as Record<string, J>)[p[0][p[0].length - 1] as string] = (p[1] as number) + d;
      } else if (op === 8) {
        const p = pick(model, (v) => typeof v === 'string');
        if (!p) continue;
        cmd = ['JSON.STRAPPEND', key, text(p[0]), JSON.stringify('+é')];
        if (p[0].length === 0) model = `${model as string}+é`;
        else (at(model, p[0].slice(0, -1)) as Record<string, J>)[p[0][p[0].length - 1] as string] = `${p[1] as string}+é`;
      } else if (op === 9) {
        const p = pick(model, (v) => typeof v === 'boolean');
        if (!p) continue;
        cmd = ['JSON.TOGGLE', key, text(p[0])];
        if (p[0].length === 0) model = !(model as boolean);
        else (at(model, p[0].slice(0, -1)) as Record<string, J>)[p[0][p[0].length - 1] as string] = !(p[1] as boolean);
      } else if (op === 10) {
        const p = pick(model, (v) => (isArr(v) && v.length > 0) || (isObj(v) && Object.keys(v).length > 0));
        if (!p) continue;
        cmd = ['JSON.CLEAR', key, text(p[0])];
        if (isArr(p[1])) p[1].length = 0;
        else for (const k of Object.keys(p[1] as object)) delete (p[1] as Record<string, J>)[k];
      } else {
        const p = pick(model, isObj);
        if (!p) continue;
        const keys = Object.keys(p[1] as object);
        const patch: { [k: string]: J } = { [`k${keyN++}`]: value(1) };
        if (keys.length) patch[keys[int(keys.length)]] = rand() < 0.5 ? null : value(1);
        cmd = ['JSON.MERGE', key, text(p[0]), JSON.stringify(patch)];
        const merged = merge(p[1], patch);
        if (p[0].length === 0) model = merged;
      }
      const reply = await r.json(...cmd);
      assert.ok(!(reply && typeof reply === 'object' && 'message' in reply), `${cmd.join(' ')} -> ${JSON.stringify(reply)}`);
      if (step % 7 === 3) errorOf(await r.json('JSON.GET', key, '$[')); // an error flushes the cache
      const got = await r.json('JSON.GET', key);
      assert.equal(got, JSON.stringify(model), `seed ${seed} step ${step}: ${cmd.join(' ')}`);
    }
  })();
}

test('random write sequences match the model (3 seeds x 150 commands)', async () => {
  for (const seed of [1, 7, 42]) await run(seed, 150);
});

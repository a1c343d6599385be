/**
 * Field paths of the filter language (nested keys and "array element"):
 * parsing a path word into steps, and compiling the steps into a resolver closure.
 *
 * Path grammar (inside one word token, no spaces):
 *   path    = segment ( '.' segment )*
 *   segment = name index*
 *   name    = one or more characters other than '.' and '['   (from the word alphabet, so it may
 *             hold '#', '-' and ']': `industries#-1]` is the plain key "industries#-1]" — Upstash
 *             answers it with no error and no match)
 *   index   = '[' digit+ ']'          zero-based from the start
 *           | '[' '#' '-' digit+ ']'  from the end: '#' is the array length, so [#-1] is the last
 *   after an index only '.', '[' or the end of the word may follow.
 * `industries[]`, `industries[`, `a..b`, `a.` and `a[0]x` are syntax errors; `.invalidPath` never
 * reaches here (the lexer rejects a leading '.').
 *
 * Resolution: a key step applies only to a JSON object (own properties only, never inherited ones
 * such as `constructor`; arrays have no keys, so `tags.length` is missing); an index step only to
 * an array and only in range. A key whose value is `undefined` counts as missing; `null` is present.
 */
import { syntaxError, type FieldPath, type PathSegment } from './ast.js';

/**
 * Resolves a path against a metadata object (never null): the value, or `undefined` when the path
 * does not exist (JSON values are never `undefined`, so it is an unambiguous "missing" marker).
 */
export type Resolver = (root: Record<string, unknown>) => unknown;

/**
 * Parses the path word `text` found at offset `pos` of the filter.
 * @throws FilterSyntaxError pointing inside the word at the offending character
 */
export function parsePath(text: string, pos: number): FieldPath {
  const segments: PathSegment[] = [];
  const n = text.length;
  let i = 0;
  for (;;) {
    const nameStart = i;
    while (i < n && text[i] !== '.' && text[i] !== '[') i++;
    if (i === nameStart) {
      throw syntaxError(`empty key in field path '${text}'`, pos + i, 'keys are separated by single dots');
    }
    segments.push({ kind: 'key', key: text.slice(nameStart, i) });
    while (i < n && text[i] === '[') {
      const open = i;
      const close = text.indexOf(']', open + 1);
      if (close < 0) throw syntaxError(`unclosed '[' in field path '${text}'`, pos + open, "expected [i] or [#-k]");
      const inner = text.slice(open + 1, close);
      let m: RegExpExecArray | null;
      if ((m = /^[0-9]+$/.exec(inner))) segments.push({ kind: 'index', index: Number(m[0]) });
      else if ((m = /^#-([0-9]+)$/.exec(inner))) segments.push({ kind: 'fromEnd', offset: Number(m[1]) });
      else {
        const what = inner === '' ? `empty index '[]'` : `invalid index '[${inner}]'`;
        throw syntaxError(`${what} in field path '${text}'`, pos + open + 1, 'expected [i] or [#-k] with digits i, k');
      }
      i = close + 1;
    }
    if (i === n) break;
    if (text[i] !== '.') {
      throw syntaxError(`unexpected '${text[i]}' after ']' in field path '${text}'`, pos + i, "expected '.', '[' or the end of the path");
    }
    i++;
    if (i === n) throw syntaxError(`field path '${text}' ends with '.'`, pos + i - 1);
  }
  return { text, pos, segments };
}

/** True when a key is visible on plain objects through the prototype (`constructor`, `__proto__`…). */
function inherited(key: string): boolean {
  return key in Object.prototype;
}

const hasOwn = Object.prototype.hasOwnProperty;

/** Looks up `key` on `v` when `v` is a JSON object; `undefined` (missing) otherwise. */
function keyStep(v: unknown, key: string, checkOwn: boolean): unknown {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return undefined;
  if (checkOwn && !hasOwn.call(v, key)) return undefined;
  return (v as Record<string, unknown>)[key];
}

/** Applies an index step to `v`; `undefined` unless `v` is an array and the index is in range. */
function indexStep(v: unknown, seg: PathSegment): unknown {
  if (!Array.isArray(v)) return undefined;
  const i = seg.kind === 'index' ? seg.index : v.length - (seg as { offset: number }).offset;
  if (i < 0 || i >= v.length) return undefined;
  return v[i];
}

/**
 * Compiles a path into a resolver closure, built once per filter. The common one-key path is a
 * single property read; longer paths walk a precomputed step array.
 */
export function compilePath(path: FieldPath): Resolver {
  const segs = path.segments;
  const first = segs[0] as { kind: 'key'; key: string };
  const k0 = first.key;
  const own0 = inherited(k0);
  if (segs.length === 1) {
    if (own0) return (root) => (hasOwn.call(root, k0) ? root[k0] : undefined);
    return (root) => root[k0];
  }
  const rest = segs.slice(1);
  const owns = rest.map((s) => s.kind === 'key' && inherited(s.key));
  if (rest.every((s) => s.kind === 'key')) {
    const keys = rest.map((s) => (s as { key: string }).key);
    return (root) => {
      let v: unknown = own0 && !hasOwn.call(root, k0) ? undefined : root[k0];
      for (let j = 0; j < keys.length && v !== undefined; j++) v = keyStep(v, keys[j], owns[j]);
      return v;
    };
  }
  return (root) => {
    let v: unknown = own0 && !hasOwn.call(root, k0) ? undefined : root[k0];
    for (let j = 0; j < rest.length && v !== undefined; j++) {
      const s = rest[j];
      v = s.kind === 'key' ? keyStep(v, s.key, owns[j]) : indexStep(v, s);
    }
    return v;
  };
}

/**
 * Request parsing for the kv gateway (spec "Key-value REST interface"):
 * percent-decoded path segments, query-string arguments in order (`_token` excluded), and JSON
 * array bodies (numbers as written, booleans as `true`/`false`).
 */
import { kvError } from './errors.js';
import type { Arg } from './resp.js';

/** Percent-decodes one URL piece to an argument; invalid UTF-8 stays binary (a Buffer). */
export function decodePiece(s: string, plusIsSpace = false): Arg {
  if (plusIsSpace && s.includes('+')) s = s.replace(/\+/g, ' ');
  if (!s.includes('%')) return s;
  try {
    return decodeURIComponent(s);
  } catch {
    const out: number[] = [];
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      if (c === 37 && i + 2 < s.length && /^[0-9a-fA-F]{2}$/.test(s.slice(i + 1, i + 3))) {
        out.push(parseInt(s.slice(i + 1, i + 3), 16));
        i += 2;
      } else {
        for (const b of Buffer.from(s[i], 'utf8')) out.push(b);
      }
    }
    return Buffer.from(out);
  }
}

/** Splits `/a/b%2Fc/` into decoded segments (`['a', 'b/c']`); one trailing empty segment is dropped. */
export function pathSegments(path: string): Arg[] {
  // a scan by indexOf, not split(): no array of parts to copy (the usual path has 2-3 segments)
  const out: Arg[] = [];
  const first = path.indexOf('/');
  if (first < 0) return out;
  let from = first + 1;
  for (;;) {
    const slash = path.indexOf('/', from);
    if (slash < 0) {
      // the last segment; an empty one after a trailing slash is dropped unless it is the only one
      if (from < path.length || out.length === 0) out.push(decodePiece(path.slice(from)));
      return out;
    }
    out.push(decodePiece(path.slice(from, slash)));
    from = slash + 1;
  }
}

/**
 * Query parameters as extra arguments, in order: `name=value` gives `name value`, a bare `name`
 * (or `name=`) gives `name`; `_token` is skipped.
 */
export function queryArgs(query: string): Arg[] {
  const out: Arg[] = [];
  if (!query) return out;
  for (const pair of query.split('&')) {
    if (!pair) continue;
    const eq = pair.indexOf('=');
    const name = eq < 0 ? pair : pair.slice(0, eq);
    if (name === '_token') continue;
    out.push(decodePiece(name, true));
    if (eq >= 0 && eq < pair.length - 1) out.push(decodePiece(pair.slice(eq + 1), true));
  }
  return out;
}

/**
 * The literals of a command body's numbers, in order, read back from the text when their values do
 * not give them back: `JSON.parse` turns every number into a double, so an integer beyond 2^53
 * (`9007199254740993`, a 64-bit id as the Python SDK sends it: Python ints and floats go as JSON
 * numbers) would reach Redis rounded (`9007199254740992`), a longer one in exponent form, and `-0`
 * as `0`. A number whose value is a safe integer other than -0 is given as `String(value)`
 * (the common case, no re-read); at the first other one the command body is converted again with
 * every number given as written (one scan of the text and one more parse: only for such bodies).
 */
class NumberLiterals {
  private readonly list: string[] = [];
  private k = 0;

  /** `text` must be valid JSON (it was parsed): outside strings a number starts at `-` or a digit. */
  constructor(text: string) {
    const n = text.length;
    for (let i = 0; i < n; i++) {
      const c = text.charCodeAt(i);
      if (c === 34 /* " */) {
        for (i++; i < n; i++) {
          const d = text.charCodeAt(i);
          if (d === 92 /* \ */) i++;
          else if (d === 34) break;
        }
      } else if (c === 45 /* - */ || (c >= 48 && c <= 57)) {
        let j = i + 1;
        for (; j < n; j++) {
          const d = text.charCodeAt(j);
          // digits . e E + -
          if (!((d >= 48 && d <= 57) || d === 46 || d === 101 || d === 69 || d === 43 || d === 45)) break;
        }
        this.list.push(text.slice(i, j));
        i = j - 1;
      }
    }
  }

  /** The literal of the next number in text order. */
  next(): string {
    return this.list[this.k++];
  }
}

/** Thrown by {@link toArg} at a number that needs its literal (caught by the body converters below). */
const NEEDS_LITERALS = new Error('number literal needed');

/**
 * One JSON value of a command array as an argument; a number as its literal from `lit` when given,
 * else as `String(value)` when that is its literal (see {@link NumberLiterals}).
 * @throws KvError `invalidArgument` for other types; {@link NEEDS_LITERALS} for a number that needs `lit`
 */
function toArg(v: unknown, i: number, lit: NumberLiterals | undefined): Arg {
  switch (typeof v) {
    case 'string':
      return v;
    case 'number':
      if (lit !== undefined) return lit.next();
      if (!Number.isSafeInteger(v) || Object.is(v, -0)) throw NEEDS_LITERALS;
      return String(v);
    case 'boolean':
      return String(v);
    default:
      throw kvError('invalidArgument', i, v === null ? 'null' : typeof v);
  }
}

/** `["SET","k",1]` -> args (numbers as `lit` gives them when given). @throws KvError `invalidCommand`, `emptyCommand`, `invalidArgument`; {@link NEEDS_LITERALS} */
function commandFromJson(v: unknown, lit: NumberLiterals | undefined): Arg[] {
  if (!Array.isArray(v)) throw kvError('invalidCommand');
  if (v.length === 0) throw kvError('emptyCommand');
  // converted in place: the parsed array is ours (hot path: no copy)
  for (let i = 0; i < v.length; i++) if (typeof v[i] !== 'string') v[i] = toArg(v[i], i, lit);
  return v as Arg[];
}

/** `[["SET","k",1],["GET","k"]]` -> commands. @throws KvError `invalidPipeline`, `emptyPipeline`, or those of {@link commandFromJson} */
function commandsFromJson(v: unknown, lit: NumberLiterals | undefined): Arg[][] {
  if (!Array.isArray(v)) throw kvError('invalidPipeline');
  if (v.length === 0) throw kvError('emptyPipeline');
  const out: Arg[][] = new Array(v.length);
  for (let i = 0; i < v.length; i++) out[i] = commandFromJson(v[i], lit);
  return out;
}

/**
 * Parses a JSON body and converts it with `convert`, first with numbers as `String(value)`, again
 * from the text with every number as written when one needs it ({@link NumberLiterals}).
 * @throws KvError `missingBody`, `invalidJson`, or those of `convert`
 */
function fromBody<T>(body: Buffer | undefined, convert: (v: unknown, lit: NumberLiterals | undefined) => T): T {
  if (body === undefined || body.length === 0) throw kvError('missingBody');
  const text = body.toString('utf8');
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (err) {
    throw kvError('invalidJson', (err as Error).message);
  }
  try {
    return convert(v, undefined);
  } catch (err) {
    if (err !== NEEDS_LITERALS) throw err;
    return convert(JSON.parse(text), new NumberLiterals(text));
  }
}

/**
 * A command sent as a JSON array body (`POST /` `["SET","k",1]`): strings as they are, numbers as
 * written (see {@link NumberLiterals}), booleans as `true`/`false`.
 * @throws KvError `missingBody`, `invalidJson`, `invalidCommand`, `emptyCommand`, `invalidArgument`
 */
export function commandFromBody(body: Buffer | undefined): Arg[] {
  return fromBody(body, commandFromJson);
}

/**
 * The commands of a `/pipeline` or `/multi-exec` body (`[["SET","k",1],["GET","k"]]`), their
 * arguments as {@link commandFromBody} gives them.
 * @throws KvError `missingBody`, `invalidJson`, `invalidPipeline`, `emptyPipeline`, or those of {@link commandFromBody}
 */
export function commandsFromBody(body: Buffer | undefined): Arg[][] {
  return fromBody(body, commandsFromJson);
}

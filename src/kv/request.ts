/**
 * Request parsing for the kv gateway (spec "Key-value REST interface"):
 * percent-decoded path segments, query-string arguments in order (`_token` excluded), and JSON
 * array bodies (numbers and booleans stringified as the SDK sends them).
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

/** One JSON value of a command array as an argument. @throws KvError `invalidArgument` for other types */
function toArg(v: unknown, i: number): Arg {
  switch (typeof v) {
    case 'string':
      return v;
    case 'number':
    case 'boolean':
      return String(v);
    default:
      throw kvError('invalidArgument', i, v === null ? 'null' : typeof v);
  }
}

/** `["SET","k",1]` -> args. @throws KvError `invalidCommand`, `emptyCommand`, `invalidArgument` */
export function commandFromJson(v: unknown): Arg[] {
  if (!Array.isArray(v)) throw kvError('invalidCommand');
  if (v.length === 0) throw kvError('emptyCommand');
  // converted in place: the parsed array is ours (hot path: no copy)
  for (let i = 0; i < v.length; i++) if (typeof v[i] !== 'string') v[i] = toArg(v[i], i);
  return v as Arg[];
}

/** `[["SET","k",1],["GET","k"]]` -> commands. @throws KvError `invalidPipeline`, `emptyPipeline`, or those of {@link commandFromJson} */
export function commandsFromJson(v: unknown): Arg[][] {
  if (!Array.isArray(v)) throw kvError('invalidPipeline');
  if (v.length === 0) throw kvError('emptyPipeline');
  return v.map(commandFromJson);
}

/** Parses a JSON body. @throws KvError `missingBody`, `invalidJson` */
export function parseJsonBody(body: unknown): unknown {
  if (!Buffer.isBuffer(body) || body.length === 0) throw kvError('missingBody');
  try {
    return JSON.parse(body.toString('utf8'));
  } catch (err) {
    throw kvError('invalidJson', (err as Error).message);
  }
}

/**
 * Request parsing for the kv gateway (spec "Key-value REST interface"):
 * percent-decoded path segments, query-string arguments in order (`_token` excluded), and JSON
 * array bodies (numbers and booleans stringified as the SDK sends them).
 */
import type { Arg } from './resp.js';

/** A request input error: answered 400 with `message`. */
export class RequestError extends Error {}

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
  const parts = path.split('/');
  parts.shift();
  if (parts.length > 1 && parts[parts.length - 1] === '') parts.pop();
  const out: Arg[] = new Array(parts.length);
  for (let i = 0; i < parts.length; i++) out[i] = decodePiece(parts[i]);
  return out;
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

/** One JSON value of a command array as an argument. @throws RequestError for other types */
function toArg(v: unknown, i: number): Arg {
  switch (typeof v) {
    case 'string':
      return v;
    case 'number':
    case 'boolean':
      return String(v);
    default:
      throw new RequestError(`ERR invalid command: argument ${i} must be a string, number or boolean, got ${v === null ? 'null' : typeof v}`);
  }
}

/** `["SET","k",1]` -> args. @throws RequestError */
export function commandFromJson(v: unknown): Arg[] {
  if (!Array.isArray(v)) throw new RequestError('ERR invalid command: expected a JSON array of a command name and its arguments');
  if (v.length === 0) throw new RequestError('ERR empty command');
  // converted in place: the parsed array is ours (hot path: no copy)
  for (let i = 0; i < v.length; i++) if (typeof v[i] !== 'string') v[i] = toArg(v[i], i);
  return v as Arg[];
}

/** `[["SET","k",1],["GET","k"]]` -> commands. @throws RequestError */
export function commandsFromJson(v: unknown): Arg[][] {
  if (!Array.isArray(v)) throw new RequestError('ERR invalid request: expected a two-dimensional JSON array of commands');
  if (v.length === 0) throw new RequestError('ERR empty pipeline: expected at least one command');
  return v.map(commandFromJson);
}

/** Parses a JSON body. @throws RequestError on missing or malformed JSON */
export function parseJsonBody(body: unknown): unknown {
  if (!Buffer.isBuffer(body) || body.length === 0) throw new RequestError('ERR missing request body: expected a JSON array');
  try {
    return JSON.parse(body.toString('utf8'));
  } catch (err) {
    throw new RequestError(`ERR invalid JSON body: ${(err as Error).message}`);
  }
}

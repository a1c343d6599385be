/**
 * Reply -> JSON text (spec "Key-value REST response"). Hand-written for the
 * hot path: no intermediate objects, one string per response.
 *
 * - bulk strings: UTF-8 text (invalid bytes become U+FFFD), or base64 with `Svc-Encoding: base64`
 * - simple strings: text, or base64 too — except the top-level `OK`
 * - integers as JSON numbers (beyond 2^53 as exact digits), null as `null`, arrays recursed
 * - an error nested inside an array (e.g. in a Lua table) is emitted as its message string
 */
import { OK, RespError, SimpleString, type Reply } from './resp.js';

function str(s: string, b64: boolean): string {
  return b64 ? `"${Buffer.from(s, 'utf8').toString('base64')}"` : JSON.stringify(s);
}

/** JSON text of a reply value (`top`: apply the top-level `OK` exception). */
export function replyJson(r: Reply, b64: boolean, top: boolean): string {
  if (r === null) return 'null';
  if (Buffer.isBuffer(r)) return b64 ? `"${r.toString('base64')}"` : JSON.stringify(r.toString('utf8'));
  switch (typeof r) {
    case 'number':
      return String(r);
    case 'bigint':
      return r.toString();
  }
  if (Array.isArray(r)) {
    if (r.length === 0) return '[]';
    let s = '[' + replyJson(r[0], b64, false);
    for (let i = 1; i < r.length; i++) s += ',' + replyJson(r[i], b64, false);
    return s + ']';
  }
  if (r instanceof SimpleString) return top && r.value === 'OK' ? '"OK"' : str(r.value, b64);
  if (r instanceof RespError) return str(r.message, b64);
  return 'null';
}

/** `{"result":...}` or `{"error":"..."}` for one top-level reply. */
export function itemJson(r: Reply, b64: boolean): string {
  if (r instanceof RespError) return `{"error":${JSON.stringify(r.message)}}`;
  return `{"result":${replyJson(r, b64, true)}}`;
}

/** `{"result":"OK"}`: the answer of every `SET` (and other `+OK` replies). */
const RESULT_OK = '{"result":"OK"}';
const RESULT_NULL = '{"result":null}';

/**
 * A character that may not stand in a JSON string as it is, or whose latin1 and UTF-8 decodings
 * differ: anything but printable ASCII and DEL (0x20-0x7f), and `"` and `\\` (RFC 8259 section 7:
 * those two and the control characters below 0x20 must be escaped).
 */
const NOT_PLAIN = /[^\x20\x21\x23-\x5b\x5d-\x7f]/;

/**
 * {@link itemJson} of a top-level reply without base64 when its text is known to be ASCII only
 * (its length in characters is its length in bytes; written as latin1): `+OK`, nil, an integer,
 * or a bulk string of plain characters only ({@link NOT_PLAIN}): it is decoded as latin1 (a copy,
 * no UTF-8 decoding) and checked by one regular expression scan, no `JSON.stringify`. Undefined
 * for any other reply (the caller then uses {@link itemJson}).
 */
export function asciiItemJson(r: Reply): string | undefined {
  if (r === OK) return RESULT_OK;
  if (r === null) return RESULT_NULL;
  if (Buffer.isBuffer(r)) {
    const s = r.toString('latin1', 0, r.length);
    return NOT_PLAIN.test(s) ? undefined : '{"result":"' + s + '"}';
  }
  if (typeof r === 'number') return '{"result":' + String(r) + '}';
  return undefined;
}

/** `{"error":"..."}`. */
export function errorJson(message: string): string {
  return `{"error":${JSON.stringify(message)}}`;
}

/** `[{"result":...},{"error":"..."},...]` for a pipeline or transaction reply list. */
export function itemsJson(replies: readonly Reply[], b64: boolean): string {
  let s = '[';
  for (let i = 0; i < replies.length; i++) {
    if (i) s += ',';
    s += itemJson(replies[i], b64);
  }
  return s + ']';
}

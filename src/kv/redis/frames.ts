/**
 * Framing of RESP2 streams without building values, for svc's topology router (`router.ts`), which
 * forwards most bytes unchanged and only needs to look at a few of them:
 *
 * - {@link CommandFrames}: the commands a client sends (RESP arrays of bulk strings, as every
 *   RESP client sends them; an inline command or any other type is a protocol error). Each
 *   complete command is handed over as its frame's exact bytes plus the offsets of its arguments
 *   (no `Buffer` per argument): the router decodes only the command name and the keys.
 * - {@link replyEnd}: where one reply (any RESP2 type, nested arrays included) ends, so node
 *   replies can be passed back as bytes and parsed only when the router must read them.
 *
 * Source of the rules: https://redis.io/docs/reference/protocol-spec/ (RESP2 part).
 */
import { kvError } from '../errors.js';
import type { Arg } from '../resp.js';

/** Result of {@link replyEnd} / a command scan when the bytes end before the frame: more bytes are needed. */
export const INCOMPLETE = -1;

/** Position of the CR of the line starting at `from`, or -1 when the line is not complete (CRLF checked). */
function lineEnd(buf: Buffer, from: number, len: number): number {
  // a JS scan for the short lines (`+OK`, `:1`), the native search beyond (a long error text)
  let eol = from;
  const stop = Math.min(len, from + 32);
  while (eol < stop && buf[eol] !== 13) eol++;
  if (eol === stop) eol = stop < len ? buf.indexOf(13, stop) : -1;
  if (eol < 0 || eol + 1 >= len) return -1;
  if (buf[eol + 1] !== 10) throw kvError('databaseProtocolError', 'expected CRLF');
  return eol;
}

/** {@link lengthLine}'s answer when the line is not complete. */
const NO_LINE = -2;

/** Where the line read by the last {@link lengthLine} ends (after its CRLF). */
let lineNext = 0;

/**
 * The decimal length (`-1`, or `0..`) on the line starting at `from` (after the type byte), with
 * {@link lineNext} set after its CRLF; or {@link NO_LINE} when the line is not all there.
 * @throws KvError databaseProtocolError
 */
function lengthLine(buf: Buffer, from: number, len: number): number {
  let i = from;
  const negative = i < len && buf[i] === 45;
  if (negative) i++;
  let n = 0;
  let digits = 0;
  for (; i < len; i++, digits++) {
    const c = buf[i];
    if (c === 13) break;
    if (c < 48 || c > 57) throw kvError('databaseProtocolError', 'bad length');
    n = n * 10 + (c - 48);
  }
  if (i + 1 >= len) return NO_LINE;
  if (buf[i + 1] !== 10 || digits === 0 || (negative && n !== 1)) throw kvError('databaseProtocolError', 'bad length');
  lineNext = i + 2;
  return negative ? -1 : n;
}

/**
 * The end (exclusive) of the RESP2 reply starting at `pos` in `buf[..len]`; when the bytes end
 * before it, a negative number: `-1 - need` with `need` the end the reply needs at least (known
 * once a bulk string's length was read; else 0, so {@link INCOMPLETE}). Nested arrays are walked
 * with a counter (no recursion, no values built).
 * @throws KvError databaseProtocolError (not RESP2)
 */
export function replyEnd(buf: Buffer, pos: number, len: number): number {
  let pending = 1; // values still to read
  while (pending > 0) {
    if (pos >= len) return INCOMPLETE;
    const type = buf[pos];
    pending--;
    switch (type) {
      case 43: // +
      case 45: // -
      case 58: {
        // :
        const eol = lineEnd(buf, pos + 1, len);
        if (eol < 0) return INCOMPLETE;
        pos = eol + 2;
        break;
      }
      case 36: {
        // $
        const n = lengthLine(buf, pos + 1, len);
        if (n === NO_LINE) return INCOMPLETE;
        pos = n < 0 ? lineNext : lineNext + n + 2;
        if (pos > len) return -1 - pos;
        break;
      }
      case 42: {
        // *
        const n = lengthLine(buf, pos + 1, len);
        if (n === NO_LINE) return INCOMPLETE;
        pos = lineNext;
        if (n > 0) pending += n;
        break;
      }
      default:
        throw kvError('databaseProtocolError', `unexpected RESP type byte ${type}`);
    }
  }
  return pos;
}

const EMPTY = Buffer.alloc(0);

/**
 * Bytes gathered for one socket write: appended by copy (no view or list per piece), taken at
 * once; the next append starts a new buffer (the socket owns the one taken).
 */
export class OutBytes {
  private buf = EMPTY;
  /** Bytes appended since the last {@link take}. */
  length = 0;
  /**
   * The length of the last {@link take}: a new buffer starts that large, up to 64 KiB (one
   * allocation per write in a steady stream, not one per doubling; one large write does not make
   * every later buffer large).
   */
  private last = 0;

  /** Copies `data[from .. to]` behind what was appended (the buffer grows as needed). */
  append(data: Buffer, from = 0, to = data.length): void {
    const n = to - from;
    let buf = this.buf;
    if (this.length + n > buf.length) {
      const grown = Buffer.allocUnsafe(Math.max(buf.length * 2, this.length + n, Math.min(this.last + (this.last >> 2), 65536), 2048));
      buf.copy(grown, 0, 0, this.length);
      this.buf = buf = grown;
    }
    const at = this.length;
    if (n < 64) for (let i = 0; i < n; i++) buf[at + i] = data[from + i];
    else data.copy(buf, at, from, to);
    this.length = at + n;
  }

  /** What was appended (a view), and a fresh start. */
  take(): Buffer {
    const out = this.buf.subarray(0, this.length);
    this.buf = EMPTY;
    this.last = this.length;
    this.length = 0;
    return out;
  }
}

/**
 * The bytes of a frame (a command or a reply) that is not complete yet: the chunks are kept until
 * the length its headers announce has arrived, then joined once (so a large value costs one
 * copy, not one per chunk).
 */
export class PartialFrame {
  private parts: Buffer[] = [];
  private bytes = 0;
  private need = 0;

  /** The bytes to scan after `chunk` arrived (the kept ones joined before it), or undefined while the frame cannot be complete yet. */
  take(chunk: Buffer): Buffer | undefined {
    if (this.bytes === 0) return chunk;
    this.parts.push(chunk);
    this.bytes += chunk.length;
    if (this.bytes < this.need) return undefined;
    const buf = Buffer.concat(this.parts, this.bytes);
    this.reset();
    return buf;
  }

  /** Keeps `buf[pos ..]`, an incomplete frame that ends at `end` of `buf` at least (0: unknown). */
  keep(buf: Buffer, pos: number, end: number): void {
    const rest = pos === 0 ? buf : buf.subarray(pos);
    this.parts = [rest];
    this.bytes = rest.length;
    this.need = end > 0 ? end - pos : 0;
  }

  reset(): void {
    this.parts = [];
    this.bytes = 0;
    this.need = 0;
  }

  /** Bytes kept. */
  get size(): number {
    return this.bytes;
  }

  /** The length the kept frame needs at least (0: unknown). */
  get needed(): number {
    return this.need;
  }

  /** Keeps `piece` too (the frame is still incomplete with it). */
  add(piece: Buffer): void {
    this.parts.push(piece);
    this.bytes += piece.length;
  }

  /** The kept bytes joined with `chunk[from .. to]` (one copy); nothing is kept after. */
  join(chunk: Buffer, from: number, to: number): Buffer {
    this.parts.push(chunk.subarray(from, to));
    const buf = Buffer.concat(this.parts, this.bytes + to - from);
    this.reset();
    return buf;
  }
}

/**
 * Splits a client's byte stream into commands. `onCommand(f)` runs once per complete command with
 * `f.buf[f.start .. f.end]` its exact bytes and argument `i` at `f.buf[f.argStart(i) .. f.argEnd(i)]`
 * (valid during the call only: copy what is kept; `f.buf` itself is never written to, so views
 * of it may be kept). A command split over several chunks is assembled once all of its bytes
 * are there (chunks are collected until the length the headers announce has arrived, so a large
 * value costs one copy).
 */
export class CommandFrames {
  buf: Buffer = Buffer.alloc(0);
  start = 0;
  end = 0;
  /** Number of arguments of the current command (the name included). */
  length = 0;
  private off = new Int32Array(256);
  /** An incomplete command. */
  private readonly pending = new PartialFrame();
  /** The end an incomplete command needs at least, set by {@link scan} (0: unknown). */
  private need = 0;

  constructor(private readonly onCommand: (f: CommandFrames) => void) {}

  argStart(i: number): number {
    return this.off[2 * i];
  }

  argEnd(i: number): number {
    return this.off[2 * i + 1];
  }

  /** Argument `i` as latin1 text, lower-cased (command names, subcommands, keywords). */
  lower(i: number): string {
    return this.buf.toString('latin1', this.off[2 * i], this.off[2 * i + 1]).toLowerCase();
  }

  /** The command's name, lower-cased (the string of the previous command when the bytes are the same). */
  name(): string {
    const from = this.off[0];
    const n = this.off[1] - from;
    const last = this.lastName;
    if (n === last.length) {
      let i = 0;
      while (i < n && this.buf[from + i] === last[i]) i++;
      if (i === n) return this.lastNameText;
    }
    this.lastName = Buffer.from(this.buf.subarray(from, from + n));
    return (this.lastNameText = this.lower(0));
  }

  private lastName: Buffer = Buffer.alloc(0);
  private lastNameText = '';

  /** The arguments as views of {@link buf} (for the paths that need them). */
  args(): Arg[] {
    const out: Arg[] = new Array(this.length);
    for (let i = 0; i < this.length; i++) out[i] = this.buf.subarray(this.off[2 * i], this.off[2 * i + 1]);
    return out;
  }

  /** The exact bytes of the current command (a view of {@link buf}). */
  raw(): Buffer {
    return this.buf.subarray(this.start, this.end);
  }

  /**
   * Scans `chunk` (after any incomplete command kept from earlier chunks: that command is completed
   * with only the bytes of `chunk` it needs, so a chunk is not copied because a command crossed
   * its start). @throws KvError databaseProtocolError
   */
  feed(chunk: Buffer): void {
    let pos = 0;
    const pending = this.pending;
    while (pending.size > 0) {
      const kept = pending.size;
      const need = pending.needed;
      const avail = chunk.length - pos;
      if (avail <= 0) return;
      if (need > kept && need - kept > avail) {
        pending.add(pos === 0 ? chunk : chunk.subarray(pos));
        return;
      }
      // the bytes up to the argument that was cut (or a few header bytes when that is not known);
      // a large kept command (many arguments) takes the whole chunk at once: copies stay linear
      const take = kept > 16384 ? avail : Math.min(avail, need > kept ? need - kept : 64);
      const buf = pending.join(chunk, pos, pos + take);
      pos += take;
      const end = this.scan(buf, 0, buf.length);
      if (end === INCOMPLETE) {
        pending.keep(buf, 0, this.need);
        continue;
      }
      pos -= buf.length - end; // bytes taken past the command's end are scanned in the chunk
      this.buf = buf;
      this.start = 0;
      this.end = end;
      this.onCommand(this);
    }
    const buf = chunk;
    this.buf = buf;
    const len = buf.length;
    while (pos < len) {
      const end = this.scan(buf, pos, len);
      if (end === INCOMPLETE) return this.pending.keep(buf, pos, this.need);
      this.start = pos;
      this.end = end;
      pos = end;
      this.onCommand(this);
    }
  }

  /** Drops an incomplete command. */
  reset(): void {
    this.pending.reset();
  }

  /** The end of the command at `pos`, its argument offsets in {@link off}; or INCOMPLETE ({@link need} set). */
  private scan(buf: Buffer, pos: number, len: number): number {
    this.need = 0;
    if (buf[pos] !== 42) throw kvError('databaseProtocolError', `expected a RESP array, got type byte ${buf[pos]}`);
    const n = lengthLine(buf, pos + 1, len);
    if (n === NO_LINE) return INCOMPLETE;
    if (n <= 0) throw kvError('databaseProtocolError', 'empty command');
    if (this.off.length < 2 * n) this.off = new Int32Array(2 * n);
    const off = this.off;
    let at = lineNext;
    for (let i = 0; i < n; i++) {
      if (at >= len) return INCOMPLETE;
      if (buf[at] !== 36) throw kvError('databaseProtocolError', `expected a bulk string, got type byte ${buf[at]}`);
      const size = lengthLine(buf, at + 1, len);
      if (size === NO_LINE) return INCOMPLETE;
      if (size < 0) throw kvError('databaseProtocolError', 'null argument');
      const body = lineNext;
      if (body + size + 2 > len) {
        this.need = body + size + 2;
        return INCOMPLETE;
      }
      if (buf[body + size] !== 13 || buf[body + size + 1] !== 10) throw kvError('databaseProtocolError', 'expected CRLF');
      off[2 * i] = body;
      off[2 * i + 1] = body + size;
      at = body + size + 2;
    }
    this.length = n;
    return at;
  }
}

/** The arguments of one complete command `raw` (its exact RESP bytes) as views of it. @throws KvError databaseProtocolError */
export function commandArgs(raw: Buffer): Arg[] {
  let out: Arg[] = [];
  new CommandFrames((f) => {
    out = f.args();
  }).feed(raw);
  return out;
}

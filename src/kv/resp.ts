/**
 * RESP2 (REdis Serialization Protocol v2) reply types, a resumable streaming parser and a command
 * encoder. Source of the rules: https://redis.io/docs/reference/protocol-spec/ (RESP2 part).
 *
 * Reply shapes (kept distinct, as the gateway must):
 * - simple string `+OK`  -> {@link SimpleString}
 * - error `-ERR ...`     -> {@link RespError}
 * - integer `:1`         -> `number` (or `bigint` outside the safe-integer range)
 * - bulk string `$3 bar` -> `Buffer` (binary-safe; a view into the socket chunk when possible)
 * - null bulk / array    -> `null`
 * - array `*2 ...`       -> `Reply[]`
 */
import { kvError } from './errors.js';


/** A RESP simple string (`+PONG`). */
export class SimpleString {
  constructor(readonly value: string) {}
}

/** A RESP error reply (`-ERR ...`); `message` is the text without the leading `-`. Not thrown. */
export class RespError {
  constructor(readonly message: string) {}
}

export type Reply = SimpleString | RespError | Buffer | number | bigint | null | Reply[];

/** The shared `+OK` instance (compare with `===` or `.value`). */
export const OK = new SimpleString('OK');
const QUEUED = new SimpleString('QUEUED');
const PONG = new SimpleString('PONG');

/** A command argument: strings are sent as UTF-8, Buffers as they are. */
export type Arg = string | Buffer;


interface Frame {
  arr: Reply[];
  need: number;
}

/**
 * Streaming RESP2 parser. Call {@link feed} with each socket chunk; every complete top-level reply
 * is passed to `onReply(reply, raw)`. `raw` (the exact bytes of that reply) is only assembled
 * when `wantRaw()` returns true at the moment the reply starts (the caller asks for it per reply,
 * e.g. for `Svc-Response-Format: resp2`).
 *
 * Resumable: nested arrays are kept on a stack and a large bulk body is copied into one
 * pre-sized buffer as chunks arrive, so a reply split over many chunks is parsed in linear time.
 */
export class RespParser {
  private buf: Buffer = Buffer.alloc(0);
  private pos = 0;
  private stack: Frame[] = [];
  /** Bulk body in progress: target buffer (len + CRLF) and bytes filled. */
  private bulk: Buffer | undefined;
  private bulkFilled = 0;
  /** Raw capture of the current top-level reply. */
  private capturing = false;
  private rawStart = 0;
  private rawParts: Buffer[] = [];
  private inReply = false;
  private completed: Reply = null;

  constructor(
    private readonly onReply: (reply: Reply, raw: Buffer | undefined) => void,
    private readonly wantRaw: () => boolean = () => false,
  ) {}

  /** Parses as much of `chunk` (plus any leftover) as possible. @throws KvError `databaseProtocolError` (the stream is not valid RESP2: the connection must close) */
  feed(chunk: Buffer): void {
    if (this.bulk) {
      const need = this.bulk.length - this.bulkFilled;
      const n = Math.min(need, chunk.length);
      chunk.copy(this.bulk, this.bulkFilled, 0, n);
      this.bulkFilled += n;
      if (this.capturing) this.rawParts.push(chunk.subarray(0, n));
      if (this.bulkFilled < this.bulk.length) return;
      const body = this.bulk.subarray(0, this.bulk.length - 2);
      this.bulk = undefined;
      this.buf = chunk;
      this.pos = n;
      this.rawStart = n;
      if (this.push(body)) this.finish();
    } else if (this.pos < this.buf.length) {
      const left = this.buf.subarray(this.pos);
      if (this.capturing && this.inReply) {
        // keep what was captured of this buffer before the leftover
        if (this.pos > this.rawStart) this.rawParts.push(this.buf.subarray(this.rawStart, this.pos));
      }
      this.buf = Buffer.concat([left, chunk]);
      this.pos = 0;
      this.rawStart = 0;
    } else {
      if (this.capturing && this.inReply && this.buf.length > this.rawStart) {
        this.rawParts.push(this.buf.subarray(this.rawStart, this.buf.length));
      }
      this.buf = chunk;
      this.pos = 0;
      this.rawStart = 0;
    }
    this.parse();
  }

  /** Drops all state (after the connection closed). */
  reset(): void {
    this.buf = Buffer.alloc(0);
    this.pos = 0;
    this.stack = [];
    this.bulk = undefined;
    this.capturing = false;
    this.rawParts = [];
    this.inReply = false;
  }

  private parse(): void {
    const buf = this.buf;
    const len = buf.length;
    while (this.pos < len) {
      if (!this.inReply) {
        this.inReply = true;
        this.capturing = this.wantRaw();
        this.rawStart = this.pos;
        this.rawParts.length = 0;
      }
      const start = this.pos;
      const type = buf[start];
      const eol = buf.indexOf(13, start + 1);
      if (eol < 0 || eol + 1 >= len) return; // incomplete line: wait for more
      if (buf[eol + 1] !== 10) throw kvError('databaseProtocolError', 'expected CRLF');
      let value: Reply;
      switch (type) {
        case 43: /* + */ {
          if (eol === start + 3 && buf[start + 1] === 79 && buf[start + 2] === 75) {
            // `+OK`, the usual answer to a write: no string made
            value = OK;
            this.pos = eol + 2;
            break;
          }
          const s = buf.toString('utf8', start + 1, eol);
          value = s === 'OK' ? OK : s === 'QUEUED' ? QUEUED : s === 'PONG' ? PONG : new SimpleString(s);
          this.pos = eol + 2;
          break;
        }
        case 45: /* - */
          value = new RespError(buf.toString('utf8', start + 1, eol));
          this.pos = eol + 2;
          break;
        case 58: /* : */
          value = parseInteger(buf, start + 1, eol);
          this.pos = eol + 2;
          break;
        case 36: /* $ */ {
          const n = parseLength(buf, start + 1, eol);
          if (n < 0) {
            value = null;
            this.pos = eol + 2;
            break;
          }
          const bodyStart = eol + 2;
          if (bodyStart + n + 2 <= len) {
            value = buf.subarray(bodyStart, bodyStart + n);
            this.pos = bodyStart + n + 2;
            break;
          }
          // body spans chunks: copy into a pre-sized buffer
          this.bulk = Buffer.allocUnsafe(n + 2);
          this.bulkFilled = len - bodyStart;
          buf.copy(this.bulk, 0, bodyStart, len);
          if (this.capturing) this.rawParts.push(buf.subarray(this.rawStart, len));
          this.pos = len;
          this.rawStart = len;
          return;
        }
        case 42: /* * */ {
          const n = parseLength(buf, start + 1, eol);
          this.pos = eol + 2;
          if (n < 0) value = null;
          else if (n === 0) value = [];
          else {
            this.stack.push({ arr: new Array<Reply>(n), need: n });
            continue;
          }
          break;
        }
        default:
          throw kvError('databaseProtocolError', `unexpected RESP type byte ${type}`);
      }
      if (this.push(value)) this.finish();
    }
  }

  /** Adds a completed value to the open array (if any); true when a top-level reply completed. */
  private push(value: Reply): boolean {
    let v = value;
    const stack = this.stack;
    // (an index in range only: reading `stack[-1]` is a keyed lookup of the property "-1")
    while (stack.length > 0) {
      const top = stack[stack.length - 1];
      top.arr[top.arr.length - top.need] = v;
      if (--top.need > 0) return false;
      stack.pop();
      v = top.arr;
    }
    this.completed = v;
    return true;
  }

  private finish(): void {
    let raw: Buffer | undefined;
    if (this.capturing) {
      const tail = this.buf.subarray(this.rawStart, this.pos);
      raw = this.rawParts.length ? Buffer.concat([...this.rawParts, tail]) : tail;
      this.rawParts = [];
    }
    this.inReply = false;
    this.capturing = false;
    const v = this.completed;
    this.completed = null;
    this.onReply(v, raw);
  }
}

function parseLength(buf: Buffer, from: number, to: number): number {
  if (buf[from] === 45) return -1; // "-1"
  let n = 0;
  for (let i = from; i < to; i++) {
    const c = buf[i] - 48;
    if (c < 0 || c > 9) throw kvError('databaseProtocolError', 'bad length');
    n = n * 10 + c;
  }
  return n;
}

function parseInteger(buf: Buffer, from: number, to: number): number | bigint {
  if (to - from > 15) {
    const s = buf.toString('latin1', from, to);
    const b = BigInt(s);
    return b >= BigInt(Number.MIN_SAFE_INTEGER) && b <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(b) : b;
  }
  let neg = false;
  let i = from;
  if (buf[i] === 45) {
    neg = true;
    i++;
  }
  let n = 0;
  for (; i < to; i++) n = n * 10 + (buf[i] - 48);
  return neg ? -n : n;
}

/**
 * The RESP2 encoding of one command (`*N\r\n$len\r\narg\r\n...`): a string when every argument
 * is a string (the common case, written by the socket as UTF-8), else one Buffer (allocated once
 * at its exact size). Callers join pieces for a pipeline (see {@link encodeCommands}).
 */
export function encodeCommand(args: readonly Arg[]): string | Buffer {
  let s = `*${args.length}\r\n`;
  let i = 0;
  for (; i < args.length; i++) {
    const a = args[i];
    if (typeof a !== 'string') break;
    s += `$${Buffer.byteLength(a)}\r\n${a}\r\n`;
  }
  if (i === args.length) return s;
  if (i === args.length - 1) {
    // the usual binary command: only the last argument is a Buffer (a SET value from a request
    // body): its length line joins the text, then one Buffer gets the text, the value and CRLF
    const v = args[i] as Buffer;
    s += `$${v.length}\r\n`;
    const textBytes = Buffer.byteLength(s);
    const one = Buffer.allocUnsafe(textBytes + v.length + 2);
    one.write(s, 0, 'utf8');
    v.copy(one, textBytes);
    one[textBytes + v.length] = 13;
    one[textBytes + v.length + 1] = 10;
    return one;
  }
  // binary arguments (e.g. a SET value from a request body): one Buffer, sized first, written once
  let size = Buffer.byteLength(s);
  for (let k = i; k < args.length; k++) {
    const a = args[k];
    const n = typeof a === 'string' ? Buffer.byteLength(a) : a.length;
    size += 1 + digits(n) + 2 + n + 2;
  }
  const out = Buffer.allocUnsafe(size);
  let at = out.write(s, 0, 'utf8');
  for (let k = i; k < args.length; k++) {
    const a = args[k];
    const n = typeof a === 'string' ? Buffer.byteLength(a) : a.length;
    at += out.write(`$${n}\r\n`, at, 'latin1');
    if (typeof a === 'string') at += out.write(a, at, 'utf8');
    else at += a.copy(out, at);
    out[at++] = 13;
    out[at++] = 10;
  }
  return out;
}

/** Decimal digits of a non-negative integer. */
function digits(n: number): number {
  let d = 1;
  while (n >= 10) {
    n = Math.floor(n / 10);
    d++;
  }
  return d;
}

/** The encoding of several commands as one write (string when possible, else one Buffer). */
export function encodeCommands(cmds: readonly (readonly Arg[])[]): string | Buffer {
  // hot path (/pipeline): all arguments strings -> one string built in a single pass
  let s = '';
  let allStrings = true;
  for (let c = 0; c < cmds.length && allStrings; c++) {
    const args = cmds[c];
    s += `*${args.length}\r\n`;
    for (let i = 0; i < args.length; i++) {
      const a = args[i];
      if (typeof a !== 'string') {
        allStrings = false;
        break;
      }
      s += `$${Buffer.byteLength(a)}\r\n${a}\r\n`;
    }
  }
  if (allStrings) return s;
  const pieces = cmds.map(encodeCommand);
  if (pieces.every((p) => typeof p === 'string')) return (pieces as string[]).join('');
  return Buffer.concat(pieces.map((p) => (typeof p === 'string' ? Buffer.from(p) : p)));
}

/** RESP2 bytes of an error reply (used for refused commands in resp2 output). */
export function encodeError(message: string): Buffer {
  return Buffer.from(`-${message.replace(/[\r\n]+/g, ' ')}\r\n`);
}

/**
 * RESP2 bytes of a reply value (replies svc changed after Redis answered, for
 * `Svc-Response-Format: resp2`; unchanged replies keep Redis's own bytes).
 */
export function encodeReply(r: Reply): Buffer {
  const parts: Buffer[] = [];
  const walk = (v: Reply): void => {
    if (v === null) parts.push(Buffer.from('$-1\r\n'));
    else if (Buffer.isBuffer(v)) parts.push(Buffer.from(`$${v.length}\r\n`), v, Buffer.from('\r\n'));
    else if (typeof v === 'number' || typeof v === 'bigint') parts.push(Buffer.from(`:${v}\r\n`));
    else if (v instanceof SimpleString) parts.push(Buffer.from(`+${v.value}\r\n`));
    else if (v instanceof RespError) parts.push(encodeError(v.message));
    else {
      parts.push(Buffer.from(`*${v.length}\r\n`));
      for (const x of v) walk(x);
    }
  };
  walk(r);
  return Buffer.concat(parts);
}

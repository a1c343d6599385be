/**
 * Where a command's keys are, and which Redis Cluster hash slot they map to.
 *
 * - {@link keySlot}: CRC16 (XMODEM) of the key, or of its `{hash tag}`, modulo 16384 (the Redis
 *   Cluster specification, "Key distribution model" and "Hash tags").
 * - {@link KeyTable}: the key positions of every command, read from the server's own `COMMAND`
 *   reply: the Redis 7 key specifications (`begin_search` index/keyword, `find_keys` range/keynum,
 *   the algorithm of Redis's `getKeysUsingKeySpecs`), else the legacy first/last/step triple.
 *   Commands whose keys the table cannot tell (a key spec of type `unknown`, or `incomplete`) are
 *   answered `undefined`: the caller asks the server with `COMMAND GETKEYS`.
 */
import type { Arg, Reply } from '../resp.js';
import { RespError, SimpleString } from '../resp.js';

const CRC16_TABLE = (() => {
  const t = new Uint16Array(256);
  for (let i = 0; i < 256; i++) {
    let c = i << 8;
    for (let k = 0; k < 8; k++) c = c & 0x8000 ? ((c << 1) ^ 0x1021) & 0xffff : (c << 1) & 0xffff;
    t[i] = c;
  }
  return t;
})();

/** Number of hash slots of a Redis Cluster. */
export const SLOTS = 16384;

function crc16(b: Buffer, from: number, to: number): number {
  let crc = 0;
  for (let i = from; i < to; i++) crc = ((crc << 8) & 0xffff) ^ CRC16_TABLE[((crc >> 8) ^ b[i]) & 0xff];
  return crc;
}

/** The hash slot (0..16383) of `key`: of the part between the first `{` and the next `}` when that part is not empty. */
export function keySlot(key: Arg): number {
  const b = typeof key === 'string' ? Buffer.from(key) : key;
  return keySlotAt(b, 0, b.length);
}

/** {@link keySlot} of the key `buf[from .. to]` (no copy; one pass over a key without a `{`). */
export function keySlotAt(buf: Buffer, from: number, to: number): number {
  let crc = 0;
  let i = from;
  for (; i < to; i++) {
    const c = buf[i];
    if (c === 0x7b) break;
    crc = ((crc << 8) & 0xffff) ^ CRC16_TABLE[((crc >> 8) ^ c) & 0xff];
  }
  if (i < to) {
    // the first `{`: the part up to the next `}` when not empty, else the whole key
    for (let close = i + 1; close < to; close++) {
      if (buf[close] === 0x7d) {
        if (close > i + 1) return crc16(buf, i + 1, close) % SLOTS;
        break;
      }
    }
    for (; i < to; i++) crc = ((crc << 8) & 0xffff) ^ CRC16_TABLE[((crc >> 8) ^ buf[i]) & 0xff];
  }
  return crc % SLOTS;
}

interface KeySpec {
  begin: { index: number } | { keyword: string; startfrom: number } | undefined;
  find: { lastkey: number; keystep: number; limit: number } | { keynumidx: number; firstkey: number; keystep: number } | undefined;
}

/** What {@link KeyTable} knows of one command. */
interface CommandKeys {
  /** `write` flag of `COMMAND`. */
  write: boolean;
  specs: KeySpec[] | undefined;
  /** Legacy (first, last, step); used without key specs. */
  legacy: [number, number, number];
  /** The table cannot tell the keys (ask `COMMAND GETKEYS`). */
  unknown: boolean;
  subcommands: Map<string, CommandKeys> | undefined;
}

const str = (r: Reply | string): string => (Buffer.isBuffer(r) ? r.toString('utf8') : r instanceof SimpleString ? r.value : r instanceof RespError ? r.message : String(r));

/** A RESP2 map (flat array of key, value) as an object of its fields. */
function fields(r: Reply): Record<string, Reply> {
  const o: Record<string, Reply> = {};
  if (Array.isArray(r)) for (let i = 0; i + 1 < r.length; i += 2) o[str(r[i])] = r[i + 1];
  return o;
}

function parseSpec(r: Reply): { spec: KeySpec; unknown: boolean } {
  const f = fields(r);
  const flags = Array.isArray(f.flags) ? f.flags.map(str) : [];
  const bs = fields(f.begin_search);
  const fk = fields(f.find_keys);
  const bspec = fields(bs.spec);
  const fspec = fields(fk.spec);
  let begin: KeySpec['begin'];
  let find: KeySpec['find'];
  let unknown = flags.includes('incomplete');
  const t = str(bs.type ?? '');
  if (t === 'index') begin = { index: Number(bspec.index) };
  else if (t === 'keyword') begin = { keyword: str(bspec.keyword).toLowerCase(), startfrom: Number(bspec.startfrom) };
  else unknown = true;
  const ft = str(fk.type ?? '');
  if (ft === 'range') find = { lastkey: Number(fspec.lastkey), keystep: Number(fspec.keystep), limit: Number(fspec.limit) };
  else if (ft === 'keynum') find = { keynumidx: Number(fspec.keynumidx), firstkey: Number(fspec.firstkey), keystep: Number(fspec.keystep) };
  else unknown = true;
  return { spec: { begin, find }, unknown };
}

function parseRow(row: Reply): [string, CommandKeys] | undefined {
  if (!Array.isArray(row) || row.length < 6) return undefined;
  const name = str(row[0]).toLowerCase();
  const flags = Array.isArray(row[2]) ? row[2].map((f) => str(f).toLowerCase()) : [];
  let specs: KeySpec[] | undefined;
  let unknown = false;
  if (Array.isArray(row[8])) {
    specs = [];
    for (const s of row[8]) {
      const p = parseSpec(s);
      if (p.unknown) unknown = true;
      specs.push(p.spec);
    }
  } else unknown = flags.includes('movablekeys');
  let subcommands: Map<string, CommandKeys> | undefined;
  if (Array.isArray(row[9]) && row[9].length) {
    subcommands = new Map();
    for (const sub of row[9]) {
      const s = parseRow(sub);
      if (s) subcommands.set(s[0].slice(s[0].indexOf('|') + 1), s[1]);
    }
  }
  return [name, { write: flags.includes('write'), specs, legacy: [Number(row[3]), Number(row[4]), Number(row[5])], unknown, subcommands }];
}

const lower = (a: Arg): string => (typeof a === 'string' ? a : a.toString('latin1')).toLowerCase();

/** Result of {@link KeyTable.lookup}: whether the command writes, its keys (undefined = ask the server). */
export interface KeyLookup {
  /** Known to the table (false: an unknown command; the server will refuse it). */
  known: boolean;
  write: boolean;
  keys: Arg[] | undefined;
}

/** The key positions of every command, from a `COMMAND` reply. */
export class KeyTable {
  private readonly table = new Map<string, CommandKeys>();

  /** Builds the table from a `COMMAND` reply (rows it cannot read are skipped). */
  constructor(reply: Reply) {
    if (!Array.isArray(reply)) return;
    for (const row of reply) {
      const r = parseRow(row);
      if (r) this.table.set(r[0], r[1]);
    }
  }

  /** Number of commands known. */
  get size(): number {
    return this.table.size;
  }

  /** Whether `args` writes and which of its arguments are keys (`keys` undefined: the table cannot tell); `name`: `args[0]` lower-cased, when the caller has it. */
  lookup(args: readonly Arg[], name: string = lower(args[0])): KeyLookup {
    const at: number[] = [];
    const f = this.positions(name, { length: args.length, lower: (i) => lower(args[i]) }, at);
    if ((f & KEYS_KNOWN) === 0) return { known: false, write: false, keys: [] };
    return { known: true, write: (f & KEYS_WRITE) !== 0, keys: f & KEYS_UNKNOWN ? undefined : at.slice(0, this.found).map((i) => args[i]) };
  }

  /**
   * {@link lookup} without values: the indexes of the key arguments of the command `name` (lower
   * case) with the arguments `args` go into `out[0 .. found)` ({@link found} set; `out` is written
   * by index and never shortened, so a reused array costs no allocation); the answer is a set of
   * flags: {@link KEYS_KNOWN} (the table has the command), {@link KEYS_WRITE}, {@link KEYS_UNKNOWN}
   * (the table cannot tell the keys: none found, ask the server).
   */
  positions(name: string, args: ArgReader, out: number[]): number {
    this.found = 0;
    let c = this.table.get(name);
    if (c === undefined) return 0;
    if (c.subcommands !== undefined && args.length > 1) {
      const s = c.subcommands.get(args.lower(1));
      if (s !== undefined) c = s;
    }
    const f = KEYS_KNOWN | (c.write ? KEYS_WRITE : 0);
    if (c.unknown) return f | KEYS_UNKNOWN;
    this.found = c.specs ? keysBySpecs(c.specs, args, out) : keysByLegacy(c.legacy, args.length, out);
    return f;
  }

  /** How many key indexes the last {@link positions} wrote. */
  found = 0;
}

/** Flags of {@link KeyTable.positions}. */
export const KEYS_KNOWN = 1;
export const KEYS_WRITE = 2;
export const KEYS_UNKNOWN = 4;

/** The arguments of a command as {@link KeyTable.positions} reads them: their number and one lower-cased. */
export interface ArgReader {
  readonly length: number;
  lower(i: number): string;
}

/** Key indexes into `out` from index 0; returns how many. */
function keysByLegacy([first, last, step]: [number, number, number], argc: number, out: number[]): number {
  if (first <= 0) return 0;
  const end = last < 0 ? argc + last : last;
  let n = 0;
  for (let i = first; i <= end && i < argc; i += Math.max(step, 1)) out[n++] = i;
  return n;
}

/** Redis's `getKeysUsingKeySpecs` (src/db.c), without the flags: key indexes into `out` from index 0; returns how many. */
function keysBySpecs(specs: KeySpec[], args: ArgReader, out: number[]): number {
  const argc = args.length;
  let n = 0;
  for (const spec of specs) {
    let first: number;
    const b = spec.begin!;
    if ('index' in b) first = b.index;
    else {
      const start = b.startfrom >= 0 ? b.startfrom : argc + b.startfrom;
      const end = b.startfrom >= 0 ? argc - 1 : 0;
      const dir = b.startfrom >= 0 ? 1 : -1;
      first = 0;
      for (let i = start; dir > 0 ? i <= end : i >= end; i += dir) {
        if (i <= 0 || i >= argc) break;
        if (args.lower(i) === b.keyword) {
          first = i + 1;
          break;
        }
      }
      if (first === 0) continue;
    }
    if (first >= argc) continue;
    const f = spec.find!;
    let last: number;
    let step: number;
    if ('lastkey' in f) {
      step = f.keystep;
      if (f.lastkey >= 0) last = first + f.lastkey;
      else if (f.limit === 0 || f.limit === 1) last = argc + f.lastkey;
      else last = first + Math.floor((argc - first) / f.limit) + f.lastkey;
    } else {
      const at = first + f.keynumidx;
      const n = at < argc ? Number(args.lower(at)) : NaN;
      if (!Number.isInteger(n) || n <= 0) continue;
      step = f.keystep;
      first = first + f.firstkey;
      last = first + (n - 1) * step;
    }
    for (let i = first; i <= last && i < argc; i += Math.max(step, 1)) out[n++] = i;
  }
  return n;
}

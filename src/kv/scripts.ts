/**
 * Script shebang flags the backend does not know (`docs/readme/kv.md`, "Scripts").
 *
 * A script may start with `#!lua flags=<flag>,<flag>`. Redis 7 knows `no-writes`, `allow-oom`,
 * `allow-stale`, `no-cluster` and `allow-cross-slot-keys` and refuses any other flag with
 * `ERR Unexpected flag in script shebang`; the hosted service has more (`@upstash/ratelimit` ≥ 2.1
 * starts every script with `#!lua flags=allow-key-locking`). {@link ScriptShebangs} drops the
 * unknown flags from the first line of the text of `EVAL`, `EVAL_RO` and `SCRIPT LOAD` (the other
 * lines are untouched, so line numbers in Lua errors stay right) and remembers
 * `sha1(original text) -> sha1(text sent)`, so that:
 * - `EVALSHA` / `EVALSHA_RO` with the sha the client computed over its original text run the
 *   script Redis cached under the rewritten text;
 * - `SCRIPT LOAD` answers the original sha; `SCRIPT EXISTS` answers for it.
 *
 * The map lives in this process (at most {@link MAX_ALIASES} entries, oldest dropped first). With
 * kv worker processes it is shared through an append-only file ({@link AliasFile}): a process
 * appends each alias it records, and reads what the others appended when a sha misses its map, so
 * a `SCRIPT LOAD` answered by one worker is found by `EVALSHA` on any other. A sha nobody recorded
 * is sent unchanged: Redis answers `NOSCRIPT` and clients send the text with `EVAL`, which records
 * the alias again (e.g. after a restart). Valkey's `NOSCRIPT` text is answered in Redis's words
 * ({@link redisNoscript}).
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import type { Rewrite } from './emulate.js';
import { RespError, type Arg, type Reply } from './resp.js';

/** The shebang flags Redis 7.0 – 8.x and Valkey accept in `EVAL` scripts. */
export const KNOWN_SCRIPT_FLAGS: ReadonlySet<string> = new Set(['no-writes', 'allow-oom', 'allow-stale', 'no-cluster', 'allow-cross-slot-keys']);

/** Most remembered original -> rewritten sha pairs. */
export const MAX_ALIASES = 10_000;

/** Commands (lower-case `COMMAND` names) whose arguments {@link ScriptShebangs.prepare} may change. */
export const SCRIPT_COMMANDS: ReadonlySet<string> = new Set(['eval', 'eval_ro', 'evalsha', 'evalsha_ro', 'script|load', 'script|exists']);

/** Valkey's answer to `EVALSHA` of a script it does not have. */
const VALKEY_NOSCRIPT = 'NOSCRIPT No matching script.';
/** Redis's (and the hosted service's) answer to the same. */
const REDIS_NOSCRIPT = new RespError('NOSCRIPT No matching script. Please use EVAL.');

/**
 * `EVALSHA`'s reply with Valkey's `NOSCRIPT` text worded as Redis words it, so the answer does not
 * depend on the backend. (`@upstash/redis` itself falls back from `EVALSHA` to `EVAL` on any error
 * whose text contains `noscript`; the full text is what clients show and compare.)
 */
export function redisNoscript(r: Reply): Reply {
  return r instanceof RespError && r.message === VALKEY_NOSCRIPT ? REDIS_NOSCRIPT : r;
}

function sha1(text: Arg): string {
  return createHash('sha1').update(text).digest('hex');
}

/**
 * The script text with the shebang flags Redis does not know removed, or undefined when there is
 * nothing to remove (no shebang, no unknown flag, or no line end after the shebang — Redis's own
 * error then stays).
 */
export function stripUnknownFlags(text: Arg): Arg | undefined {
  const isString = typeof text === 'string';
  if (isString ? !text.startsWith('#!') : text.length < 2 || text[0] !== 0x23 || text[1] !== 0x21) return undefined;
  const nl = text.indexOf('\n');
  if (nl < 0) return undefined;
  const line = isString ? text.slice(0, nl) : text.subarray(0, nl).toString('utf8');
  const parts = line.split(/[ \t\r\v\f]+/).filter((p) => p !== '');
  let dropped = false;
  const kept: string[] = [];
  for (const part of parts) {
    if (!part.startsWith('flags=')) {
      kept.push(part);
      continue;
    }
    const flags = part.slice(6).split(',');
    const known = flags.filter((f) => KNOWN_SCRIPT_FLAGS.has(f));
    if (known.length !== flags.length && !(flags.length === 1 && flags[0] === '')) dropped = true;
    if (known.length) kept.push(`flags=${known.join(',')}`);
  }
  if (!dropped) return undefined;
  const first = kept.join(' ');
  return isString ? first + text.slice(nl) : Buffer.concat([Buffer.from(first, 'utf8'), text.subarray(nl)]);
}

/** One record of the alias file: `<original sha> <rewritten sha>\n`. */
const RECORD = 82;

/**
 * The alias map shared by the kv primary and its workers: an append-only file of fixed-size
 * records (`O_APPEND` writes of 82 bytes, each whole). Each process reads the records past the
 * offset it reached. At most {@link MAX_ALIASES} records are written; later aliases stay in the
 * process that made them.
 */
export class AliasFile {
  private readonly fd: number;
  private offset = 0;

  /** Opens (creating when missing) `file`. @throws Error when it cannot be opened */
  constructor(file: string) {
    this.fd = fs.openSync(file, fs.constants.O_RDWR | fs.constants.O_APPEND | fs.constants.O_CREAT, 0o600);
  }

  /** Creates `file` empty (the primary, at start-up). */
  static create(file: string): void {
    fs.writeFileSync(file, '', { mode: 0o600 });
  }

  /** Calls `add` for every whole record appended since the last call. */
  readNew(add: (from: string, to: string) => void): void {
    const size = fs.fstatSync(this.fd).size;
    const n = Math.floor((size - this.offset) / RECORD);
    if (n <= 0) return;
    const buf = Buffer.alloc(n * RECORD);
    const got = fs.readSync(this.fd, buf, 0, buf.length, this.offset);
    for (let at = 0; at + RECORD <= got; at += RECORD) add(buf.toString('latin1', at, at + 40), buf.toString('latin1', at + 41, at + 81));
    this.offset += Math.floor(got / RECORD) * RECORD;
  }

  /** Appends one alias (nothing once the file holds {@link MAX_ALIASES} records). */
  append(from: string, to: string): void {
    if (fs.fstatSync(this.fd).size >= MAX_ALIASES * RECORD) return;
    fs.writeSync(this.fd, `${from} ${to}\n`);
  }

  close(): void {
    try {
      fs.closeSync(this.fd);
    } catch {
      /* already closed */
    }
  }
}

/** The original-sha -> rewritten-sha map and the rewriting of script commands (see the module doc). */
export class ScriptShebangs {
  private readonly aliases = new Map<string, string>();

  /** `shared`: the file shared with the other kv processes (workers on), else the map is this process's only. */
  constructor(private readonly shared?: AliasFile) {}

  /**
   * Rewrites one command whose `COMMAND` name (`eval`, `evalsha_ro`, `script|load`, … — one of
   * {@link SCRIPT_COMMANDS}) is `name`; undefined when it is sent as it is.
   */
  prepare(name: string, args: Arg[]): Rewrite | undefined {
    switch (name) {
      case 'eval':
      case 'eval_ro': {
        if (args.length < 2) return undefined;
        const text = this.rewrite(args[1]);
        if (text === undefined) return undefined;
        const out = args.slice();
        out[1] = text;
        return { args: out };
      }
      case 'evalsha':
      case 'evalsha_ro': {
        if (args.length < 2) return undefined;
        const to = this.alias(args[1]);
        if (to === undefined) return { args, fix: redisNoscript };
        const out = args.slice();
        out[1] = to;
        return { args: out, fix: redisNoscript };
      }
      case 'script|load': {
        if (args.length !== 3) return undefined;
        const text = this.rewrite(args[2]);
        if (text === undefined) return undefined;
        const original = sha1(args[2]);
        const out = args.slice();
        out[2] = text;
        return { args: out, fix: (r) => (Buffer.isBuffer(r) && r.length === 40 ? Buffer.from(original) : r) };
      }
      case 'script|exists': {
        let out: Arg[] | undefined;
        for (let i = 2; i < args.length; i++) {
          const to = this.alias(args[i]);
          if (to === undefined) continue;
          out ??= args.slice();
          out[i] = to;
        }
        return out && { args: out };
      }
    }
    return undefined;
  }

  /** The rewritten text (alias recorded), or undefined when the text is sent as it is. */
  private rewrite(text: Arg): Arg | undefined {
    const stripped = stripUnknownFlags(text);
    if (stripped === undefined) return undefined;
    const from = sha1(text);
    if (!this.aliases.has(from)) {
      this.shared?.readNew(this.remember);
      if (!this.aliases.has(from)) {
        const to = sha1(stripped);
        this.remember(from, to);
        this.shared?.append(from, to);
      }
    }
    return stripped;
  }

  private readonly remember = (from: string, to: string): void => {
    if (this.aliases.size >= MAX_ALIASES) this.aliases.delete(this.aliases.keys().next().value!);
    this.aliases.set(from, to);
  };

  /** The sha Redis knows the script under, or undefined when `sha` is not an original sha. */
  private alias(sha: Arg): string | undefined {
    if ((this.aliases.size === 0 && this.shared === undefined) || sha.length !== 40) return undefined;
    const key = (typeof sha === 'string' ? sha : sha.toString('latin1')).toLowerCase();
    let to = this.aliases.get(key);
    if (to === undefined && this.shared !== undefined) {
      this.shared.readNew(this.remember);
      to = this.aliases.get(key);
    }
    return to;
  }
}

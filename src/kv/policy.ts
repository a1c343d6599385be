/**
 * Command policy as data ("full privilege on the data,
 * not on the server"). The table is read from the server's own `COMMAND` reply at start-up and
 * after every backend restart; {@link CommandPolicy.check} is the one function that decides whether
 * a command is forwarded, refused (with the error text) or handled by svc itself.
 */
import { kvMessage, type KvErrorCode, type KvMessageArgs } from './errors.js';
import { RespError, type Arg, type Reply } from './resp.js';

/** One row of the table (from `COMMAND`): name lower-case, arity, flags, ACL categories. */
export interface CommandInfo {
  name: string;
  arity: number;
  flags: ReadonlySet<string>;
  categories: ReadonlySet<string>;
  subcommands: ReadonlyMap<string, CommandInfo>;
}

/** Outcome of {@link CommandPolicy.check}. */
export type Verdict =
  | { kind: 'forward'; info: CommandInfo | undefined; write: boolean }
  | { kind: 'json' }
  | { kind: 'resttoken' }
  | { kind: 'refuse'; code: KvErrorCode; error: string };

/** Commands refused for every token because they would hand over the host or the database process. */
const FORBIDDEN = new Set(['shutdown', 'debug', 'module', 'replicaof', 'slaveof', 'sync', 'psync', 'failover', 'migrate']);
const FORBIDDEN_SUB = new Set(['config|set', 'config|rewrite', 'config|resetstat']);
/**
 * Server introspection and process-level commands refused for every token, besides every command or
 * subcommand the server's own `COMMAND` table flags `admin` (CONFIG GET, SAVE, BGSAVE,
 * BGREWRITEAOF, SLOWLOG, LATENCY, PFDEBUG, PFSELFTEST, ...; ACL is the exception, see
 * {@link CommandPolicy.check}): allocator and memory reports (MEMORY USAGE of a key stays), and
 * the commands that reach past the one logical database svc serves (SELECT is refused as a
 * connection command; SWAPDB and MOVE would swap or move data into another database number, which
 * on a shared external server belongs to someone else).
 */
const SERVER_ONLY = new Set(['swapdb', 'move']);
const SERVER_ONLY_SUB = new Set(['memory|stats', 'memory|doctor', 'memory|malloc-stats', 'memory|purge']);
const ENDPOINT_ONLY: Record<string, string> = {
  subscribe: 'use the /subscribe/<channel> endpoint',
  psubscribe: 'use the /psubscribe/<pattern> endpoint',
  ssubscribe: 'sharded subscriptions have no REST endpoint; SPUBLISH works, and /subscribe/<channel> receives PUBLISH from every node',
  unsubscribe: 'use the /subscribe/<channel> endpoint and close the stream',
  punsubscribe: 'use the /psubscribe/<pattern> endpoint and close the stream',
  sunsubscribe: 'sharded subscriptions have no REST endpoint',
  monitor: 'use the /monitor endpoint',
};
const TRANSACTION = new Set(['multi', 'exec', 'watch', 'unwatch', 'discard']);
const CLUSTER = new Set(['cluster', 'readonly', 'readwrite', 'asking']);
/** Allowed members of the @connection category (spec "Connection: only PING and ECHO"). */
const CONNECTION_ALLOWED = new Set(['ping', 'echo', 'command']);
/** Connection commands refused even where `COMMAND` lists the category only on subcommands (CLIENT). */
const CONNECTION_REFUSED = new Set(['auth', 'client', 'hello', 'quit', 'reset', 'select', 'wait', 'waitaof']);

const lower = (a: Arg): string => (typeof a === 'string' ? a : a.toString('utf8')).toLowerCase();

/** Builds a {@link CommandInfo} map from a `COMMAND` (or `COMMAND INFO`) reply. */
export function parseCommandTable(reply: Reply): Map<string, CommandInfo> {
  const map = new Map<string, CommandInfo>();
  if (!Array.isArray(reply)) return map;
  for (const row of reply) {
    const info = parseRow(row);
    if (info) map.set(info.name, info);
  }
  return map;
}

function parseRow(row: Reply): CommandInfo | undefined {
  if (!Array.isArray(row) || row.length < 3) return undefined;
  const str = (r: Reply): string => (Buffer.isBuffer(r) ? r.toString('utf8') : r && typeof r === 'object' && 'value' in r ? r.value : String(r));
  const name = str(row[0]).toLowerCase();
  const flags = new Set(Array.isArray(row[2]) ? row[2].map((f) => str(f).toLowerCase()) : []);
  const categories = new Set(Array.isArray(row[6]) ? row[6].map((c) => str(c).toLowerCase().replace(/^@/, '')) : []);
  const subcommands = new Map<string, CommandInfo>();
  if (Array.isArray(row[9])) {
    for (const sub of row[9]) {
      const s = parseRow(sub);
      if (s) subcommands.set(s.name.slice(s.name.indexOf('|') + 1), s);
    }
  }
  return { name, arity: Number(row[1]), flags, categories, subcommands };
}

/** Most cached verdicts (command names as sent, any case) before the cache starts over. */
const VERDICT_CACHE_MAX = 1024;

export class CommandPolicy {
  private mode: 'native' | 'library' | 'none' = 'none';
  /**
   * Verdicts that depend on the command name only (no subcommands, not blocking), by the name as
   * sent: the hot path skips lower-casing and the rule chain. Cleared with the table or JSON mode.
   */
  private readonly verdicts = new Map<string, Verdict>();

  constructor(
    private table: Map<string, CommandInfo>,
    private readonly protectedUsers: ReadonlySet<string>,
  ) {}

  /** JSON.* support: 'native' (module present), 'library' (Lua functions), 'none'. */
  get jsonMode(): 'native' | 'library' | 'none' {
    return this.mode;
  }

  set jsonMode(m: 'native' | 'library' | 'none') {
    this.mode = m;
    this.verdicts.clear();
  }

  /** Replaces the table (after a backend restart). */
  setTable(table: Map<string, CommandInfo>): void {
    this.table = table;
    this.verdicts.clear();
    this.refused = undefined;
  }

  private refused: RefusedUnits | undefined;

  /** The commands svc refuses for every token, as ACL units, from the current table (cached). */
  private refusedUnits(): RefusedUnits {
    return (this.refused ??= refusedUnits(this.table));
  }

  /** Looks up a command (lower-case name). */
  info(name: string): CommandInfo | undefined {
    return this.table.get(name);
  }

  /**
   * Decides what happens to one command (`args[0]` is the name, any case).
   * - `forward`: send to Redis (ACL still applies); `write` false only for commands flagged readonly.
   * - `json`: a JSON.* command to translate (library mode).
   * - `resttoken`: `ACL RESTTOKEN`, handled by svc.
   * - `refuse`: never sent; `code` is the catalogue error (`errors.ts`, status 400), `error` its text.
   */
  check(args: readonly Arg[]): Verdict {
    if (args.length === 0) return refuse('emptyCommand');
    const a0 = args[0];
    if (typeof a0 !== 'string') return this.decide(args, lower(a0));
    const hit = this.verdicts.get(a0);
    if (hit !== undefined) return hit;
    const name = a0.toLowerCase();
    const v = this.decide(args, name);
    const info = this.table.get(name);
    if (info !== undefined && info.subcommands.size === 0 && !info.flags.has('blocking') && name !== 'acl' && name !== 'copy') {
      if (this.verdicts.size >= VERDICT_CACHE_MAX) this.verdicts.clear();
      this.verdicts.set(a0, v);
    }
    return v;
  }

  /** {@link check} without the cache; `name` is `args[0]` lower-cased. */
  private decide(args: readonly Arg[], name: string): Verdict {
    if (name.startsWith('json.')) {
      if (this.jsonMode === 'native') return { kind: 'forward', info: this.table.get(name), write: true };
      if (this.jsonMode === 'library') return { kind: 'json' };
      return refuse('jsonUnavailable', name);
    }
    const info = this.table.get(name);
    if (FORBIDDEN.has(name)) return refuse('commandNotAllowed', name);
    if (name in ENDPOINT_ONLY) return refuse('endpointOnly', name, ENDPOINT_ONLY[name]);
    if (TRANSACTION.has(name)) {
      return refuse('transactionCommand', name);
    }
    if (CLUSTER.has(name)) return refuse('clusterCommand', name);
    if (info === undefined) return { kind: 'forward', info, write: true }; // Redis answers "unknown command"
    if ((info.categories.has('connection') || CONNECTION_REFUSED.has(name)) && !CONNECTION_ALLOWED.has(name)) {
      return refuse('connectionCommand', name);
    }
    if (SERVER_ONLY.has(name) || (info.flags.has('admin') && name !== 'acl')) return refuse('commandNotAllowed', name);
    if (name === 'copy' && hasDbOption(args)) return refuse('commandNotAllowed', 'copy … db');
    if (info.flags.has('blocking')) {
      if ((name === 'xread' || name === 'xreadgroup') && !hasBlockOption(args)) return { kind: 'forward', info, write: name === 'xreadgroup' };
      return refuse('blockingCommand', name);
    }
    if (info.subcommands.size && args.length > 1) {
      const sub = lower(args[1]);
      if (FORBIDDEN_SUB.has(`${name}|${sub}`) || SERVER_ONLY_SUB.has(`${name}|${sub}`)) return refuse('commandNotAllowed', `${name} ${sub}`);
      if (name === 'acl') {
        if (sub === 'resttoken') return args.length === 4 ? { kind: 'resttoken' } : refuse('wrongArity', 'acl|resttoken');
        if ((sub === 'setuser' || sub === 'deluser') && args.length > 2) {
          const targets = sub === 'setuser' ? [args[2]] : args.slice(2);
          for (const t of targets) {
            const u = typeof t === 'string' ? t : t.toString('utf8');
            if (this.protectedUsers.has(u)) return refuse('protectedUser', u);
          }
          if (sub === 'setuser') {
            const granted = grantsRefused(args.slice(3).map((a) => (typeof a === 'string' ? a : a.toString('utf8'))), this.refusedUnits());
            if (granted.length) return refuse('aclGrantRefused', granted.slice(0, 5).map((g) => `'${g.replace('|', ' ')}'`).join(', ') + (granted.length > 5 ? ` and ${granted.length - 5} more` : ''));
          }
        }
      }
      const subInfo = info.subcommands.get(sub);
      if (subInfo?.flags.has('admin') && name !== 'acl') return refuse('commandNotAllowed', `${name} ${sub}`);
      if (subInfo) return { kind: 'forward', info: subInfo, write: !subInfo.flags.has('readonly') };
    }
    return { kind: 'forward', info, write: !info.flags.has('readonly') };
  }

  /** True when `name` (lower-case) may run with the read-only token (documentation/tests). */
  readonlyAllowed(name: string): boolean {
    const info = this.table.get(name);
    if (!info) return false;
    if (name === 'scan' || name === 'keys') return false;
    return info.categories.has('read') && !info.categories.has('dangerous');
  }
}

/**
 * The commands svc refuses for every token as ACL units (`name`, or `name|sub` for a command with
 * subcommands), and per ACL category the units in it: what an ACL user created through the
 * gateway must not be granted, since such a user can also log in to the database directly (a
 * supervised redis-server on a loopback port when the data directory's socket path is too long,
 * or an external server), where svc's policy does not apply.
 */
interface RefusedUnits {
  units: Set<string>;
  /** Refused units of each command (for `+name`, `-name`): its own name, or its refused subcommands. */
  byCommand: Map<string, string[]>;
  byCategory: Map<string, string[]>;
}

function refusedUnits(table: Map<string, CommandInfo>): RefusedUnits {
  const out: RefusedUnits = { units: new Set(), byCommand: new Map(), byCategory: new Map() };
  const add = (unit: string, command: string, info: CommandInfo) => {
    out.units.add(unit);
    out.byCommand.set(command, [...(out.byCommand.get(command) ?? []), unit]);
    for (const c of info.categories) out.byCategory.set(c, [...(out.byCategory.get(c) ?? []), unit]);
  };
  for (const [name, info] of table) {
    if (name.startsWith('json.')) continue;
    const whole = FORBIDDEN.has(name) || SERVER_ONLY.has(name) || name === 'select';
    if (info.subcommands.size === 0) {
      if (whole || info.flags.has('admin')) add(name, name, info);
      continue;
    }
    for (const [sub, subInfo] of info.subcommands) {
      const unit = `${name}|${sub}`;
      if (whole || subInfo.flags.has('admin') || FORBIDDEN_SUB.has(unit) || SERVER_ONLY_SUB.has(unit)) add(unit, name, subInfo);
    }
  }
  return out;
}

/**
 * The refused units an `ACL SETUSER <user> <rules...>` would leave granted: each rule applied in
 * order (`+@cat`/`-@cat`, `+name[|sub]`/`-name[|sub]`, `allcommands`/`nocommands`, `reset`), for
 * the root permissions and for each `(...)` selector on its own. Rules about keys, channels,
 * passwords and flags grant no command. Units granted before this call are not known here; every
 * earlier SETUSER through the gateway was held to the same rule.
 */
function grantsRefused(rules: string[], r: RefusedUnits): string[] {
  const sets: Set<string>[] = [];
  const apply = (granted: Set<string>, rule: string) => {
    const x = rule.toLowerCase();
    if (x === 'allcommands' || x === '+@all') for (const u of r.units) granted.add(u);
    else if (x === 'nocommands' || x === '-@all' || x === 'reset') granted.clear();
    else if (x.startsWith('+@')) for (const u of r.byCategory.get(x.slice(2)) ?? []) granted.add(u);
    else if (x.startsWith('-@')) for (const u of r.byCategory.get(x.slice(2)) ?? []) granted.delete(u);
    else if (x.startsWith('+') || x.startsWith('-')) {
      const name = x.slice(1);
      const units = name.includes('|') ? (r.units.has(name) ? [name] : []) : r.byCommand.get(name) ?? [];
      for (const u of units) (x[0] === '+' ? granted.add(u) : granted.delete(u));
    }
  };
  const root = new Set<string>();
  sets.push(root);
  for (const rule of rules) {
    const sel = /^\((.*)\)$/s.exec(rule.trim());
    if (sel) {
      const s = new Set<string>();
      for (const part of sel[1].split(/\s+/).filter(Boolean)) apply(s, part);
      sets.push(s);
    } else if (rule.toLowerCase() === 'clearselectors') sets.splice(1);
    else apply(root, rule);
  }
  return [...new Set(sets.flatMap((s) => [...s]))].sort();
}

/** The verdict refusing a command with catalogue error `code`. */
function refuse<C extends KvErrorCode>(code: C, ...args: KvMessageArgs<C>): Verdict {
  return { kind: 'refuse', code, error: kvMessage(code, ...args) };
}

/** True when a COPY names a destination database (`COPY src dst DB <n>`): another database number. */
function hasDbOption(args: readonly Arg[]): boolean {
  for (let i = 3; i < args.length; i++) if (lower(args[i]) === 'db') return true;
  return false;
}

function hasBlockOption(args: readonly Arg[]): boolean {
  for (let i = 1; i < args.length; i++) {
    const a = lower(args[i]);
    if (a === 'streams') return false;
    if (a === 'block') return true;
  }
  return false;
}

/** True when a reply is an error. */
export function isError(r: Reply): r is RespError {
  return r instanceof RespError;
}

/** A password hash as `ACL LIST` prints it (`#` and the SHA-256 in hex). */
const PASSWORD_HASH = /^#[0-9a-f]{64}$/i;

/**
 * The reply fix of `ACL LIST` / `ACL GETUSER <user>` (`name` `acl|list` / `acl|getuser`, `args`
 * the command) that hides the password hashes of svc's own users (`protectedUsers`): the `#<sha256>`
 * rules of their `ACL LIST` lines are dropped, and `ACL GETUSER` of one of them answers an empty
 * `passwords` list. The hashes are SHA-256 of generated 256-bit passwords, so this is defence in
 * depth: a reader of the reply (a log, a console, a leaked token) learns nothing to attack offline.
 * Other users' lines are unchanged. Returns undefined when the command needs no fix.
 */
export function hideProtectedPasswords(name: string, args: readonly Arg[], protectedUsers: ReadonlySet<string>): ((r: Reply) => Reply) | undefined {
  const text = (a: Arg | Reply): string => (typeof a === 'string' ? a : Buffer.isBuffer(a) ? a.toString('utf8') : a && typeof a === 'object' && 'value' in a ? a.value : '');
  if (name === 'acl|list') {
    return (r) => {
      if (!Array.isArray(r)) return r;
      return r.map((line) => {
        const words = text(line).split(' ');
        if (words[0] !== 'user' || !protectedUsers.has(words[1] ?? '')) return line;
        return Buffer.from(words.filter((w) => !PASSWORD_HASH.test(w)).join(' '));
      });
    };
  }
  if (name === 'acl|getuser' && args.length === 3 && protectedUsers.has(text(args[2]))) {
    return (r) => {
      if (!Array.isArray(r)) return r;
      const out = [...r];
      for (let i = 0; i + 1 < out.length; i += 2) if (text(out[i]) === 'passwords') out[i + 1] = [];
      return out;
    };
  }
  return undefined;
}

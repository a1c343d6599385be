/**
 * JSON.* command group for backends without a JSON module: a Redis Functions library
 * (`svcjson`, Lua, see `./lua/*.lua`) plus the translation of `JSON.X key ...` into `FCALL` /
 * `FCALL_RO` that the kv gateway applies to every command (single, /pipeline, /multi-exec), so
 * JSON commands are atomic and behave inside transactions like any other command.
 *
 * Storage format, reply shapes and differences from RedisJSON: `docs/readme/kv-json.md`.
 */
import { readFileSync } from 'node:fs';
import { kvError, type KvError } from '../errors.js';

/**
 * The library is split into modules (`./lua/`). Library code may not touch Lua's standard
 * globals while FUNCTION LOAD runs them, so modules 1-6 form `build()`, run on the first call:
 * each module is a closure bound to a local (J, N, P, S) that later modules see as an upvalue;
 * `commands.lua` and `arrays.lua` return command tables; `build()` returns their union and the
 * store module (whose parsed-document cache `register.lua` brackets around each call);
 * `register.lua` registers the functions.
 */
const BUILD_MODULES: ReadonlyArray<readonly [string, string]> = [
  ['J', 'json.lua'], // document model, parser, serializer
  ['N', 'number.lua'], // NUMINCRBY / NUMMULTBY arithmetic
  ['P', 'path.lua'], // legacy paths and JSONPath
  ['S', 'store.lua'], // storage format and shared command helpers
];

function readLua(file: string): string {
  return readFileSync(new URL(`./lua/${file}`, import.meta.url), 'utf8');
}

/** Lua source of the Redis Functions library (`#!lua name=svcjson`), for `FUNCTION LOAD REPLACE`. */
export const JSON_LIBRARY: string = [
  '#!lua name=svcjson',
  'local function build()',
  ...BUILD_MODULES.map(([name, file]) => `local ${name} = (function()\n${readLua(file)}\nend)()`),
  `local C = (function()\n${readLua('commands.lua')}\nend)()`,
  `local A = (function()\n${readLua('arrays.lua')}\nend)()`,
  'for name, fn in pairs(A) do C[name] = fn end',
  'return C, S',
  'end',
  readLua('register.lua'),
].join('\n');

interface JsonCommandSpec {
  /** Redis arity: > 0 exact argument count including the name, < 0 minimum (`-n`). */
  readonly arity: number;
  readonly read: boolean;
  /** How the keys are laid out: one key after the name, MGET (all but the last), MSET (triplets). */
  readonly keys: 'one' | 'mget' | 'mset';
  /** Maximum argument count including the name, for commands with optional trailing arguments. */
  readonly max?: number;
}

/**
 * JSON.* commands provided by the library: arity and flags as RedisJSON registers them
 * (`redis_json/src/commands.rs`). The function called is `svcjson_<name lower-case>`.
 */
const COMMANDS: Readonly<Record<string, JsonCommandSpec>> = {
  'JSON.GET': { arity: -2, read: true, keys: 'one' },
  'JSON.MGET': { arity: -3, read: true, keys: 'mget' },
  'JSON.TYPE': { arity: -2, read: true, keys: 'one', max: 3 },
  'JSON.STRLEN': { arity: -2, read: true, keys: 'one', max: 3 },
  'JSON.ARRINDEX': { arity: -4, read: true, keys: 'one', max: 6 },
  'JSON.ARRLEN': { arity: -2, read: true, keys: 'one', max: 3 },
  'JSON.OBJKEYS': { arity: -2, read: true, keys: 'one', max: 3 },
  'JSON.OBJLEN': { arity: -2, read: true, keys: 'one', max: 3 },
  'JSON.RESP': { arity: -2, read: true, keys: 'one', max: 3 },
  'JSON.SET': { arity: -4, read: false, keys: 'one' },
  'JSON.MSET': { arity: -4, read: false, keys: 'mset' },
  'JSON.MERGE': { arity: 4, read: false, keys: 'one' },
  'JSON.DEL': { arity: -2, read: false, keys: 'one', max: 3 },
  'JSON.FORGET': { arity: -2, read: false, keys: 'one', max: 3 },
  'JSON.STRAPPEND': { arity: -3, read: false, keys: 'one', max: 4 },
  'JSON.NUMINCRBY': { arity: 4, read: false, keys: 'one' },
  'JSON.NUMMULTBY': { arity: 4, read: false, keys: 'one' },
  'JSON.TOGGLE': { arity: 3, read: false, keys: 'one' },
  'JSON.CLEAR': { arity: -2, read: false, keys: 'one', max: 3 },
  'JSON.ARRAPPEND': { arity: -4, read: false, keys: 'one' },
  'JSON.ARRINSERT': { arity: -5, read: false, keys: 'one' },
  'JSON.ARRPOP': { arity: -2, read: false, keys: 'one', max: 4 },
  'JSON.ARRTRIM': { arity: 5, read: false, keys: 'one' },
};

function arityError(name: string): KvError {
  return kvError('wrongArity', name.toLowerCase());
}

/**
 * Translates `['JSON.SET', key, path, value, ...]` (command name any case) into the arguments of
 * `FCALL`/`FCALL_RO`: `['FCALL', 'svcjson_set', '1', key, path, value, ...]`; JSON.MGET gives
 * all its keys and the path as the one argument, JSON.MSET its keys and the (path, value) pairs.
 * Read commands use `FCALL_RO` (the read-only ACL user may call only that).
 * Returns undefined when `args` is not a JSON.* command this library provides (the caller then
 * handles it like any other command, e.g. JSON.DEBUG -> unknown command).
 * @throws KvError `wrongArity` for a JSON.* command with the wrong number of arguments (Redis text).
 */
export function translateJsonCommand(args: Buffer[]): Buffer[] | undefined {
  const first = args[0];
  // cheap rejection of every other command: name must be 'JSON.' + 3..9 letters
  if (!first || first.length < 8 || first.length > 14 || first[4] !== 0x2e || (first[0] | 0x20) !== 0x6a) {
    return undefined;
  }
  const name = first.toString('latin1').toUpperCase();
  const spec = COMMANDS[name];
  if (!spec) return undefined;
  const n = args.length;
  if (spec.arity > 0 ? n !== spec.arity : n < -spec.arity) throw arityError(name);
  if (spec.max !== undefined && n > spec.max) throw arityError(name);
  const head = [Buffer.from(spec.read ? 'FCALL_RO' : 'FCALL'), Buffer.from(`svcjson_${name.slice(5).toLowerCase()}`)];
  const rest = args.slice(1);
  switch (spec.keys) {
    case 'one':
      return [...head, Buffer.from('1'), ...rest];
    case 'mget':
      return [...head, Buffer.from(String(rest.length - 1)), ...rest];
    case 'mset': {
      if (rest.length % 3 !== 0) throw arityError(name);
      const keys: Buffer[] = [];
      const pairs: Buffer[] = [];
      for (let i = 0; i < rest.length; i += 3) keys.push(rest[i]), pairs.push(rest[i + 1], rest[i + 2]);
      return [...head, Buffer.from(String(keys.length)), ...keys, ...pairs];
    }
  }
}

/** Upper-case names of the JSON.* commands that only read (allowed with the read-only token). */
export const JSON_READ_COMMANDS: ReadonlySet<string> = new Set(
  Object.entries(COMMANDS)
    .filter(([, spec]) => spec.read)
    .map(([name]) => name),
);

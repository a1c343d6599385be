/**
 * JSON.* command group for backends without a JSON module (issue 8). INTERFACE ONLY for now: the
 * kv gateway codes against these exports; the implementation (a Redis Functions library in Lua
 * plus the JSON.X -> FCALL translation) replaces the bodies.
 */

/** Lua source of the Redis Functions library (`#!lua name=svcjson`); '' = not available yet. */
export const JSON_LIBRARY = '';

/** Error for a JSON.* command that is malformed before it reaches Redis (message is the wire text). */
export class JsonCommandError extends Error {}

/**
 * Translates `['JSON.SET', key, path, value, ...]` (command name any case) into the arguments of
 * `FCALL`/`FCALL_RO` (`['FCALL_RO', 'svcjson_get', '1', key, ...]`). Returns undefined when `args`
 * is not a JSON.* command, or when the library is not available.
 * @throws JsonCommandError for a JSON.* command with wrong arity/syntax.
 */
export function translateJsonCommand(args: Buffer[]): Buffer[] | undefined {
  void args;
  return undefined;
}

/** Upper-case names of the JSON.* commands that only read (allowed with the read-only token). */
export const JSON_READ_COMMANDS: ReadonlySet<string> = new Set();

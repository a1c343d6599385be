/**
 * Small emulations of the hosted service where stock Redis answers differently
 * (`docs/readme/kv.md`, "Differences from the hosted service"):
 *
 * - `SCAN cursor [MATCH p] [COUNT n] [TYPE t] WITHTYPE`: the keys come with their types,
 *   `[cursor, [key1, type1, key2, type2, …]]` (the shape `@upstash/redis`'s `scan(…, {withType:
 *   true})` reads). Run as one read-only script (`EVAL_RO`: the SCAN and the TYPE of each key it
 *   returned), so it is one round trip and the read-only token's ACL applies as to SCAN itself
 *   (its refusal is answered as `NOPERM …`).
 * - `COPY k k` (same source and destination, same database): `0` instead of Redis's
 *   `ERR source and destination objects are the same`.
 * - `FLUSHALL [ASYNC|SYNC]` -> `FLUSHDB [ASYNC|SYNC]`: a hosted database is one logical database,
 *   and FLUSHALL empties that one; on a Redis server it would empty every database number, which
 *   on an external server (`SVC_KV_REDIS_URL` with `/<db>`) belong to others. svc serves one
 *   database number (SELECT, SWAPDB and MOVE are refused), so FLUSHDB is the same command here.
 */
import { kvMessage } from './errors.js';
import { RespError, type Arg, type Reply } from './resp.js';

/** A command changed before it is sent: what to send, whether it writes, how to mend the reply. */
export interface Rewrite {
  args: Arg[];
  /** Overrides the command's own write classification (for the read-your-writes token). */
  write?: boolean;
  /** Maps the backend's reply to the one the client expects. */
  fix?: (r: Reply) => Reply;
}

/** Lower-case names {@link emulate} looks at. */
export const EMULATED: ReadonlySet<string> = new Set(['scan', 'copy', 'flushall']);

const SCAN_WITH_TYPES = `local r = redis.call('SCAN', unpack(ARGV))
local out = {}
for _, k in ipairs(r[2]) do
  out[#out + 1] = k
  out[#out + 1] = redis.call('TYPE', k)['ok']
end
return {r[1], out}`;

const SAME_OBJECT = 'ERR source and destination objects are the same';

const lower = (a: Arg): string => (typeof a === 'string' ? a : a.toString('latin1')).toLowerCase();

/** The rewrite of `args` (command `name`, lower-case), or undefined when it is sent as it is. */
export function emulate(name: string, args: Arg[]): Rewrite | undefined {
  if (name === 'scan') return scanWithType(args);
  if (name === 'flushall') return { args: ['FLUSHDB', ...args.slice(1)] };
  if (name === 'copy' && args.length >= 3 && Buffer.compare(asBuffer(args[1]), asBuffer(args[2])) === 0) {
    return { args, fix: (r) => (r instanceof RespError && r.message.startsWith(SAME_OBJECT) ? 0 : r) };
  }
  return undefined;
}

function asBuffer(a: Arg): Buffer {
  return typeof a === 'string' ? Buffer.from(a) : a;
}

/** Redis's ACL refusal of the SCAN inside the script, worded as for SCAN itself (no script sha). */
function scanDenied(r: Reply): Reply {
  return r instanceof RespError && r.message.includes("can't run this command") ? new RespError(kvMessage('scanNotPermitted')) : r;
}

/** `SCAN … WITHTYPE` -> `EVAL_RO <script> 0 <the SCAN arguments without WITHTYPE>`. */
function scanWithType(args: Arg[]): Rewrite | undefined {
  let at = -1;
  for (let i = 2; i < args.length; i++) {
    const o = lower(args[i]);
    if (o === 'match' || o === 'count' || o === 'type') i++; // skip the option's value
    else if (o === 'withtype') {
      at = i;
      break;
    }
  }
  if (at < 0) return undefined;
  const scan = args.slice(1).filter((_, i) => i + 1 !== at);
  return { args: ['EVAL_RO', SCAN_WITH_TYPES, '0', ...scan], write: false, fix: scanDenied };
}

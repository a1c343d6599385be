/**
 * The database behind the gateway: either a supervised child `redis-server`
 * ({@link SupervisedBackend}, in `supervisor.ts`) or an external Redis/Valkey given by
 * `SVC_KV_REDIS_URL` ({@link ExternalBackend}). Both expose where to connect and which ACL users
 * the gateway runs commands as:
 *
 * - `admin`: svc's own full user (bootstrap: COMMAND, FUNCTION LOAD, ACL SETUSER of the read-only user)
 * - `standard`: the user of the standard token (full data access; host-level commands removed by ACL
 *   where svc owns the server)
 * - `readonly`: the user of the read-only token (`+@read -@dangerous -scan -keys ...`)
 */
import fs from 'node:fs';
import type { Logger } from '../../logger.js';
import type { CredentialStore } from '../../credentials.js';
import { RespError } from '../resp.js';
import { RedisConnection, type Endpoint, type RedisUser } from './connection.js';

export interface Backend {
  readonly endpoint: Endpoint;
  readonly admin: RedisUser;
  readonly standard: RedisUser;
  readonly readonly: RedisUser;
  /** ACL users clients may not change with ACL SETUSER / DELUSER (svc relies on them). */
  readonly protectedUsers: ReadonlySet<string>;
  /** False while a supervised redis-server is down (requests fail fast). */
  readonly up: boolean;
  /** Human-readable description for the banner. */
  readonly description: string;
  start(): Promise<void>;
  stop(): Promise<void>;
  /** `fn` runs after every (re)start, once the server answers (e.g. reload the command table). */
  onUp(fn: () => Promise<void>): void;
  /** `fn` runs when the server went down (a supervised redis-server died); external: never. */
  onDown?(fn: () => void): void;
}

/** Name of the read-only ACL user svc creates. */
export const READONLY_USER = 'svc-readonly';

/**
 * ACL rules of the read-only user (Redis 7 `ACL SETUSER` syntax, without the password).
 * The read-only user: `+@read -@dangerous` plus `-scan -keys +ping +echo`; read-only scripts
 * (EVAL_RO, EVALSHA_RO, FCALL_RO) are allowed — Redis applies the same ACL to what they call, so a
 * script cannot write — but EVAL/EVALSHA/FCALL are not.
 */
export const READONLY_RULES = [
  'on', '~*', 'resetchannels', '&*', '-@all', '+@read', '-@dangerous', '-scan', '-keys', '+ping', '+echo',
  '+eval_ro', '+evalsha_ro', '+fcall_ro', '+multi', '+exec', '+subscribe', '+psubscribe', '+unsubscribe', '+punsubscribe',
];

/**
 * Parses `redis[s]://[user[:password]@]host[:port][/db]`.
 * @throws Error on a malformed URL.
 */
export function parseRedisUrl(url: string): { endpoint: Endpoint; user: RedisUser; db: number } {
  const u = new URL(url);
  const tls = u.protocol === 'rediss:';
  if (u.protocol !== 'redis:' && !tls) throw new Error(`unsupported scheme ${u.protocol}`);
  const user = u.username ? decodeURIComponent(u.username) : undefined;
  const password = u.password ? decodeURIComponent(u.password) : undefined;
  const db = u.pathname && u.pathname !== '/' ? Number(u.pathname.slice(1)) : 0;
  if (!Number.isInteger(db) || db < 0) throw new Error(`bad database number in ${u.pathname}`);
  return {
    endpoint: { host: u.hostname.replace(/^\[|\]$/g, ''), port: Number(u.port || 6379), tls, db },
    user: password !== undefined ? { user, password } : {},
    db,
  };
}

/**
 * Creates (or resets) the read-only ACL user through `endpoint` as `admin`; a refusal is logged
 * (the read-only token will not work), not thrown.
 * @throws KvError when the database cannot be reached
 */
export async function createReadonlyUser(endpoint: Endpoint, admin: RedisUser, readonly: RedisUser, logger: Logger): Promise<void> {
  const conn = await RedisConnection.connect(endpoint, admin);
  try {
    const r = await conn.send(['ACL', 'SETUSER', READONLY_USER, 'reset', `>${readonly.password}`, ...READONLY_RULES]);
    if (r instanceof RespError) {
      logger.warn({ error: r.message }, 'kv: could not create the read-only ACL user; the read-only token will not work');
    }
  } finally {
    conn.close();
  }
}

/** An external Redis/Valkey: svc does not start or restart it. */
export class ExternalBackend implements Backend {
  readonly endpoint: Endpoint;
  readonly admin: RedisUser;
  readonly standard: RedisUser;
  readonly readonly: RedisUser;
  readonly protectedUsers: ReadonlySet<string>;
  readonly up = true;
  readonly description: string;
  private readonly upHandlers: (() => Promise<void>)[] = [];

  /** @throws Error when `caFile` cannot be read. */
  constructor(url: string, credentials: CredentialStore, private readonly logger: Logger, caFile?: string) {
    const parsed = parseRedisUrl(url);
    this.endpoint = caFile ? { ...parsed.endpoint, ca: fs.readFileSync(caFile) } : parsed.endpoint;
    this.admin = parsed.user;
    this.standard = parsed.user;
    this.readonly = { user: READONLY_USER, password: credentials.get('kv.readonlyAclPassword') };
    this.protectedUsers = new Set([parsed.user.user ?? 'default', READONLY_USER]);
    const e = this.endpoint;
    this.description = `external ${e.tls ? 'rediss' : 'redis'}://${e.host}:${e.port}${parsed.db ? `/${parsed.db}` : ''}`;
  }

  async start(): Promise<void> {
    await createReadonlyUser(this.endpoint, this.admin, this.readonly, this.logger);
    for (const fn of this.upHandlers) await fn();
  }

  async stop(): Promise<void> {}

  onUp(fn: () => Promise<void>): void {
    this.upHandlers.push(fn);
  }
}

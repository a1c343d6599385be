/**
 * The IPC messages between the kv primary (the svc process: redis-server supervision, credential
 * store, daily count) and its worker processes (`SVC_KV_WORKERS`), over the `child_process.fork`
 * channel (JSON serialization; client connections travel as socket handles with `conn`).
 * See `docs/readme/kv-perf.md` "Worker processes".
 */
import type { MetricSnapshot } from '../../metrics.js';
import type { Config } from '../../config.js';
import type { Endpoint, RedisUser } from '../redis/connection.js';

/** The database as the primary sees it: where to connect, as whom, and whether it is up. */
export interface BackendState {
  up: boolean;
  /** The endpoint; a TLS CA bundle travels as base64 text in `caBase64` (JSON has no Buffer). */
  endpoint: Omit<Endpoint, 'ca'> & { caBase64?: string };
  admin: RedisUser;
  standard: RedisUser;
  readonly: RedisUser;
  protectedUsers: string[];
  /** JSON.* mode the primary found (worker processes do not load the Lua library themselves). */
  jsonMode: 'native' | 'library' | 'none';
}

/** Primary -> worker. */
export type ToWorker =
  | {
      t: 'init';
      index: number;
      config: Config;
      credentials: Record<string, string>;
      backend: BackendState;
      /** The shared read-your-writes clock (`sync.ts`): file, and number of slots (this worker's is `index`). */
      syncClockFile: string;
      syncClockSlots: number;
      /** The shared script alias file (`scripts.ts`). */
      scriptAliasFile: string;
    }
  | { t: 'cred'; name: string; value: string }
  | { t: 'backend'; backend: BackendState }
  | { t: 'conn' }
  | { t: 'lease'; rid: number; granted: number; usage: number; day: number }
  /** Asks for the worker's metric families (`src/metrics.ts`), answered with `metrics` and the same `rid`. */
  | { t: 'metrics'; rid: number }
  /** Another process killed a script of identity `key` (`ScriptAdmission` in `watchdog.ts`). */
  | { t: 'scriptKill'; key: string }
  | { t: 'close' };

/** Worker -> primary. */
export type FromWorker =
  | { t: 'ready' }
  | { t: 'lease'; rid: number; need: number }
  | { t: 'metrics'; rid: number; families: MetricSnapshot[] }
  /** This worker killed a script of identity `key`: the primary passes it to the other processes. */
  | { t: 'scriptKill'; key: string };

/** Endpoint -> its IPC form. */
export function endpointToIpc(e: Endpoint): BackendState['endpoint'] {
  const { ca, ...rest } = e;
  return ca ? { ...rest, caBase64: ca.toString('base64') } : rest;
}

/** IPC form -> endpoint. */
export function endpointFromIpc(e: BackendState['endpoint']): Endpoint {
  const { caBase64, ...rest } = e;
  return caBase64 ? { ...rest, ca: Buffer.from(caBase64, 'base64') } : rest;
}

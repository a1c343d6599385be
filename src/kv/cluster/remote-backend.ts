/**
 * The database as a kv worker process sees it: the primary process supervises redis-server (or
 * owns the external connection settings) and tells each worker over IPC where it is, as which ACL
 * users to connect, and whether it is up ({@link RemoteBackend.apply}). Like the supervised
 * backend, `up` turns true only after the `onUp` steps (the gateway reloads its command table).
 */
import type { Logger } from '../../logger.js';
import type { Backend } from '../redis/backend.js';
import type { Endpoint, RedisUser } from '../redis/connection.js';
import { endpointFromIpc, type BackendState } from './ipc.js';

export class RemoteBackend implements Backend {
  endpoint!: Endpoint;
  admin!: RedisUser;
  standard!: RedisUser;
  readonly!: RedisUser;
  protectedUsers!: ReadonlySet<string>;
  up = false;
  jsonMode!: BackendState['jsonMode'];
  private readonly upHandlers: (() => Promise<void>)[] = [];
  private generation = 0;

  constructor(
    private state: BackendState,
    private readonly logger: Logger,
  ) {
    this.assign(state);
  }

  /** Copies `state`'s endpoint, users and JSON mode (not `up`). */
  private assign(state: BackendState): void {
    this.state = state;
    this.endpoint = endpointFromIpc(state.endpoint);
    this.admin = state.admin;
    this.standard = state.standard;
    this.readonly = state.readonly;
    this.protectedUsers = new Set(state.protectedUsers);
    this.jsonMode = state.jsonMode;
  }

  get description(): string {
    return 'redis-server of the primary svc process';
  }

  /** Applies the first state. */
  start(): Promise<void> {
    return this.apply(this.state);
  }

  /**
   * Takes a new state from the primary: down -> `up` false at once (requests fail fast with 503);
   * up -> the `onUp` steps run, then `up` turns true (unless a newer state arrived meanwhile).
   */
  async apply(state: BackendState): Promise<void> {
    const gen = ++this.generation;
    this.assign(state);
    this.up = false;
    if (!state.up) return;
    for (const fn of this.upHandlers) {
      try {
        await fn();
      } catch (err) {
        this.logger.error({ err: (err as Error).message }, 'kv worker: start-up step after redis-server start failed');
      }
    }
    if (gen === this.generation) this.up = true;
  }

  async stop(): Promise<void> {
    this.up = false;
  }

  onUp(fn: () => Promise<void>): void {
    this.upHandlers.push(fn);
  }
}

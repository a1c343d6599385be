/**
 * Where the primaries of a distributed Redis deployment are: {@link ClusterTopology} (Redis Cluster:
 * the slot map from `CLUSTER SLOTS`, refreshed on `MOVED`, on a node's failure and every few
 * seconds) and {@link SentinelTopology} (one primary found through Redis Sentinel:
 * `SENTINEL GET-MASTER-ADDR-BY-NAME` of every sentinel, the address a majority of those that
 * answered names, confirmed with `ROLE`, followed through the sentinels'
 * `+switch-master` messages and on every reconnect). Nodes are named by `host:port`.
 *
 * The router (`router.ts`) asks {@link Topology.primaryFor} for each command and calls
 * {@link Topology.refresh} when a node fails or redirects; a refresh never throws (a topology that
 * cannot be read keeps the last known map and logs).
 */
import type { Logger } from '../../logger.js';
import { RespError, SimpleString, type Reply } from '../resp.js';
import { RedisConnection, type Endpoint, type RedisUser } from './connection.js';
import { SLOTS } from './keys.js';

/** How the router reaches a node and authenticates as svc's admin user. */
export interface NodeAccess {
  endpointOf(addr: string): Endpoint;
  admin: RedisUser;
}

/** The view of the deployment the router routes by. */
export interface Topology {
  /** True for Redis Cluster (keys are routed by slot); false for one primary (Sentinel). */
  readonly sharded: boolean;
  /** The primary serving `slot` (Sentinel: the primary, whatever the slot), or undefined when unknown. */
  primaryFor(slot: number): string | undefined;
  /** The distinct primaries, ordered by the lowest slot each serves. */
  primaries(): { addr: string; firstSlot: number }[];
  /** Every known node, primaries and replicas (ACL rules are per node). */
  nodes(): string[];
  /** Healthy replicas of the primary `addr` in the last reading. */
  replicasOf(addr: string): number;
  /** A `MOVED slot addr` answer: the slot is served by `addr` now (the full map is refreshed too). */
  moved(slot: number, addr: string): void;
  /** Reads the topology anew; concurrent calls share one reading. Never throws. */
  refresh(): Promise<void>;
  /** First reading. @throws Error when no node / sentinel answers. */
  start(): Promise<void>;
  stop(): void;
  /** `fn` runs after a reading that found nodes never seen before, with those nodes. */
  onChange(fn: (added: string[]) => void): void;
}

const str = (r: Reply | string): string => (Buffer.isBuffer(r) ? r.toString('utf8') : r instanceof SimpleString ? r.value : r instanceof RespError ? r.message : String(r));

/** `host:port` -> parts (IPv6 hosts in brackets or bare). @throws Error on a malformed address. */
export function splitAddr(addr: string): { host: string; port: number } {
  const m = /^\[?([^\]]*?)\]?:(\d+)$/.exec(addr.trim());
  if (!m || !m[1]) throw new Error(`expected host:port, got ${JSON.stringify(addr)}`);
  return { host: m[1], port: Number(m[2]) };
}

/** `host`, `port` -> `host:port` (IPv6 in brackets). */
export function joinAddr(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

/**
 * Sends one command on a fresh admin connection (1 s connect timeout) and closes it.
 * @throws KvError `databaseTimeout` when the node does not answer within 2 s (a stopped node
 *   that still accepts connections must not hold up the reading of the topology)
 */
async function ask(access: NodeAccess, addr: string, cmd: string[], who: RedisUser = access.admin): Promise<Reply> {
  const c = await RedisConnection.connect(access.endpointOf(addr), who, 1000);
  c.timeoutAfter(2000);
  try {
    return await c.send(cmd);
  } finally {
    c.close();
  }
}

/** Base of both topologies: the coalesced refresh, the change listeners, the periodic reading. */
abstract class BaseTopology implements Topology {
  abstract readonly sharded: boolean;
  private reading: Promise<void> | undefined;
  private readonly listeners: ((added: string[]) => void)[] = [];
  private timer: NodeJS.Timeout | undefined;
  /** Every node ever seen (a node that drops out of one reading and comes back is not new). */
  protected known = new Set<string>();
  protected stopped = false;

  constructor(protected readonly logger: Logger, private readonly periodMs: number) {}

  abstract primaryFor(slot: number): string | undefined;
  abstract primaries(): { addr: string; firstSlot: number }[];
  abstract nodes(): string[];
  abstract replicasOf(addr: string): number;
  moved(_slot: number, _addr: string): void {
    void this.refresh();
  }

  /** Reads the topology; returns false when nothing answered. */
  protected abstract read(): Promise<boolean>;

  refresh(): Promise<void> {
    return (this.reading ??= this.read()
      .catch((err: unknown) => {
        this.logger.warn({ err: (err as Error).message }, 'kv: reading the database topology failed');
        return false;
      })
      .then(() => {
        this.reading = undefined;
        const added = this.nodes().filter((n) => !this.known.has(n));
        for (const n of added) this.known.add(n);
        if (added.length) for (const fn of this.listeners) fn(added);
      }));
  }

  async start(): Promise<void> {
    if (!(await this.read())) throw new Error(`kv: no node of the database answered (${this.describe()})`);
    for (const n of this.nodes()) this.known.add(n);
    this.timer = setInterval(() => void this.refresh(), this.periodMs);
    this.timer.unref();
  }

  stop(): void {
    this.stopped = true;
    clearInterval(this.timer);
  }

  onChange(fn: (added: string[]) => void): void {
    this.listeners.push(fn);
  }

  protected abstract describe(): string;
}

/** Redis Cluster: the slot map from `CLUSTER SLOTS` of any reachable node (seeds first known). */
export class ClusterTopology extends BaseTopology {
  readonly sharded = true;
  private slots: (string | undefined)[] = new Array(SLOTS).fill(undefined);
  private primaryList: { addr: string; firstSlot: number }[] = [];
  private allNodes: string[] = [];
  private replicaCount = new Map<string, number>();

  constructor(private readonly seeds: string[], private readonly access: NodeAccess, logger: Logger, periodMs = 5000) {
    super(logger, periodMs);
  }

  primaryFor(slot: number): string | undefined {
    return this.slots[slot];
  }

  primaries(): { addr: string; firstSlot: number }[] {
    return this.primaryList;
  }

  nodes(): string[] {
    return this.allNodes;
  }

  replicasOf(addr: string): number {
    return this.replicaCount.get(addr) ?? 0;
  }

  override moved(slot: number, addr: string): void {
    this.slots[slot] = addr;
    super.moved(slot, addr);
  }

  protected describe(): string {
    return `cluster seeds ${this.seeds.join(',')}`;
  }

  protected async read(): Promise<boolean> {
    // the primaries first (their view is the current one), then the other nodes, then the seeds
    const candidates = [...new Set([...this.primaryList.map((p) => p.addr), ...this.allNodes, ...this.seeds])];
    for (const addr of candidates) {
      let r: Reply;
      try {
        r = await ask(this.access, addr, ['CLUSTER', 'SLOTS']);
      } catch {
        continue;
      }
      if (!Array.isArray(r) || r.length === 0) continue;
      const slots: (string | undefined)[] = new Array(SLOTS).fill(undefined);
      const first = new Map<string, number>();
      const nodes = new Set<string>();
      const replicas = new Map<string, number>();
      const at = splitAddr(addr).host;
      for (const range of r) {
        if (!Array.isArray(range) || range.length < 3 || !Array.isArray(range[2])) continue;
        const [from, to] = [Number(range[0]), Number(range[1])];
        const nodeOf = (n: Reply): string | undefined => {
          if (!Array.isArray(n) || n.length < 2) return undefined;
          const host = str(n[0]);
          // '' or '?': the node does not know its own address; it is the one we asked
          return joinAddr(host === '' || host === '?' ? at : host, Number(n[1]));
        };
        const primary = nodeOf(range[2]);
        if (primary === undefined) continue;
        for (let s = from; s <= to; s++) slots[s] = primary;
        first.set(primary, Math.min(first.get(primary) ?? SLOTS, from));
        nodes.add(primary);
        // CLUSTER SLOTS lists the replicas not flagged as failed
        replicas.set(primary, range.length - 3);
        for (const rep of range.slice(3)) {
          const a = nodeOf(rep);
          if (a) nodes.add(a);
        }
      }
      this.slots = slots;
      this.primaryList = [...first].map(([a, f]) => ({ addr: a, firstSlot: f })).sort((x, y) => x.firstSlot - y.firstSlot);
      this.allNodes = [...nodes];
      this.replicaCount = replicas;
      return true;
    }
    return false;
  }
}

/** Settings of {@link SentinelTopology}. */
export interface SentinelSettings {
  sentinels: string[];
  masterName: string;
  /** Credentials of the sentinels (not of the data nodes). */
  sentinelUser: RedisUser;
}

/** One primary found through Redis Sentinel, confirmed with `ROLE`; its replicas from `ROLE` too. */
export class SentinelTopology extends BaseTopology {
  readonly sharded = false;
  private primary: string | undefined;
  private replicas: string[] = [];
  private sub: RedisConnection | undefined;
  private subIndex = 0;
  /** The addresses outvoted at the last reading (comma-joined), to log a change once. */
  private outvoted = '';

  constructor(private readonly settings: SentinelSettings, private readonly access: NodeAccess, logger: Logger, periodMs = 5000) {
    super(logger, periodMs);
  }

  primaryFor(): string | undefined {
    return this.primary;
  }

  primaries(): { addr: string; firstSlot: number }[] {
    return this.primary ? [{ addr: this.primary, firstSlot: 0 }] : [];
  }

  nodes(): string[] {
    return this.primary ? [this.primary, ...this.replicas] : [...this.replicas];
  }

  replicasOf(addr: string): number {
    return addr === this.primary ? this.replicas.length : 0;
  }

  protected describe(): string {
    return `sentinels ${this.settings.sentinels.join(',')}, master ${this.settings.masterName}`;
  }

  override async start(): Promise<void> {
    await super.start();
    this.subscribe();
  }

  override stop(): void {
    super.stop();
    this.sub?.close();
  }

  /**
   * Asks every sentinel at once for the primary's address and believes only an address named by
   * more than half of the sentinels that answered, confirmed with `ROLE` on the node (a sentinel
   * that is behind, or one that lies, is outvoted: svc never connects, with the data nodes'
   * credentials, to an address a single sentinel among several announces). When only one answers,
   * its address is taken (as a client of Sentinel normally does).
   */
  protected async read(): Promise<boolean> {
    const named = await Promise.all(
      this.settings.sentinels.map((s) =>
        ask(this.access, s, ['SENTINEL', 'GET-MASTER-ADDR-BY-NAME', this.settings.masterName], this.settings.sentinelUser).then(
          (r) => (Array.isArray(r) && r.length >= 2 ? joinAddr(str(r[0]), Number(r[1])) : undefined),
          () => undefined,
        ),
      ),
    );
    const votes = new Map<string, number>();
    let answered = 0;
    for (const a of named) {
      if (a === undefined) continue;
      answered++;
      votes.set(a, (votes.get(a) ?? 0) + 1);
    }
    const outvoted = [...votes].filter(([, n]) => n * 2 <= answered).map(([a]) => a);
    const seen = outvoted.sort().join(',');
    if (seen !== this.outvoted) {
      this.outvoted = seen; // logged once per change, not at every periodic reading
      if (seen) this.logger.warn({ outvoted, answered }, 'kv: a minority of the sentinels names another primary; not believed');
    }
    for (const [addr, n] of votes) {
      if (n * 2 <= answered) continue;
      // the sentinels may be behind: the node must say it is a primary
      let role: Reply;
      try {
        role = await ask(this.access, addr, ['ROLE']);
      } catch {
        continue;
      }
      if (!Array.isArray(role) || str(role[0]) !== 'master') continue;
      this.primary = addr;
      this.replicas = Array.isArray(role[2]) ? role[2].filter(Array.isArray).map((x) => joinAddr(str((x as Reply[])[0]), Number((x as Reply[])[1]))) : [];
      return true;
    }
    // nothing confirmed a primary: none is known until one is (requests answer 503)
    this.primary = undefined;
    return false;
  }

  /**
   * Subscribes to `+switch-master` on one sentinel (the next one after a failure); each message
   * about our master, and each (re)subscription, reads the topology anew.
   */
  private subscribe(): void {
    if (this.stopped) return;
    const list = this.settings.sentinels;
    const addr = list[this.subIndex++ % list.length];
    const retry = () => {
      if (!this.stopped) setTimeout(() => this.subscribe(), 500).unref();
    };
    RedisConnection.connect(this.access.endpointOf(addr), this.settings.sentinelUser, 1000).then(
      (c) => {
        if (this.stopped) return c.close();
        this.sub = c;
        c.onPush = (m) => {
          if (Array.isArray(m) && str(m[0]) === 'message' && str(m[2] ?? '').split(' ')[0] === this.settings.masterName) {
            this.logger.info({ message: str(m[2]) }, 'kv: sentinel announced a new primary');
            void this.refresh();
          }
        };
        c.onClose(retry);
        c.sendCb(['SUBSCRIBE', '+switch-master'], false, () => void this.refresh());
      },
      retry,
    );
  }
}

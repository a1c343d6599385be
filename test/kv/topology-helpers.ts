/**
 * Real distributed Redis deployments for the kv tests, started from the same redis-server binary
 * as the supervised mode (`SVC_KV_REDIS_SERVER_BIN`, default `redis-server`) on free ports in a temp
 * directory and removed by `close()`:
 *
 * - {@link startRedisCluster}: 3 primaries + 3 replicas (`--cluster-enabled yes`, `redis-cli --cluster create`)
 * - {@link startRedisSentinel}: 1 primary + 1 replica + 3 sentinels (`redis-server --sentinel`)
 *
 * {@link topologyEnv}: with `SVC_TEST_KV_TOPOLOGY=cluster` or `sentinel`, suites that call it run
 * against such a deployment (started once per test process) instead of the supervised server.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { RedisConnection } from '../../src/kv/redis/connection.js';
import type { Reply } from '../../src/kv/resp.js';
import { tempDir } from '../helpers/env.js';
import { waitFor } from '../helpers/wait.js';

const BIN = process.env.SVC_KV_REDIS_SERVER_BIN ?? 'redis-server';
const CLI = process.env.SVC_TEST_REDIS_CLI ?? 'redis-cli';

/** One redis-server process of a deployment. */
export interface RedisNode {
  port: number;
  proc: ChildProcess;
  /** SIGKILLs it (resolves once it exited). */
  kill(): Promise<void>;
}

/** A port that is free, and (for cluster nodes) whose bus port + 10000 is free too. */
async function freePort(bus = false): Promise<number> {
  const tryBind = (port: number) =>
    new Promise<boolean>((res) => {
      const s = net.createServer();
      s.once('error', () => res(false));
      s.listen(port, '127.0.0.1', () => s.close(() => res(true)));
    });
  for (;;) {
    const port = 20000 + Math.floor(Math.random() * 25000);
    if ((await tryBind(port)) && (!bus || (await tryBind(port + 10000)))) return port;
  }
}

/** Sends one command to 127.0.0.1:`port` (no AUTH) and closes. */
export async function nodeCommand(port: number, cmd: string[]): Promise<Reply> {
  const c = await RedisConnection.connect({ host: '127.0.0.1', port }, {}, 2000);
  try {
    return await c.send(cmd);
  } finally {
    c.close();
  }
}

/** A reply as text (bulk and simple strings, numbers, errors' messages). */
export const replyText = (r: Reply): string => (Buffer.isBuffer(r) ? r.toString() : String((r as { value?: string; message?: string })?.value ?? (r as { message?: string })?.message ?? r));
const str = replyText;

async function startNode(dir: string, port: number, args: string[], conf?: string): Promise<RedisNode> {
  const nodeDir = path.join(dir, String(port));
  fs.mkdirSync(nodeDir, { recursive: true });
  const file = path.join(nodeDir, 'redis.conf');
  fs.writeFileSync(file, conf ?? '');
  const proc = spawn(BIN, [file, '--port', String(port), '--bind', '127.0.0.1', '--dir', nodeDir, '--save', '', '--appendonly', 'no', ...args], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const exited = new Promise<void>((res) => proc.once('exit', () => res()));
  await waitFor(`redis-server on ${port}`, async () => {
    if (proc.exitCode !== null) throw new Error(`redis-server on ${port} exited`);
    try {
      return str(await nodeCommand(port, ['PING'])) === 'PONG';
    } catch {
      return false;
    }
  }, 20_000);
  return {
    port,
    proc,
    kill: async () => {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
      await exited;
    },
  };
}

/** One plain redis-server on a free port in a temp dir; `close()` kills it and removes the dir. */
export async function startRedisNode(): Promise<RedisNode & { close(): Promise<void> }> {
  const tmp = tempDir('svc-redis-');
  const n = await startNode(tmp.dir, await freePort(), []);
  return {
    ...n,
    close: async () => {
      await n.kill();
      tmp.cleanup();
    },
  };
}

/** A running 3-primary + 3-replica Redis Cluster. */
export interface RedisClusterUnderTest {
  nodes: RedisNode[];
  /** `127.0.0.1:port,...` of every node (for `SVC_KV_REDIS_CLUSTER`). */
  seeds: string;
  /** Ports of the current primaries. */
  primaries(): Promise<number[]>;
  close(): Promise<void>;
}

/** Starts a 3-primary + 3-replica cluster (node timeout 1 s, so a replica takes over within seconds). */
export async function startRedisCluster(): Promise<RedisClusterUnderTest> {
  const tmp = tempDir('svc-cluster-');
  const nodes: RedisNode[] = [];
  try {
    for (let i = 0; i < 6; i++) {
      nodes.push(await startNode(tmp.dir, await freePort(true), ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', '1000']));
    }
    const r = spawnSync(CLI, ['--cluster', 'create', ...nodes.map((n) => `127.0.0.1:${n.port}`), '--cluster-replicas', '1', '--cluster-yes'], { encoding: 'utf8', timeout: 60_000 });
    if (r.status !== 0) throw new Error(`redis-cli --cluster create failed: ${r.stdout}${r.stderr}`);
    await waitFor('cluster state ok on every node, every primary with its replica', async () => {
      for (const n of nodes) {
        if (!str(await nodeCommand(n.port, ['CLUSTER', 'INFO'])).includes('cluster_state:ok')) return false;
        const slots = await nodeCommand(n.port, ['CLUSTER', 'SLOTS']);
        if (!Array.isArray(slots) || slots.length !== 3 || slots.some((r) => !Array.isArray(r) || r.length < 4)) return false;
      }
      return true;
    }, 30_000);
  } catch (err) {
    for (const n of nodes) await n.kill();
    tmp.cleanup();
    throw err;
  }
  return {
    nodes,
    seeds: nodes.map((n) => `127.0.0.1:${n.port}`).join(','),
    primaries: async () => {
      const out: number[] = [];
      for (const n of nodes) {
        if (n.proc.exitCode !== null || n.proc.signalCode !== null) continue;
        const role = await nodeCommand(n.port, ['ROLE']).catch(() => null);
        if (Array.isArray(role) && str(role[0]) === 'master') out.push(n.port);
      }
      return out;
    },
    close: async () => {
      for (const n of nodes) await n.kill();
      tmp.cleanup();
    },
  };
}

/** A running primary + replica + 3 sentinels (master name `svcmaster`). */
export interface RedisSentinelUnderTest {
  primary: RedisNode;
  replica: RedisNode;
  sentinels: RedisNode[];
  /** `127.0.0.1:port,...` of the sentinels. */
  addresses: string;
  masterName: string;
  /** The port the sentinels report for the master now. */
  masterPort(): Promise<number>;
  close(): Promise<void>;
}

/** Starts 1 primary + 1 replica + 3 sentinels (down after 1 s, failover timeout 5 s). */
export async function startRedisSentinel(): Promise<RedisSentinelUnderTest> {
  const g = nodeGroup('svc-sentinel-');
  const masterName = 'svcmaster';
  try {
    const primary = g.add(await startNode(g.dir, await freePort(), []));
    const replica = g.add(await startNode(g.dir, await freePort(), ['--replicaof', '127.0.0.1', String(primary.port)]));
    await waitFor('replica in sync', async () => str(await nodeCommand(replica.port, ['INFO', 'replication'])).includes('master_link_status:up'), 20_000);
    const sentinels: RedisNode[] = [];
    for (let i = 0; i < 3; i++) {
      const conf = [
        `sentinel monitor ${masterName} 127.0.0.1 ${primary.port} 2`,
        `sentinel down-after-milliseconds ${masterName} 1000`,
        `sentinel failover-timeout ${masterName} 5000`,
        `sentinel parallel-syncs ${masterName} 1`,
        '',
      ].join('\n');
      sentinels.push(g.add(await startNode(g.dir, await freePort(), ['--sentinel'], conf)));
    }
    const masterPort = async () => {
      for (const s of sentinels) {
        if (s.proc.exitCode !== null) continue;
        const r = await nodeCommand(s.port, ['SENTINEL', 'GET-MASTER-ADDR-BY-NAME', masterName]).catch(() => null);
        if (Array.isArray(r)) return Number(str(r[1]));
      }
      throw new Error('no sentinel answered');
    };
    await waitFor('sentinels see each other and the replica', async () => {
      const r = await nodeCommand(sentinels[0].port, ['SENTINEL', 'MASTER', masterName]);
      const f = new Map<string, string>();
      if (Array.isArray(r)) for (let i = 0; i + 1 < r.length; i += 2) f.set(str(r[i]), str(r[i + 1]));
      return Number(f.get('num-other-sentinels')) >= 2 && Number(f.get('num-slaves')) >= 1;
    }, 30_000);
    return {
      primary,
      replica,
      sentinels,
      addresses: sentinels.map((s) => `127.0.0.1:${s.port}`).join(','),
      masterName,
      masterPort,
      close: g.close,
    };
  } catch (err) {
    await g.close();
    throw err;
  }
}

/**
 * A sentinel that lies: a real Redis Sentinel monitoring, under `masterName`, a redis-server of its
 * own (`foreign`, a primary), so it names an address the deployment's sentinels do not.
 */
export async function startLyingSentinel(masterName: string): Promise<{ sentinel: RedisNode; foreign: RedisNode; close(): Promise<void> }> {
  const g = nodeGroup('svc-liar-');
  try {
    const foreign = g.add(await startNode(g.dir, await freePort(), []));
    const sentinel = g.add(await startNode(g.dir, await freePort(), ['--sentinel'], `sentinel monitor ${masterName} 127.0.0.1 ${foreign.port} 1\n`));
    return { sentinel, foreign, close: g.close };
  } catch (err) {
    await g.close();
    throw err;
  }
}

/** Nodes started in one temp dir: `add` records one, `close` kills them all and removes the dir. */
function nodeGroup(prefix: string): { dir: string; add(n: RedisNode): RedisNode; close(): Promise<void> } {
  const tmp = tempDir(prefix);
  const all: RedisNode[] = [];
  return {
    dir: tmp.dir,
    add: (n) => (all.push(n), n),
    close: async () => {
      for (const n of all) await n.kill();
      tmp.cleanup();
    },
  };
}

let shared: Promise<{ env: Record<string, string>; close(): Promise<void> }> | undefined;

/**
 * The settings that put a test's svc on the deployment `SVC_TEST_KV_TOPOLOGY` names (`cluster`,
 * `sentinel`), started once per test process; `{}` without it.
 * {@link closeTopology} stops it.
 */
export async function topologyEnv(): Promise<Record<string, string>> {
  const kind = process.env.SVC_TEST_KV_TOPOLOGY;
  if (!kind) return {};
  shared ??= (async (): Promise<{ env: Record<string, string>; close(): Promise<void> }> => {
    if (kind === 'cluster') {
      const c = await startRedisCluster();
      return { env: { SVC_KV_REDIS_CLUSTER: c.seeds }, close: c.close };
    }
    if (kind === 'sentinel') {
      const s = await startRedisSentinel();
      return { env: { SVC_KV_REDIS_SENTINELS: s.addresses, SVC_KV_REDIS_SENTINEL_MASTER: s.masterName }, close: s.close };
    }
    throw new Error(`SVC_TEST_KV_TOPOLOGY=${kind}: expected cluster or sentinel`);
  })();
  return (await shared!).env;
}

/** Stops the deployment {@link topologyEnv} started (none: nothing). */
export async function closeTopology(): Promise<void> {
  const s = shared;
  shared = undefined;
  if (s) await (await s).close();
}

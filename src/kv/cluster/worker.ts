/**
 * Entry point of a kv worker process (`SVC_KV_WORKERS` > 0), forked by the primary svc process
 * (`workers.ts`). It runs the same gateway and HTTP front as a single-process server, but:
 * - client connections arrive from the primary as socket handles (`conn` messages);
 * - the database is the primary's ({@link RemoteBackend}: endpoint, ACL users, up/down state);
 * - credentials (`kv.*`) are a copy kept current by `cred` messages (rotations apply at once);
 * - the daily limit is taken in leases from the primary ({@link LeasedQuota});
 * - the read-your-writes token comes from the clock file shared with the primary and the other
 *   workers (`sync.ts`), so it is one token sequence for the whole server;
 * - a script it kills is reported to the primary, which tells the other workers (`scriptKill`), so
 *   a token's script cool-down holds on every worker (`watchdog.ts`).
 * It exits when the primary says `close` (after closing its connections) or when the IPC channel
 * closes (the primary died). SIGINT is ignored: the primary decides when workers stop.
 */
import type net from 'node:net';
import { createLogger } from '../../logger.js';
import { Metrics } from '../../metrics.js';
import { startTracing, type TracingHandle } from '../../tracing.js';
import { createKvFront, type KvFront } from '../front.js';
import { KvGateway } from '../gateway.js';
import { KvMetrics } from '../metrics.js';
import { LeasedQuota } from '../quota.js';
import { AliasFile } from '../scripts.js';
import { SharedSyncClock } from '../sync.js';
import { KvTokens } from '../tokens.js';
import type { FromWorker, ToWorker } from './ipc.js';
import { RemoteBackend } from './remote-backend.js';

if (!process.send) {
  console.error('src/kv/cluster/worker.ts is started by the kv primary process (child_process.fork)');
  process.exit(2);
}

const send = (m: FromWorker): void => {
  if (process.connected) process.send!(m);
};

let front: KvFront | undefined;
let gateway: KvGateway | undefined;
let backend: RemoteBackend | undefined;
let metrics: Metrics | undefined;
let tracing: TracingHandle | undefined;
const credentials = new Map<string, string>();
const leases = new Map<number, (r: { granted: number; usage: number; day: number }) => void>();
let nextRid = 1;
let closing = false;
/** Connections that arrived before start-up finished. */
const early: net.Socket[] = [];

process.on('SIGINT', () => {});
process.on('disconnect', () => process.exit(0));

async function init(m: Extract<ToWorker, { t: 'init' }>): Promise<void> {
  const logger = createLogger(m.config.logLevel).child({ kvWorker: m.index, pid: process.pid });
  tracing = await startTracing(logger); // the primary's OTEL_* environment, inherited
  for (const [k, v] of Object.entries(m.credentials)) credentials.set(k, v);
  const source = {
    get(name: string): string {
      const v = credentials.get(name);
      if (v === undefined) throw new Error(`kv worker: credential ${name} was not passed by the primary`);
      return v;
    },
  };
  backend = new RemoteBackend(m.backend, logger);
  const quota = new LeasedQuota(m.config.kv.dailyRequestLimit, (need) => {
    const rid = nextRid++;
    return new Promise((resolve) => {
      leases.set(rid, resolve);
      send({ t: 'lease', rid, need });
    });
  });
  const be = backend;
  metrics = new Metrics(m.config.metrics.enabled);
  const kvMetrics = new KvMetrics(metrics);
  gateway = new KvGateway(backend, new KvTokens(source), m.config.kv, logger, {
    quota,
    jsonMode: () => be.jsonMode,
    syncClock: SharedSyncClock.open(m.syncClockFile, m.index, m.syncClockSlots),
    scriptAliases: new AliasFile(m.scriptAliasFile),
    clientName: `svc-kv-w${m.index}-${process.pid}`,
    backendRtt: kvMetrics.backendRtt,
    onScriptKill: (key) => send({ t: 'scriptKill', key }),
  });
  await gateway.start();
  front = createKvFront(gateway, m.config, logger, kvMetrics);
  for (const s of early.splice(0)) front.accept(s);
  send({ t: 'ready' });
}

async function close(): Promise<void> {
  if (closing) return;
  closing = true;
  try {
    await front?.close();
    await gateway?.close();
    await tracing?.shutdown();
  } finally {
    process.exit(0);
  }
}

process.on('message', (m: ToWorker, handle?: net.Socket) => {
  switch (m.t) {
    case 'init':
      init(m).catch((err: Error) => {
        console.error(`kv worker ${process.pid}: start-up failed: ${err.stack ?? err.message}`);
        process.exit(1);
      });
      return;
    case 'conn':
      if (!handle) return;
      if (closing) handle.destroy();
      else if (front) front.accept(handle);
      else early.push(handle);
      return;
    case 'cred':
      credentials.set(m.name, m.value);
      return;
    case 'backend':
      void backend?.apply(m.backend);
      return;
    case 'lease': {
      const resolve = leases.get(m.rid);
      leases.delete(m.rid);
      resolve?.(m);
      return;
    }
    case 'metrics': {
      const rid = m.rid;
      void (metrics ? metrics.snapshot() : Promise.resolve([])).then((families) => send({ t: 'metrics', rid, families }));
      return;
    }
    case 'scriptKill':
      gateway?.scriptKilledElsewhere(m.key);
      return;
    case 'close':
      void close();
      return;
  }
});

/**
 * PostgreSQL job queues measured beside svc's PostgreSQL store in `npm run bench:queue`:
 * graphile-worker and pg-boss, each in the configuration its documentation gives for throughput,
 * on the bench's PostgreSQL cluster. Not dependencies of svc: pinned in `bench/peers/package.json`
 * and installed on first use (`./install.ts`).
 *
 * Each peer has two halves, as users run them:
 * - a **worker** in its own process ({@link runPeerWorker}, entry `bench/peers/pg-worker.ts`)
 *   whose job handler POSTs the job's payload to the bench's sink over an undici keep-alive pool
 *   (64 connections) and fails the job on a non-2xx answer, so a job counts as done only after its
 *   HTTP delivery, like an svc delivery;
 * - a **publisher** client in the bench process ({@link openPeerPublisher}): one call per message,
 *   each its own transaction (COMMIT waits for the WAL flush: `synchronous_commit=on`).
 *
 * graphile-worker 0.18 (docs "Performance", "Configuration"; `preset.worker`):
 * `concurrentJobs` 64 (jobs wait on HTTP, as BullMQ's concurrency 64 and svc's deliveries in
 * flight), `localQueue.size` 500 (batch-fetch and lock jobs, the documented perf-test setting),
 * `completeJobBatchDelay`/`failJobBatchDelay` 0 (batch completions within one event-loop turn),
 * prepared statements on (the default), `maxPoolSize` 16 for the worker. Publishers use
 * `makeWorkerUtils().addJob` on one pool of 64 connections (one per publisher); `quickAddJob`
 * would open a pool per call, and `addJobs` batches several jobs in one call, which independent
 * publishers do not have. `maxAttempts` 4, as svc's default retries 3 and the BullMQ peer.
 *
 * pg-boss 12 (docs "Workers", "Queues"; README): `useListenNotify` with a `notify: true` queue
 * (a job insert wakes the worker at once instead of at the next poll), `work()` with `batchSize` 16,
 * `localConcurrency` 4 (64 jobs in flight) and `burstWhenBatchFull` (fetch again at once while
 * batches come back full), the batch handler POSTs its jobs concurrently; `retryLimit` 3. Publishers:
 * a second PgBoss instance (no supervision, no schedules) with a pool of 64, `send()` per message.
 *
 * Both current majors declare Node 22+ in `engines` (graphile-worker 0.18: >=22.18, pg-boss 12:
 * >=22.12); they install with an EBADENGINE warning on Node 20 and ran this bench there.
 */
import { Pool } from 'undici';
import { importPeer } from './install.js';

/** The peers this module drives, with the versions pinned in `bench/peers/package.json`. */
export const PG_PEERS = {
  'graphile-worker': { pkg: 'graphile-worker', version: '0.18.0' },
  'pg-boss': { pkg: 'pg-boss', version: '12.38.0' },
} as const;
export type PgPeer = keyof typeof PG_PEERS;

const QUEUE = 'bench';
const CONCURRENCY = 64;

/** POSTs `payload` as JSON to `sinkUrl` + `/<peer>`; throws on a non-2xx answer (the job is retried). */
function poster(sinkUrl: string, peer: string): (payload: unknown) => Promise<void> {
  const pool = new Pool(sinkUrl, { connections: CONCURRENCY, pipelining: 1 });
  return async (payload) => {
    const res = await pool.request({ path: `/${peer}`, method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(payload) });
    await res.body.text();
    if (res.statusCode >= 300) throw new Error(`sink answered ${res.statusCode}`);
  };
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
const silentLogger = (gw: any) => new gw.Logger(() => () => undefined);

/**
 * Runs the worker of `peer` against database `dbUrl` until the process is killed; prints
 * `worker ready` once it takes jobs (schema migrated, queue created).
 */
export async function runPeerWorker(peer: PgPeer, dbUrl: string, sinkUrl: string): Promise<void> {
  const post = poster(sinkUrl, peer);
  if (peer === 'graphile-worker') {
    const gw = await importPeer('graphile-worker');
    await gw.run({
      noHandleSignals: true,
      logger: silentLogger(gw),
      taskList: { deliver: (payload: unknown) => post(payload) },
      preset: {
        worker: {
          connectionString: dbUrl,
          concurrentJobs: CONCURRENCY,
          maxPoolSize: 16,
          preparedStatements: true,
          localQueue: { size: 500 },
          completeJobBatchDelay: 0,
          failJobBatchDelay: 0,
          crontabFile: '/nonexistent',
          taskDirectory: '/nonexistent',
        },
      },
    });
  } else {
    const { PgBoss } = await importPeer('pg-boss');
    const boss = new PgBoss({ connectionString: dbUrl, max: 16, connectionTimeoutMillis: 60_000, useListenNotify: true, schedule: false });
    boss.on('error', (err: Error) => process.stderr.write(`pg-boss: ${err.message}\n`));
    await boss.start();
    if (!(await boss.getQueue(QUEUE))) await boss.createQueue(QUEUE, { notify: true, retryLimit: 3 });
    await boss.work(QUEUE, { batchSize: 16, localConcurrency: 4, burstWhenBatchFull: true, pollingIntervalSeconds: 0.5 }, async (jobs: { data: unknown }[]) => {
      await Promise.all(jobs.map((j) => post(j.data)));
    });
  }
  process.stdout.write('worker ready\n');
}

/** The publishing half of a peer (module doc). */
export interface PeerPublisher {
  /** Enqueues one job with `payload`; resolves once its transaction has committed. */
  publish(payload: unknown): Promise<void>;
  close(): Promise<void>;
}

/** Opens the publisher of `peer` on `dbUrl` (call after the worker is ready: it owns the schema). */
export async function openPeerPublisher(peer: PgPeer, dbUrl: string): Promise<PeerPublisher> {
  if (peer === 'graphile-worker') {
    const gw = await importPeer('graphile-worker');
    const utils = await gw.makeWorkerUtils({ connectionString: dbUrl, maxPoolSize: CONCURRENCY, logger: silentLogger(gw) });
    return {
      publish: async (payload) => {
        await utils.addJob('deliver', payload, { maxAttempts: 4 });
      },
      close: () => utils.release(),
    };
  }
  const { PgBoss } = await importPeer('pg-boss');
  const boss = new PgBoss({ connectionString: dbUrl, max: CONCURRENCY, connectionTimeoutMillis: 60_000, supervise: false, schedule: false, migrate: false });
  boss.on('error', (err: Error) => process.stderr.write(`pg-boss publisher: ${err.message}\n`));
  await boss.start();
  return {
    publish: async (payload) => {
      const id = await boss.send(QUEUE, payload);
      if (!id) throw new Error('pg-boss send returned no job id');
    },
    close: () => boss.stop({ graceful: false, wait: true }),
  };
}

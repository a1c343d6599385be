/**
 * Child-process entry of a PostgreSQL peer's worker in `npm run bench:queue`:
 * `node --import tsx bench/peers/pg-worker.ts <graphile-worker|pg-boss> <database URL> <sink URL>`.
 * Prints `worker ready` when it takes jobs and runs until killed (see `./pg-queues.ts`).
 */
import { PG_PEERS, runPeerWorker, type PgPeer } from './pg-queues.js';

const [peer, dbUrl, sinkUrl] = process.argv.slice(2);
if (!(peer in PG_PEERS) || !dbUrl || !sinkUrl) {
  process.stderr.write('usage: pg-worker.ts <graphile-worker|pg-boss> <database URL> <sink URL>\n');
  process.exit(2);
}
runPeerWorker(peer as PgPeer, dbUrl, sinkUrl).catch((err: Error) => {
  process.stderr.write(`${peer} worker failed: ${err.stack ?? err.message}\n`);
  process.exit(1);
});

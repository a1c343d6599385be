/**
 * The entry of the topology router's worker thread (`distributed.ts`, `SVC_KV_ROUTER_THREAD`):
 * reads the topology, starts {@link TopologyRouter} on the unix socket in `workerData`
 * ({@link RouterThreadData}) and posts `{ ready: true }`, or `{ error }` when it cannot start. On
 * the message `'close'` it closes the router and posts `{ closed: true }`.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { createLogger } from '../../logger.js';
import { createTopologyRouter, type RouterThreadData } from './distributed.js';

const data = workerData as RouterThreadData;
const logger = createLogger(data.logLevel);
const { topology, router } = createTopologyRouter(data.kv, logger);
parentPort!.on('message', (m: unknown) => {
  if (m !== 'close') return;
  topology.stop();
  void router.close().finally(() => parentPort!.postMessage({ closed: true }));
});
try {
  await topology.start();
  await router.start(data.socketPath);
  parentPort!.postMessage({ ready: true });
} catch (err) {
  parentPort!.postMessage({ error: (err as Error).message });
  topology.stop();
  await router.close();
  process.exit(1);
}

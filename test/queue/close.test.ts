/**
 * Shutdown order of the queue area: the workflow engine applies a delivery outcome to the run
 * (a failed step to be retried, a failure callback's result, a child's result to its invoking
 * parent) in an update chained after the outcome is recorded. `close()` must wait for those
 * updates before it closes the store, or they hit a closed database and are lost. (A step that
 * fails for good ends its run in the DLQ move's own transaction: `test/queue/workflow-crash.test.ts`.)
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { test } from 'node:test';
import { Client as WorkflowClient } from '@upstash/workflow';
import { createLogger } from '../../src/logger.js';
import { createContext } from '../../src/main.js';
import { createQueueServer } from '../../src/queue/server.js';
import { openSqliteQueueStore } from '../../src/queue/store/sqlite.js';
import type { QueueStore } from '../../src/queue/store/types.js';
import { tempDir, testConfig } from '../helpers/env.js';
import { waitFor } from './helpers.js';
import { startWorkflowApp } from './workflow-helpers.js';

/** Wraps `target` so that every method call goes to it (bound), except those in `overrides`. */
function wrap<T extends object>(target: T, overrides: Partial<Record<keyof T, unknown>>): T {
  return new Proxy(target, {
    get(t, prop, receiver) {
      if (prop in overrides) return overrides[prop as keyof T];
      const v = Reflect.get(t, prop, receiver) as unknown;
      return typeof v === 'function' ? v.bind(t) : v;
    },
  });
}

test('close() waits for pending workflow run updates before closing the store', async () => {
  const tmp = tempDir('svc-q-close-');
  const file = path.join(tmp.dir, 'queue.sqlite');
  const actx = createContext(testConfig(tmp.dir, { SVC_AREAS: 'queue' }), { logger: createLogger('fatal'), env: {} });
  const real = openSqliteQueueStore(file);
  const realRuns = real.workflows!();
  // The first run update after a failed attempt is held until the test has started close().
  let entered = false;
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const runs = wrap(realRuns, {
    updateRun: async (...args: Parameters<typeof realRuns.updateRun>) => {
      if (!entered && (args[2] as { next?: { state?: string } }).next?.state === 'STEP_RETRY') {
        entered = true;
        await gate;
      }
      return realRuns.updateRun(...args);
    },
  });
  const store = wrap<QueueStore>(real, { workflows: () => runs });
  const server = await createQueueServer(actx, { store });
  const url = await server.listen();
  const token = actx.credentials.get('queue.token');
  const app = await startWorkflowApp(
    {
      QSTASH_URL: url,
      QSTASH_TOKEN: token,
      QSTASH_CURRENT_SIGNING_KEY: actx.credentials.get('queue.currentSigningKey'),
      QSTASH_NEXT_SIGNING_KEY: actx.credentials.get('queue.nextSigningKey'),
    },
    {
      '/broken': [
        async (ctx) => {
          await ctx.run('fails', () => {
            throw new Error('step fails');
          });
        },
        {},
      ],
    },
  );
  try {
    const { workflowRunId } = await new WorkflowClient({ baseUrl: url, token }).trigger({ url: `${app.url}/broken`, body: {}, retries: 1, retryDelay: '60000' });
    await waitFor('the failed step reaches the run update', () => entered, 30_000);
    const closing = server.close();
    await new Promise((r) => setTimeout(r, 200));
    release();
    await closing;

    const reopened = openSqliteQueueStore(file);
    try {
      const run = await reopened.workflows!().findRun(workflowRunId);
      assert.equal(run?.next?.state, 'STEP_RETRY', 'the run update chained on the outcome was applied before the store closed');
    } finally {
      await reopened.close();
    }
  } finally {
    release();
    await app.close();
    tmp.cleanup();
  }
});

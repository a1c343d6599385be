/**
 * A workflow run and its messages agree after a kill -9 between their writes. svc runs as a child
 * process that kills itself with SIGKILL at a named point (`QUEUE_TEST_CRASH_POINT`,
 * `src/queue/crash-point.ts`), then restarts on the same data:
 *
 * - `dlq-moved`: right after a run's step message moved to the DLQ — the run is RUN_FAILED with
 *   that DLQ entry after the restart (the run's end is written in the move's transaction);
 * - `workflow-run-created`: after a trigger's run was written, before its message — after the
 *   restart the run does not exist (start-up reconciliation drops it), and triggering the same
 *   run id again runs it to the end.
 *
 * Both on SQLite and on PostgreSQL (a database of the test server; leases of 1 s, since a
 * restarted node leaves other nodes' newest runs alone for one lease).
 */
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { Client as WorkflowClient } from '@upstash/workflow';
import { tempDir } from '../helpers/env.js';
import { startTestPostgres, type TestPostgres } from '../helpers/postgres.js';
import { spawnQueueSvc, waitFor } from './helpers.js';
import { startWorkflowApp } from './workflow-helpers.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const TOKEN = Buffer.from(JSON.stringify({ UserID: 'wf-crash', Password: 'secret-password' })).toString('base64');
const KEYS = { current: 'sig_wfCrashCurrentKey00000001', next: 'sig_wfCrashNextKey000000000001' };
const APP_ENV = { QSTASH_TOKEN: TOKEN, QSTASH_CURRENT_SIGNING_KEY: KEYS.current, QSTASH_NEXT_SIGNING_KEY: KEYS.next };

const children: ChildProcess[] = [];
after(() => children.forEach((c) => c.exitCode === null && c.signalCode === null && c.kill('SIGKILL')));

let pg: TestPostgres | undefined;
before(async () => {
  pg = await startTestPostgres();
});
after(async () => {
  await pg?.stop();
});

async function spawn(dataDir: string, storeEnv: Record<string, string>, crashAt?: string) {
  const env: Record<string, string> = {
    SVC_QUEUE_TOKEN: TOKEN,
    SVC_QUEUE_CURRENT_SIGNING_KEY: KEYS.current,
    SVC_QUEUE_NEXT_SIGNING_KEY: KEYS.next,
    ...storeEnv,
    ...(crashAt ? { QUEUE_TEST_CRASH_POINT: crashAt } : {}),
  };
  const svc = await spawnQueueSvc(dataDir, env);
  children.push(svc.child);
  return svc;
}

const killed = (child: ChildProcess) =>
  waitFor('svc killed itself', () => (child.signalCode === 'SIGKILL' ? true : undefined), 60_000);

async function runLog(url: string, workflowRunId: string): Promise<Json[]> {
  const { runs } = (await new WorkflowClient({ baseUrl: url, token: TOKEN }).logs({ filter: { workflowRunId } } as never)) as unknown as { runs: Json[] };
  return runs;
}

for (const store of ['sqlite', 'postgres'] as const) {
  describe(`kill -9 between a workflow run's write and its message's (${store})`, () => {
    const storeEnv = async (): Promise<Record<string, string>> =>
      store === 'sqlite' ? { SVC_QUEUE_DATABASE_URL: '' } : { SVC_QUEUE_DATABASE_URL: await pg!.newDatabase('wfcrash'), SVC_QUEUE_LEASE_MS: '1000' };

    test('a step message moved to the DLQ: its run is RUN_FAILED with that entry after the restart', async () => {
      const tmp = tempDir('svc-wf-crash-dlq-');
      const app = await startWorkflowApp({ ...APP_ENV }, {}, (path) => (path === '/fail' ? { status: 500, body: 'boom' } : undefined));
      try {
        const env = await storeEnv();
        const first = await spawn(tmp.dir, env, 'dlq-moved');
        const { workflowRunId } = await new WorkflowClient({ baseUrl: first.url, token: TOKEN }).trigger({ url: `${app.url}/fail`, body: { n: 1 }, retries: 0 });
        await killed(first.child);
        assert.equal(app.requests.filter((r) => r.path === '/fail').length, 1, 'one attempt, then the DLQ move, then the crash');

        const second = await spawn(tmp.dir, env);
        const run = await waitFor('the run is listed', async () => (await runLog(second.url, workflowRunId))[0], 20_000);
        assert.equal(run.workflowState, 'RUN_FAILED', `run state after the restart: ${JSON.stringify(run)}`);
        const dlq = (await (await fetch(`${second.url}/v2/workflows/dlq`, { headers: { authorization: `Bearer ${TOKEN}` } })).json()) as Json;
        const failed = (dlq.messages as Json[]).find((m) => m.workflowRunId === workflowRunId);
        assert.ok(failed?.dlqId, `the failed run is in the workflow DLQ: ${JSON.stringify(dlq)}`);
        second.child.kill('SIGTERM');
        await new Promise((r) => second.child.once('exit', r));
      } finally {
        await app.close();
        tmp.cleanup();
      }
    });

    test('a trigger whose run was written but not its message: no run after the restart; the same run id then runs to the end', async () => {
      const tmp = tempDir('svc-wf-crash-run-');
      const app = await startWorkflowApp({ ...APP_ENV }, { '/ok': [async (ctx) => await ctx.run('only', () => 'done'), {}] });
      try {
        const env = await storeEnv();
        const first = await spawn(tmp.dir, env, 'workflow-run-created');
        const givenId = `crash-${store}`;
        const workflowRunId = `wfr_${givenId}`; // the SDK prefixes the id it is given
        await assert.rejects(new WorkflowClient({ baseUrl: first.url, token: TOKEN, retry: false }).trigger({ url: `${app.url}/ok`, body: {}, workflowRunId: givenId, retries: 0 }));
        await killed(first.child);
        assert.equal(app.requests.length, 0, 'nothing was delivered');
        // on a shared store, a restarted node leaves runs younger than a lease to their writer
        if (store === 'postgres') await new Promise((r) => setTimeout(r, 1500));

        const second = await spawn(tmp.dir, env);
        app.env.QSTASH_URL = second.url;
        assert.deepEqual(await runLog(second.url, workflowRunId), [], 'the run whose trigger was never stored is gone');
        const again = await new WorkflowClient({ baseUrl: second.url, token: TOKEN }).trigger({ url: `${app.url}/ok`, body: {}, workflowRunId: givenId });
        assert.equal(again.workflowRunId, workflowRunId);
        const done = await waitFor('the run completes', async () => (await runLog(second.url, workflowRunId)).find((r) => r.workflowState === 'RUN_SUCCESS'), 30_000).catch(async (err) => {
          throw new Error(`${(err as Error).message}: ${JSON.stringify(await runLog(second.url, workflowRunId))} ${JSON.stringify(app.requests.map((r) => [r.path, r.status]))} ${second.output()}`);
        });
        assert.equal(JSON.parse(done.workflowRunResponse), 'done');
        second.child.kill('SIGTERM');
        await new Promise((r) => second.child.once('exit', r));
      } finally {
        await app.close();
        tmp.cleanup();
      }
    });
  });
}

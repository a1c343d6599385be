/**
 * A workflow run survives a crash of svc: svc runs as
 * a child process (`node bin/svc.js serve`, SVC_AREAS=queue), is killed with SIGKILL while a run
 * sleeps between two steps, restarts on the same data dir (and a new port, which the workflow
 * endpoint follows), and the run then completes: each step ran once, the state is RUN_SUCCESS.
 */
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { after, test } from 'node:test';
import { Client as WorkflowClient } from '@upstash/workflow';
import { tempDir } from '../helpers/env.js';
import { spawnQueueSvc, waitFor } from './helpers.js';
import { startWorkflowApp } from './workflow-helpers.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const TOKEN = Buffer.from(JSON.stringify({ UserID: 'wf-restart', Password: 'secret-password' })).toString('base64');
const KEYS = { current: 'sig_wfRestartCurrentKey000001', next: 'sig_wfRestartNextKey0000000001' };

const spawnSvc = (dataDir: string) => spawnQueueSvc(dataDir, { SVC_QUEUE_TOKEN: TOKEN, SVC_QUEUE_CURRENT_SIGNING_KEY: KEYS.current, SVC_QUEUE_NEXT_SIGNING_KEY: KEYS.next });

const children: ChildProcess[] = [];
after(() => children.forEach((c) => c.exitCode === null && c.kill('SIGKILL')));

test('kill -9 of svc while a run sleeps between steps; the run completes after the restart', async () => {
  const tmp = tempDir('svc-wf-restart-');
  const counts = new Map<string, number>();
  const bump = (k: string) => counts.set(k, (counts.get(k) ?? 0) + 1);
  const first = await spawnSvc(tmp.dir);
  children.push(first.child);
  const app = await startWorkflowApp(
    { QSTASH_URL: first.url, QSTASH_TOKEN: TOKEN, QSTASH_CURRENT_SIGNING_KEY: KEYS.current, QSTASH_NEXT_SIGNING_KEY: KEYS.next },
    {
      '/crash': [
        async (ctx) => {
          await ctx.run('before', () => bump('before'));
          await ctx.sleep('nap', 2);
          await ctx.run('after', () => bump('after'));
          return 'survived';
        },
        {},
      ],
    },
  );
  try {
    const { workflowRunId } = await new WorkflowClient({ baseUrl: first.url, token: TOKEN }).trigger({ url: `${app.url}/crash`, body: {} });
    await waitFor('first step executed and the sleep published', () => counts.get('before') === 1 && app.requests.length >= 2);
    first.child.kill('SIGKILL');
    await new Promise((r) => first.child.once('exit', r));
    assert.equal(first.child.signalCode, 'SIGKILL');
    assert.equal(counts.get('after'), undefined, 'the crash happened before the second step');

    const second = await spawnSvc(tmp.dir);
    children.push(second.child);
    app.env.QSTASH_URL = second.url;
    const wf = new WorkflowClient({ baseUrl: second.url, token: TOKEN });
    const log = await waitFor(
      'run completed after restart',
      async () => {
        const { runs } = (await wf.logs({ filter: { workflowRunId } } as never)) as unknown as { runs: Json[] };
        return runs.find((r) => r.workflowState === 'RUN_SUCCESS');
      },
      20_000,
    );
    assert.equal(JSON.parse(log.workflowRunResponse), 'survived');
    assert.equal(counts.get('before'), 1);
    assert.equal(counts.get('after'), 1);
    second.child.kill('SIGTERM');
    await new Promise((r) => second.child.once('exit', r));
  } finally {
    await app.close();
    tmp.cleanup();
  }
});

/**
 * A workflow run survives a crash of svc (issue 5 tests; DESIGN.md durability rules): svc runs as
 * a child process (`node bin/svc.js serve`, SVC_AREAS=queue), is killed with SIGKILL while a run
 * sleeps between two steps, restarts on the same data dir (and a new port, which the workflow
 * endpoint follows), and the run then completes: each step ran once, the state is RUN_SUCCESS.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Client as WorkflowClient } from '@upstash/workflow';
import { tempDir } from '../helpers/env.js';
import { waitFor } from './helpers.js';
import { startWorkflowApp } from './workflow-helpers.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const TOKEN = Buffer.from(JSON.stringify({ UserID: 'wf-restart', Password: 'secret-password' })).toString('base64');
const KEYS = { current: 'sig_wfRestartCurrentKey000001', next: 'sig_wfRestartNextKey0000000001' };

async function spawnSvc(dataDir: string): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, [path.join(ROOT, 'bin/svc.js'), 'serve'], {
    cwd: ROOT,
    env: {
      ...process.env,
      SVC_AREAS: 'queue',
      SVC_QUEUE_PORT: '0',
      SVC_HOST: '127.0.0.1',
      SVC_DATA_DIR: dataDir,
      SVC_LOG_LEVEL: 'warn',
      SVC_QUEUE_TOKEN: TOKEN,
      SVC_QUEUE_CURRENT_SIGNING_KEY: KEYS.current,
      SVC_QUEUE_NEXT_SIGNING_KEY: KEYS.next,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const url = await waitFor('svc banner', () => /^queue\s+(http:\/\/\S+)/m.exec(out)?.[1], 30_000).catch((err) => {
    child.kill('SIGKILL');
    throw new Error(`${(err as Error).message}\n${out}`);
  });
  return { child, url };
}

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

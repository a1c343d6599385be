/**
 * Per-run limits of workflow runs (the hosted service's hard limits, here lowered through
 * `SVC_QUEUE_WORKFLOW_MAX_STEPS` / `SVC_QUEUE_WORKFLOW_MAX_CONTEXT_BYTES`): the step past a limit is
 * refused with 400 `runLimit` (the SDK reads 400 as "the run ended" and stops), the run ends
 * RUN_FAILED with the limit as its failed step's error, the steps before it are kept and no later
 * step is accepted. A real `@upstash/workflow` endpoint and the SDK's Client; raw HTTP for the
 * refused publish. Also: the step-list size computed without building the list is exact.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Client as WorkflowClient } from '@upstash/workflow';
import { rawSteps, rawStepsBytes } from '../../src/queue/workflows/run-engine.js';
import type { WorkflowRun } from '../../src/queue/store/workflow-types.js';
import { startQueue, waitFor } from './helpers.js';
import { qstashEnv, startWorkflowApp, type WorkflowApp } from './workflow-helpers.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

describe('workflow run limits', () => {
  let q: Awaited<ReturnType<typeof startQueue>>;
  let app: WorkflowApp;
  let wf: WorkflowClient;
  const executed = new Map<string, number>();

  before(async () => {
    q = await startQueue({ SVC_QUEUE_WORKFLOW_MAX_STEPS: '5', SVC_QUEUE_WORKFLOW_MAX_CONTEXT_BYTES: '20000' });
    app = await startWorkflowApp(qstashEnv(q), {
      // 10 steps: the 6th is past the step limit
      '/many': [
        async (ctx) => {
          for (let i = 1; i <= 10; i++) await ctx.run(`s${i}`, () => (executed.set(`${ctx.workflowRunId}:s${i}`, 1), i));
          return 'done';
        },
      ],
      // 4 KB results: the 5th step takes the context (initial body + results) past 20000 bytes
      '/big': [
        async (ctx) => {
          for (let i = 1; i <= 4; i++) await ctx.run(`b${i}`, () => 'x'.repeat(4000 + i));
          await ctx.run('b5', () => 'y'.repeat(4000));
          return 'done';
        },
      ],
      '/short': [async (ctx) => ctx.run('only', () => 'ok')],
    });
    wf = new WorkflowClient({ baseUrl: q.url, token: q.token });
  });
  after(async () => {
    await app?.close();
    await q?.close();
  });

  const runLog = async (workflowRunId: string, state: string): Promise<Json | undefined> => {
    const { runs } = (await wf.logs({ workflowRunId } as never)) as unknown as { runs: Json[] };
    const r = runs.find((x) => x.workflowRunId === workflowRunId);
    return r?.workflowState === state ? r : undefined;
  };

  test('the step past SVC_QUEUE_WORKFLOW_MAX_STEPS fails the run; earlier steps are kept; later steps 400', async () => {
    const { workflowRunId } = await wf.trigger({ url: `${app.url}/many`, body: { go: 1 } });
    const log = await waitFor(`run ${workflowRunId} failed`, () => runLog(workflowRunId, 'RUN_FAILED'), 60_000);
    // the SDK ran steps 1..6 (the 6th's result is what was refused) and nothing after
    assert.deepEqual([1, 2, 3, 4, 5, 6, 7].map((i) => executed.has(`${workflowRunId}:s${i}`)), [true, true, true, true, true, true, false]);
    const names = (log.steps as Json[]).flatMap((g) => (g.steps ?? []).map((s: Json) => s.stepName)).filter(Boolean);
    assert.deepEqual(names.slice(0, 6), ['init', 's1', 's2', 's3', 's4', 's5']);
    assert.match(JSON.stringify(log), /more than 5 steps \(SVC_QUEUE_WORKFLOW_MAX_STEPS\)/);
    // a step for the failed run is refused (400: the SDK reads it as "the run ended")
    const late = await q.api('/v2/publish/' + `${app.url}/many`, {
      method: 'POST',
      headers: { 'upstash-workflow-runid': workflowRunId, 'upstash-workflow-init': 'false', 'content-type': 'application/json' },
      body: '{}',
    });
    assert.equal(late.status, 400);
    // a short run still completes
    const ok = await wf.trigger({ url: `${app.url}/short` });
    await waitFor('short run done', () => runLog(ok.workflowRunId, 'RUN_SUCCESS'), 60_000);
  });

  test('the step past SVC_QUEUE_WORKFLOW_MAX_CONTEXT_BYTES fails the run with a clear error', async () => {
    const { workflowRunId } = await wf.trigger({ url: `${app.url}/big`, body: { go: 1 } });
    const log = await waitFor(`run ${workflowRunId} failed`, () => runLog(workflowRunId, 'RUN_FAILED'), 60_000);
    assert.match(JSON.stringify(log), /context \(initial body and step results\) exceeds 20000 bytes/);
  });

  test('the step-list size is computed exactly without building the list', () => {
    const run = { initialBody: Buffer.from('{"a":"é"}') } as WorkflowRun;
    const steps = [
      { messageId: 'msg_1', body: Buffer.alloc(0), callType: 'step' },
      { messageId: 'msg_"2', body: Buffer.from('xy'), callType: 'toCallback' },
      { messageId: 'msg_3', body: Buffer.alloc(1001, 7), callType: 'step' },
    ] as never;
    for (const list of [[], steps]) {
      assert.equal(rawStepsBytes(run, list, 'msg_0'), Buffer.byteLength(JSON.stringify(rawSteps(run, list, 'msg_0'))));
    }
  });
});

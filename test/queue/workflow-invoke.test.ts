/**
 * Workflow cases of the SDK's own CI app, end to end through `@upstash/workflow` (`serve` behind a
 * real endpoint, `Client`) against svc:
 *
 * - `invoke`: the invoked child's result reaches the parent with `isFailed: false, isCanceled:
 *   false` (the CI app compares both with `false`); a failed child comes back `isFailed: true`
 *   with no body;
 * - `invoke-parent-failure`: the parent fails while the child it invoked in a parallel group
 *   runs; its logs show the group with each branch's step name and type, the failed branch
 *   `STEP_FAILED`, and the child's result once the child ends (`STEP_SUCCESS`), not dropped;
 * - `qstash-trigger-fetch`: `/v2/trigger` of an endpoint that answers as a workflow endpoint
 *   (`Upstash-Workflow-Sdk-Version: 1`) without triggering the run, as an SDK before 1.0 does,
 *   fails the run with the error the CI app expects;
 * - `call`: a `context.call` with `retries: 1` to a failing endpoint calls the workflow back after
 *   each attempt (the SDK skips the first, `retried !== maxRetries`).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Client as WorkflowClient, WorkflowNonRetryableError, type WorkflowContext } from '@upstash/workflow';
import { createWorkflow, serveMany } from '@upstash/workflow/cloudflare';
import { startQueue, startSink, waitFor, type Sink } from './helpers.js';
import { qstashEnv, startWorkflowApp, waitForRunState, workflowRunLog, type WorkflowApp } from './workflow-helpers.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

describe('workflow invoke, trigger and call cases of the SDK\'s CI app', () => {
  let q: Awaited<ReturnType<typeof startQueue>>;
  let app: WorkflowApp;
  let sink: Sink;
  let wf: WorkflowClient;

  const childOk = createWorkflow(async (ctx: WorkflowContext<string>) => {
    await ctx.run('child step', () => ctx.requestPayload);
    return 'invoke-result';
  });
  const childFails = createWorkflow(async () => {
    throw new Error('what');
  });
  const parent = createWorkflow(async (ctx) => {
    const ok = await ctx.invoke('invoking other', { workflow: childOk, body: 'invoke-payload' });
    const bad = await ctx.invoke('invoke failing', { workflow: childFails, body: 'invoke-payload', retries: 0 });
    return { ok, bad: { body: bad.body ?? 'absent', isFailed: bad.isFailed, isCanceled: bad.isCanceled } };
  });
  // invoke-parent-failure: the child sleeps while its parent's other branch fails for good
  const slowChild = createWorkflow(async (ctx) => {
    await ctx.sleep('sleep 3s', 3);
    await ctx.run('child step', () => 'child done');
  });
  const failingParent = createWorkflow(async (ctx) => {
    await Promise.all([
      ctx.invoke('invoke child', { workflow: slowChild, body: undefined }),
      ctx.run('failing step', async () => {
        throw new WorkflowNonRetryableError('step failed');
      }),
    ]);
  });
  const many = serveMany({ parent, childOk, childFails, failingParent, slowChild });

  before(async () => {
    q = await startQueue();
    sink = await startSink((r) => (r.url.startsWith('/third-party') ? { status: 401, headers: { 'failing-header': 'failing-header-value' }, body: 'failing request' } : undefined));
    app = await startWorkflowApp(
      qstashEnv(q),
      {
        ...Object.fromEntries(['parent', 'childOk', 'childFails', 'failingParent', 'slowChild'].map((id) => [`/many/${id}`, many])),
        '/call-retry': [
          async (ctx) => {
            const r = await ctx.call('patch call', { url: `${sink.url}/third-party`, method: 'PATCH', retries: 1, retryDelay: '100' });
            return { status: r.status, body: r.body, header: r.header['Failing-Header'] ?? r.header['failing-header'] };
          },
          {},
        ],
      },
      // qstash-trigger-fetch's "post" endpoint: answers like a workflow endpoint, triggers nothing
      (path) => (path === '/pre-v1' ? { status: 200, headers: { 'Upstash-Workflow-Sdk-Version': '1' }, body: '{"third":"endpoint"}' } : undefined),
    );
    wf = new WorkflowClient({ baseUrl: q.url, token: q.token });
  });
  after(async () => {
    await app.close();
    await sink.close();
    await q.close();
  });

  const runLog = (id: string) => workflowRunLog(wf, id);
  const waitRun = (id: string, state: string, ms = 90_000) => waitForRunState(wf, id, state, ms);

  test('invoke: the child\'s result carries isFailed: false, isCanceled: false; a failed child comes back isFailed without a body', async () => {
    const { workflowRunId } = await wf.trigger({ url: `${app.url}/many/parent`, body: 1 });
    const log = await waitRun(workflowRunId, 'RUN_SUCCESS');
    const result = JSON.parse(log.workflowRunResponse) as Json;
    assert.deepEqual(result.ok, { body: 'invoke-result', isFailed: false, isCanceled: false });
    assert.deepEqual(result.bad, { body: 'absent', isFailed: true, isCanceled: false });
  });

  test('invoke-parent-failure: the logs show the parallel group with both branches, and the child\'s result once it ends', async () => {
    const { workflowRunId } = await wf.trigger({ url: `${app.url}/many/failingParent`, body: undefined });
    await waitRun(workflowRunId, 'RUN_FAILED');
    const log = await waitFor(
      'the invoked child\'s branch reaches STEP_SUCCESS in the failed parent\'s logs',
      async () => {
        const r = await runLog(workflowRunId);
        const group = r?.steps?.[1];
        if (group?.type !== 'parallel') return undefined;
        const child = (group.steps as Json[]).find((s) => s.stepName === 'invoke child');
        return child?.state === 'STEP_SUCCESS' ? r : undefined;
      },
      90_000,
    );
    const group = log.steps[1] as Json;
    assert.equal(group.steps.length, 2);
    const child = (group.steps as Json[]).find((s) => s.stepName === 'invoke child')!;
    const failing = (group.steps as Json[]).find((s) => s.stepName === 'failing step');
    assert.equal(child.stepType, 'Invoke');
    assert.deepEqual(JSON.parse(child.out), { isFailed: false, isCanceled: false }, 'the child\'s result (it returned nothing)');
    assert.equal(failing?.stepType, 'Run');
    assert.equal(failing?.state, 'STEP_FAILED');
    assert.equal(log.workflowState, 'RUN_FAILED');
  });

  test('/v2/trigger of an endpoint on a pre-1.0 SDK fails the run with the error the SDK\'s tests expect', async () => {
    const res = await q.api(`/v2/trigger/${app.url}/pre-v1`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'Upstash-Retries': '0' },
      body: JSON.stringify({ data: 'test-data' }),
    });
    assert.equal(res.status, 200);
    const { workflowRunId, workflowCreatedAt } = (await res.json()) as Json;
    assert.equal(typeof workflowCreatedAt, 'number');
    const run = await waitRun(workflowRunId, 'RUN_FAILED', 30_000);
    assert.equal(run.steps.length, 2);
    assert.equal(run.steps[0].steps.length, 1);
    assert.equal(run.steps[0].steps[0].state, 'STEP_SUCCESS');
    assert.equal(run.steps[1].type, 'next');
    assert.equal(run.steps[1].steps.length, 1);
    assert.equal(run.steps[1].steps[0].errors[0].error, 'trigger rest api is only usable with sdk versions after v1.0.0 major version');
  });

  test('context.call with retries: 1 to a failing endpoint: a callback after each attempt, the result after the last', async () => {
    const { workflowRunId } = await wf.trigger({ url: `${app.url}/call-retry`, body: {}, retries: 0 });
    const log = await waitRun(workflowRunId, 'RUN_SUCCESS');
    assert.deepEqual(JSON.parse(log.workflowRunResponse), { status: 401, body: 'failing request', header: ['failing-header-value'] });
    assert.equal(sink.at('/third-party').length, 2, 'the call was attempted twice');
    // trigger delivery, callback of attempt 0 (ignored by the SDK), callback of attempt 1, result
    // step (recorded by the endpoint once its answer is sent, so possibly after the run ended)
    const workflowCalls = () => app.requests.filter((r) => r.headers['upstash-workflow-runid'] === workflowRunId && !r.headers['upstash-workflow-is-failure']);
    await waitFor('the last delivery recorded', () => workflowCalls().length >= 4, 30_000);
    assert.equal(workflowCalls().length, 4);
    const callbacks = workflowCalls().filter((r) => r.headers['upstash-workflow-callback']);
    assert.equal(callbacks.length, 2, 'one callback per attempt (retried 0, then 1 = maxRetries)');
  });
});

/**
 * Workflow runs as the SDK expects them in harder cases, end to end through `@upstash/workflow`
 * (`serve` behind a real HTTP endpoint, `Client`) against svc: parallel branches of many runs at
 * once, `context.call` callbacks with the run's headers and their failure, the SDK's re-trigger
 * of a run, a trigger to an endpoint that is not a workflow.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Client as WorkflowClient } from '@upstash/workflow';
import { startQueue, startSink, waitFor, type Sink } from './helpers.js';
import { startWorkflowApp, type WorkflowApp } from './workflow-helpers.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

describe('workflow compatibility (SDK serve + Client against svc)', () => {
  let q: Awaited<ReturnType<typeof startQueue>>;
  let app: WorkflowApp;
  let wf: WorkflowClient;
  let sink: Sink;
  /** run ids whose context.call callback delivery the endpoint refuses */
  const refuseCallback = new Set<string>();
  const seen: Json[] = [];

  before(async () => {
    q = await startQueue();
    sink = await startSink();
    const keys = q.keys();
    app = await startWorkflowApp(
      { QSTASH_URL: q.url, QSTASH_TOKEN: q.token, QSTASH_CURRENT_SIGNING_KEY: keys.currentSigningKey, QSTASH_NEXT_SIGNING_KEY: keys.nextSigningKey },
      {
        '/parallel': [
          async (ctx) => {
            const { n } = ctx.requestPayload as { n: number };
            const outs = await Promise.all(Array.from({ length: n }, (_, i) => ctx.run(`p${i}`, () => i * 10)));
            const r = await ctx.call('after', { url: `${sink.url}/par?run=${ctx.workflowRunId}`, method: 'POST', body: JSON.stringify(outs) });
            return { status: r.status, outs };
          },
          {},
        ],
        '/steps': [
          async (ctx) => {
            const { n } = ctx.requestPayload as { n: number };
            const a = await ctx.run('a', () => n + 1);
            const b = await ctx.run('b', () => a * 2);
            return { b, tenant: ctx.headers.get('x-tenant') };
          },
          {},
        ],
        '/caller': [
          async (ctx) => {
            const r = await ctx.call('ext', { url: `${sink.url}/ext?run=${ctx.workflowRunId}`, method: 'POST', body: '{}' });
            await ctx.run('after-call', () => {
              seen.push({ runId: ctx.workflowRunId, status: r.status, tenant: ctx.headers.get('x-tenant') });
            });
          },
          {},
        ],
      },
      (path, headers) => {
        const run = String(headers['upstash-workflow-runid'] ?? '');
        if (path === '/caller' && headers['upstash-workflow-callback'] && refuseCallback.has(run)) return { status: 500, body: 'callback refused' };
        if (path === '/plain') return { status: 200, body: 'hello, I am not a workflow' };
        return undefined;
      },
    );
    wf = new WorkflowClient({ baseUrl: q.url, token: q.token });
  });
  after(async () => {
    await app.close();
    await sink.close();
    await q.close();
  });

  const runLog = async (workflowRunId: string) => {
    const { runs } = (await wf.logs({ filter: { workflowRunId } } as never)) as unknown as { runs: Json[] };
    return runs.find((x) => x.workflowRunId === workflowRunId);
  };
  const waitRun = (id: string, state: string, ms = 60_000) =>
    waitFor(`run ${id} in ${state}`, async () => {
      const r = await runLog(id);
      return r?.workflowState === state ? r : undefined;
    }, ms);

  test('parallel branches of 10 + 10 runs started at once: the step after the group runs once per run', async () => {
    const started = await Promise.all(
      [...Array.from({ length: 10 }, () => 2), ...Array.from({ length: 10 }, () => 5)].map(async (n) => ({
        n,
        ...(await wf.trigger({ url: `${app.url}/parallel`, body: { n }, retries: 2, retryDelay: '200' })),
      })),
    );
    for (const { workflowRunId, n } of started) {
      const log = await waitRun(workflowRunId, 'RUN_SUCCESS', 120_000);
      assert.deepEqual(JSON.parse(log.workflowRunResponse), { status: 200, outs: Array.from({ length: n }, (_, i) => i * 10) });
    }
    for (const { workflowRunId } of started) {
      assert.equal(sink.at(`/par?run=${workflowRunId}`).length, 1, `one context.call for ${workflowRunId}`);
    }
  });

  test('context.call: the callback delivery carries the run\'s forwarded headers; a failing callback fails the run into the DLQ', async () => {
    const { workflowRunId } = await wf.trigger({ url: `${app.url}/caller`, body: {}, headers: { 'x-tenant': 'acme' } });
    await waitRun(workflowRunId, 'RUN_SUCCESS');
    const callback = app.requests.find((r) => r.headers['upstash-workflow-runid'] === workflowRunId && r.headers['upstash-workflow-callback']);
    assert.ok(callback, 'the callback was delivered to the workflow');
    assert.equal(callback.headers['x-tenant'], 'acme', 'the trigger\'s forwarded header is on the callback delivery');
    assert.equal(seen.find((x) => x.runId === workflowRunId)?.tenant, 'acme');

    const failing = 'wfr_callback-refused';
    refuseCallback.add(failing);
    await wf.trigger({ url: `${app.url}/caller`, body: {}, workflowRunId: 'callback-refused', retries: 1, retryDelay: '50' });
    const log = await waitRun(failing, 'RUN_FAILED');
    assert.ok(log.dlqId, 'the failed run names its DLQ entry');
    const refused = app.requests.filter((r) => r.headers['upstash-workflow-runid'] === failing && r.headers['upstash-workflow-callback']);
    assert.equal(refused.length, 2, 'the run\'s retries (1) apply to the callback');
    const { messages } = (await wf.dlq.list({ filter: { workflowRunId: failing } })) as unknown as { messages: Json[] };
    assert.equal(messages.length, 1);
    assert.equal(messages[0].dlqId, log.dlqId);
    assert.equal(messages[0].workflowRunId, failing);
    assert.equal(messages[0].responseStatus, 500);
    assert.equal(sink.at(`/ext?run=${failing}`).length, 1, 'the third party was called once');
  });

  test('a run started over REST (/v2/trigger): the SDK re-triggers it (Trigger-By-Sdk) and the re-trigger is accepted, not deduplicated', async () => {
    const res = await q.api(`/v2/trigger/${app.url}/steps`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'Upstash-Workflow-RunId': 'wfr_rest-1', 'Upstash-Forward-X-Tenant': 'acme' },
      body: JSON.stringify({ n: 4 }),
    });
    assert.equal(res.status, 200);
    const started = (await res.json()) as Json;
    assert.equal(started.workflowRunId, 'wfr_rest-1');
    assert.equal(typeof started.workflowCreatedAt, 'number');
    const log = await waitRun('wfr_rest-1', 'RUN_SUCCESS');
    assert.deepEqual(JSON.parse(log.workflowRunResponse), { b: 10, tenant: 'acme' });
    const first = app.requests.find((r) => r.headers['upstash-workflow-runid'] === 'wfr_rest-1');
    assert.equal(first?.headers['upstash-workflow-unknown-sdk'], 'true', 'the first delivery asks the SDK to trigger the run');
    assert.equal(app.requests.filter((r) => r.headers['upstash-workflow-runid'] === 'wfr_rest-1' && r.headers['upstash-workflow-unknown-sdk']).length, 1);
    const last = app.requests.filter((r) => r.headers['upstash-workflow-runid'] === 'wfr_rest-1').at(-1)!;
    assert.equal(last.headers['x-tenant'], 'acme', 'the forwarded header stays with the run');
    assert.equal(last.headers['svc-retried'], '0');

    // the same over /v2/batch/trigger, two runs at once
    const batch = await q.api('/v2/batch/trigger', {
      method: 'POST',
      body: JSON.stringify([
        { destination: `${app.url}/steps`, body: '{"n":1}', headers: { 'content-type': 'application/json' } },
        { destination: `${app.url}/steps`, body: '{"n":2}', headers: { 'content-type': 'application/json', 'upstash-workflow-runid': 'wfr_rest-2' } },
      ]),
    });
    assert.equal(batch.status, 201);
    const runs = (await batch.json()) as Json[];
    assert.equal(runs.length, 2);
    assert.match(runs[0].workflowRunId, /^wfr_/);
    assert.equal(runs[1].workflowRunId, 'wfr_rest-2');
    assert.equal(JSON.parse((await waitRun(runs[0].workflowRunId, 'RUN_SUCCESS')).workflowRunResponse).b, 4);
    assert.equal(JSON.parse((await waitRun('wfr_rest-2', 'RUN_SUCCESS')).workflowRunResponse).b, 6);

    // raw form: a trigger, then the SDK's re-trigger of the same run id
    const trigger = async (extra: Record<string, string>) => {
      const r = await q.api('/v2/batch', {
        method: 'POST',
        body: JSON.stringify([
          {
            destination: `${app.url}/steps`,
            body: '{"n":7}',
            headers: { 'content-type': 'application/json', 'upstash-workflow-init': 'true', 'upstash-workflow-runid': 'wfr_rest-3', 'upstash-workflow-url': `${app.url}/steps`, ...extra },
          },
        ]),
      });
      return ((await r.json()) as Json[])[0];
    };
    assert.equal((await trigger({})).deduplicated, undefined);
    assert.equal((await trigger({})).deduplicated, true, 'a second plain trigger of a running run is deduplicated');
    assert.equal((await trigger({ 'upstash-workflow-trigger-by-sdk': 'true' })).deduplicated, undefined, 'the SDK re-trigger is accepted');
    assert.equal((await trigger({ 'upstash-workflow-trigger-by-sdk': 'true' })).deduplicated, true, 'a repeated re-trigger is deduplicated');
    await waitRun('wfr_rest-3', 'RUN_SUCCESS');
    assert.equal((await q.api('/v2/trigger/not-a-url', { method: 'POST' })).status, 400);
  });

  test('a trigger to an endpoint that is not a workflow ends the run RUN_FAILED with a non-workflow-destination step error', async () => {
    const { workflowRunId } = await wf.trigger({ url: `${app.url}/plain`, body: { x: 1 } });
    const log = await waitRun(workflowRunId, 'RUN_FAILED');
    const next = (log.steps as Json[]).find((g) => g.type === 'next')?.steps[0];
    assert.equal(next?.state, 'STEP_FAILED');
    assert.match(next.errors[0].error, /detected a non-workflow destination for trigger\/invoke/);
    assert.equal(next.errors[0].status, 200);
    assert.equal(next.errors[0].body, 'hello, I am not a workflow');
    // the same for a run started over REST
    const res = await q.api(`/v2/trigger/${app.url}/plain`, { method: 'POST', body: 'x' });
    const { workflowRunId: restRun } = (await res.json()) as Json;
    await waitRun(restRun, 'RUN_FAILED');
  });
});

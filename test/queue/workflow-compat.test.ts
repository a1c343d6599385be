/**
 * Workflow runs as the SDK expects them in harder cases, end to end through `@upstash/workflow`
 * (`serve` behind a real HTTP endpoint, `Client`) against svc: parallel branches of many runs at
 * once, `context.call` callbacks with the run's headers and their failure, the SDK's re-trigger
 * of a run, a trigger to an endpoint that is not a workflow.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Client as WorkflowClient, WorkflowNonRetryableError, type serve } from '@upstash/workflow';
import { createWorkflow, serveMany } from '@upstash/workflow/cloudflare';
import { startQueue, startSink, waitFor, type Sink } from './helpers.js';
import { startWorkflowApp, waitForRunState, type WorkflowApp } from './workflow-helpers.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

describe('workflow compatibility (SDK serve + Client against svc)', () => {
  let q: Awaited<ReturnType<typeof startQueue>>;
  let app: WorkflowApp;
  let wf: WorkflowClient;
  let sink: Sink;
  /** run ids whose context.call callback delivery the endpoint refuses */
  const refuseCallback = new Set<string>();
  const seen: Json[] = [];
  /** webhook URL per run (context.createWebhook) */
  const hooks = new Map<string, string>();

  const child = createWorkflow(async (ctx) => {
    const { n } = ctx.requestPayload as { n: number };
    const doubled = await ctx.run('double', () => n * 2);
    return { doubled };
  });
  const badChild = createWorkflow(async (ctx) => {
    await ctx.run('boom', () => {
      throw new WorkflowNonRetryableError('child broke');
    });
  });
  const parent = createWorkflow(async (ctx) => {
    const { n } = ctx.requestPayload as { n: number };
    const ok = await ctx.invoke('call-child', { workflow: child, body: { n } });
    const bad = await ctx.invoke('call-bad', { workflow: badChild, body: {} });
    return { ok, bad: { isFailed: bad.isFailed, isCanceled: bad.isCanceled, message: (bad.body as { message?: string } | undefined)?.message } };
  });
  const many = serveMany({ parent, child, 'bad-child': badChild });
  const hookRoute: Parameters<typeof serve> = [
    async (ctx) => {
      const webhook = await ctx.createWebhook('make-hook');
      await ctx.run('publish-url', () => {
        hooks.set(ctx.workflowRunId, webhook.webhookUrl);
      });
      const r = await ctx.waitForWebhook('wait-hook', webhook, '20s');
      return await ctx.run('read', async () =>
        r.request ? { method: r.request.method, body: await r.request.text(), sig: r.request.headers.get('x-sig') } : { timeout: r.timeout },
      );
    },
    {},
  ];

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
        '/many/parent': many,
        '/many/child': many,
        '/many/bad-child': many,
        '/waiter': [
          async (ctx) => {
            const { eventId } = ctx.requestPayload as { eventId: string };
            const r = await ctx.waitForEvent('wait', eventId, { timeout: '5s' });
            return { eventData: r.eventData, timeout: r.timeout };
          },
          {},
        ],
        '/hook': hookRoute,
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

  const waitRun = (id: string, state: string, ms = 60_000) => waitForRunState(wf, id, state, ms);

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

    // resume re-delivers the call's result (the call is not made again); restart runs it anew
    refuseCallback.clear();
    const resumed = (await wf.dlq.resume(log.dlqId)) as unknown as Json;
    const resumedRun = resumed.workflowRuns ? resumed.workflowRuns[0] : resumed;
    assert.equal(resumedRun.workflowRunId, failing);
    await waitRun(failing, 'RUN_SUCCESS');
    assert.equal(sink.at(`/ext?run=${failing}`).length, 1, 'resume does not call the third party again');
    assert.equal(seen.filter((x) => x.runId === failing).length, 1);
    refuseCallback.add('wfr_callback-refused-2');
    await wf.trigger({ url: `${app.url}/caller`, body: {}, workflowRunId: 'callback-refused-2', retries: 0, headers: { 'x-tenant': 'beta' } });
    const second = await waitRun('wfr_callback-refused-2', 'RUN_FAILED');
    refuseCallback.clear();
    const restarted = (await wf.dlq.restart(second.dlqId)) as unknown as Json;
    const restartedRun = restarted.workflowRuns ? restarted.workflowRuns[0] : restarted;
    await waitRun(restartedRun.workflowRunId, 'RUN_SUCCESS');
    assert.equal(sink.at(`/ext?run=${restartedRun.workflowRunId}`).length, 1, 'restart makes the call again');
    assert.equal(seen.find((x) => x.runId === restartedRun.workflowRunId)?.tenant, 'beta', 'with the trigger\'s headers');
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

  test('context.invoke: the child\'s result returns to the parent with isFailed/isCanceled false; a failing child comes back as isFailed', async () => {
    const { workflowRunId } = await wf.trigger({ url: `${app.url}/many/parent`, body: { n: 21 } });
    const log = await waitRun(workflowRunId, 'RUN_SUCCESS');
    const result = JSON.parse(log.workflowRunResponse);
    assert.deepEqual(result.ok.body, { doubled: 42 });
    assert.equal(result.ok.isFailed, false, 'isFailed: false, as the SDK\'s callers compare it');
    assert.equal(result.ok.isCanceled, false);
    assert.deepEqual(result.bad, { isFailed: true, isCanceled: false }, 'a failed child comes back without a body');
    const invoke = (log.steps as Json[]).flatMap((g) => g.steps as Json[]).find((st) => st.stepName === 'call-child');
    assert.equal(invoke?.stepType, 'Invoke');
  });

  test('notify before wait: a notify within the look-back window reaches the wait registered after it', async () => {
    assert.deepEqual(await wf.notify({ eventId: 'early-1', eventData: { paid: 7 }, workflowRunId: 'wfr_early-1' }), []);
    assert.deepEqual(await wf.notify({ eventId: 'early-2', eventData: 'any run' }), []);
    const one = await wf.trigger({ url: `${app.url}/waiter`, body: { eventId: 'early-1' }, workflowRunId: 'early-1' });
    const two = await wf.trigger({ url: `${app.url}/waiter`, body: { eventId: 'early-2' } });
    assert.deepEqual(JSON.parse((await waitRun(one.workflowRunId, 'RUN_SUCCESS')).workflowRunResponse), { eventData: { paid: 7 }, timeout: false });
    assert.deepEqual(JSON.parse((await waitRun(two.workflowRunId, 'RUN_SUCCESS')).workflowRunResponse), { eventData: 'any run', timeout: false });
    // a kept notify is used once: the next wait on the event times out
    const three = await wf.trigger({ url: `${app.url}/waiter`, body: { eventId: 'early-2' } });
    assert.deepEqual(JSON.parse((await waitRun(three.workflowRunId, 'RUN_SUCCESS')).workflowRunResponse), { timeout: true });
  });

  test('webhooks: createWebhook gives a URL on svc; a call to it (before or after the wait) resumes waitForWebhook with the request', async () => {
    const { workflowRunId } = await wf.trigger({ url: `${app.url}/hook`, body: {} });
    const url = await waitFor('webhook URL', () => hooks.get(workflowRunId));
    assert.ok(url.startsWith(`${q.url}/v2/workflows/hooks/`), url);
    assert.ok(url.includes(`/${workflowRunId}/`));
    // third parties call it without the token; a wrong user id or run is 404
    assert.equal((await fetch(url.replace('/hooks/', '/hooks/x').replace(/\/[^/]+$/, '/evt_x'), { method: 'POST' })).status, 404);
    const res = await fetch(`${url}?src=test`, { method: 'POST', headers: { 'x-sig': 'abc', 'content-type': 'text/plain' }, body: 'payload!' });
    assert.equal(res.status, 200);
    const log = await waitRun(workflowRunId, 'RUN_SUCCESS');
    assert.deepEqual(JSON.parse(log.workflowRunResponse), { method: 'POST', body: 'payload!', sig: 'abc' });
  });

  test('run-level retention: ended runs, their steps and waiters are pruned after SVC_QUEUE_WORKFLOW_RETENTION_MS; running runs stay', async () => {
    const q2 = await startQueue({ SVC_QUEUE_WORKFLOW_RETENTION_MS: '1500' });
    const keys = q2.keys();
    const app2 = await startWorkflowApp(
      { QSTASH_URL: q2.url, QSTASH_TOKEN: q2.token, QSTASH_CURRENT_SIGNING_KEY: keys.currentSigningKey, QSTASH_NEXT_SIGNING_KEY: keys.nextSigningKey },
      {
        '/short': [async (ctx) => ctx.run('only', () => 'done'), {}],
        '/long': [async (ctx) => (await ctx.waitForEvent('wait', 'never-sent', { timeout: '60s' })).timeout, {}],
        '/broken': [
          async (ctx) => {
            await ctx.run('boom', () => {
              throw new WorkflowNonRetryableError('broken for good');
            });
          },
          {},
        ],
      },
    );
    try {
      const wf2 = new WorkflowClient({ baseUrl: q2.url, token: q2.token });
      const logOf = async (id: string) => ((await wf2.logs({ filter: { workflowRunId: id } } as never)) as unknown as { runs: Json[] }).runs[0];
      const short = await wf2.trigger({ url: `${app2.url}/short`, body: {} });
      const long = await wf2.trigger({ url: `${app2.url}/long`, body: {} });
      const broken = await wf2.trigger({ url: `${app2.url}/broken`, body: {} });
      const entry = await waitFor('failed run in the DLQ', async () => ((await wf2.dlq.list({ filter: { workflowRunId: broken.workflowRunId } })) as unknown as { messages: Json[] }).messages[0], 30_000);
      await waitFor('short run done', async () => (await logOf(short.workflowRunId))?.workflowState === 'RUN_SUCCESS', 30_000);
      await waitFor('waiter registered', async () => ((await wf2.getWaiters({ eventId: 'never-sent' })) as unknown[]).length === 1, 30_000);
      await waitFor('ended run pruned', async () => (await logOf(short.workflowRunId)) === undefined, 30_000);
      assert.equal((await logOf(long.workflowRunId))?.workflowState, 'RUN_STARTED', 'a running run is kept');
      assert.equal((await logOf(broken.workflowRunId))?.workflowState, 'RUN_FAILED', 'a failed run is kept while its DLQ entry exists');
      await wf2.dlq.delete(entry.dlqId);
      await waitFor('failed run pruned once its DLQ entry is gone', async () => (await logOf(broken.workflowRunId)) === undefined, 30_000);
      assert.equal(((await wf2.getWaiters({ eventId: 'never-sent' })) as unknown[]).length, 1, 'its waiter too');
      // the ended run's steps went with it: the lazy-fetch endpoint knows nothing of it
      assert.equal((await q2.api(`/v2/workflows/runs/${short.workflowRunId}`)).status, 404);
      assert.equal(((await wf2.cancel({ ids: long.workflowRunId } as never)) as unknown as Json).cancelled, 1);
      await waitFor('cancelled run pruned with its waiter', async () => ((await wf2.getWaiters({ eventId: 'never-sent' })) as unknown[]).length === 0, 30_000);
    } finally {
      await app2.close();
      await q2.close();
    }
  });

  test('an opaque SVC_QUEUE_TOKEN stays valid and its SDK form (base64 {UserID, Password}) works too, webhooks included', async () => {
    const opaque = 'opaque-token-given-by-env';
    const q3 = await startQueue({ SVC_QUEUE_TOKEN: opaque });
    const sdkToken = Buffer.from(JSON.stringify({ UserID: 'svc', Password: opaque })).toString('base64');
    const keys = q3.keys();
    const app3 = await startWorkflowApp(
      { QSTASH_URL: q3.url, QSTASH_TOKEN: sdkToken, QSTASH_CURRENT_SIGNING_KEY: keys.currentSigningKey, QSTASH_NEXT_SIGNING_KEY: keys.nextSigningKey },
      { '/hook': hookRoute },
    );
    try {
      assert.equal(q3.token, opaque);
      assert.equal((await q3.api('/v2/dlq')).status, 200, 'the configured token');
      const asSdk = (path: string, init: RequestInit = {}) => fetch(q3.url + path, { ...init, headers: { authorization: `Bearer ${sdkToken}` } });
      assert.equal((await asSdk('/v2/dlq')).status, 200, 'its SDK form');
      assert.equal((await asSdk(`/v2/publish/${sink.url}/opaque`, { method: 'POST', body: 'x' })).status, 200, 'its SDK form on the publish path');
      assert.equal((await fetch(`${q3.url}/v2/dlq`, { headers: { authorization: 'Bearer other' } })).status, 401);
      const wf3 = new WorkflowClient({ baseUrl: q3.url, token: sdkToken });
      const { workflowRunId } = await wf3.trigger({ url: `${app3.url}/hook`, body: {} });
      const url = await waitFor('webhook URL', () => hooks.get(workflowRunId), 30_000);
      assert.ok(url.startsWith(`${q3.url}/v2/workflows/hooks/svc/${workflowRunId}/`), url);
      assert.equal((await fetch(url, { method: 'PUT', headers: { 'x-sig': 'xyz' }, body: 'via opaque' })).status, 200);
      const { runs } = (await wf3.logs({ filter: { workflowRunId } } as never)) as unknown as { runs: Json[] };
      assert.ok(runs.length === 1);
      const done = await waitFor('hook run done', async () => {
        const r = ((await wf3.logs({ filter: { workflowRunId } } as never)) as unknown as { runs: Json[] }).runs[0];
        return r?.workflowState === 'RUN_SUCCESS' ? r : undefined;
      }, 30_000);
      assert.deepEqual(JSON.parse(done.workflowRunResponse), { method: 'PUT', body: 'via opaque', sig: 'xyz' });
    } finally {
      await app3.close();
      await q3.close();
    }
  });
});

/**
 * Workflow runs end-to-end: a real `@upstash/workflow` endpoint (the SDK's `serve`)
 * driven by svc, the workflow SDK's `Client` (trigger, logs, dlq.list/resume/restart/delete,
 * cancel) and raw fetch for the spec's restart/resume/delete forms, override headers and errors.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Client as WorkflowClient } from '@upstash/workflow';
import { startQueue, startSink, waitFor, type Sink } from './helpers.js';
import { startWorkflowApp, type WorkflowApp } from './workflow-helpers.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

describe('workflow runs (SDK serve + Client against svc)', () => {
  let q: Awaited<ReturnType<typeof startQueue>>;
  let app: WorkflowApp;
  let wf: WorkflowClient;
  let sink: Sink;
  /** step executions per `<runId>:<step>` and per step name */
  const runs = new Map<string, number>();
  const count = (key: string) => runs.get(key) ?? 0;
  const bump = (...keys: string[]) => keys.forEach((k) => runs.set(k, count(k) + 1));
  let broken = true;
  const failures: Json[] = [];
  const waited: Json[] = [];
  let failureBroken = true;

  before(async () => {
    q = await startQueue();
    sink = await startSink((r) => {
      if (r.url.startsWith('/fail')) return { status: 500, body: 'plain failure' };
      if (r.url.startsWith('/ext')) return { status: 201, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ echo: r.body.toString() }) };
      return undefined;
    });
    const keys = q.keys();
    app = await startWorkflowApp(
      { QSTASH_URL: q.url, QSTASH_TOKEN: q.token, QSTASH_CURRENT_SIGNING_KEY: keys.currentSigningKey, QSTASH_NEXT_SIGNING_KEY: keys.nextSigningKey },
      {
        '/three': [
          async (ctx) => {
            const input = ctx.requestPayload as { n: number };
            const a = await ctx.run('s1', () => (bump(`${ctx.workflowRunId}:s1`), input.n + 1));
            const b = await ctx.run('s2', () => (bump(`${ctx.workflowRunId}:s2`), a * 10));
            const c = await ctx.run('s3', () => (bump(`${ctx.workflowRunId}:s3`), `done-${b}`));
            return { result: c };
          },
          {},
        ],
        '/flaky': [
          async (ctx) => {
            const label = (ctx.requestPayload as { tag: string }).tag;
            await ctx.run('a', () => (bump(`${label}:a`), 'A'));
            await ctx.run('b', () => {
              bump(`${label}:b`);
              if (broken) throw new Error(`step b broken for ${label}`);
              return 'B';
            });
            await ctx.run('c', () => (bump(`${label}:c`), 'C'));
            return 'ok';
          },
          {
            failureFunction: async ({ context, failStatus, failResponse }) => {
              if ((context.requestPayload as { tag: string }).tag === 'ff1' && failureBroken) throw new Error('failure function broken');
              failures.push({ runId: context.workflowRunId, failStatus, failResponse, payload: context.requestPayload });
              return 'failure handled';
            },
          },
        ],
        '/waiter': [
          async (ctx) => {
            const { eventId, timeout } = ctx.requestPayload as { eventId: string; timeout: string };
            const r = await ctx.waitForEvent('wait', eventId, { timeout: timeout as '1s' });
            await ctx.run('record', () => {
              waited.push({ runId: ctx.workflowRunId, eventData: r.eventData, timeout: r.timeout });
            });
          },
          {},
        ],
        '/caller': [
          async (ctx) => {
            const r = await ctx.call('ext', { url: `${sink.url}/ext`, method: 'POST', body: JSON.stringify({ q: 1 }) });
            await ctx.run('after-call', () => {
              waited.push({ runId: ctx.workflowRunId, call: { status: r.status, body: r.body } });
            });
          },
          {},
        ],
        '/sleepy': [
          async (ctx) => {
            await ctx.run('before', () => bump(`${ctx.workflowRunId}:before`));
            await ctx.sleep('nap', 30);
            await ctx.run('after', () => bump(`${ctx.workflowRunId}:after`));
          },
          {},
        ],
      },
    );
    wf = new WorkflowClient({ baseUrl: q.url, token: q.token });
  });
  after(async () => {
    await app.close();
    await sink.close();
    await q.close();
  });

  const runLog = async (workflowRunId: string, state?: string) => {
    const { runs: list } = (await wf.logs({ filter: { workflowRunId } } as never)) as unknown as { runs: Json[] };
    const r = list.find((x) => x.workflowRunId === workflowRunId);
    return r && (!state || r.workflowState === state) ? r : undefined;
  };
  const waitRun = (id: string, state: string, ms = 15_000) => waitFor(`run ${id} in ${state}`, () => runLog(id, state), ms);

  /** Triggers /flaky and waits until it fails into the DLQ; returns run id and dlq entry. */
  const failRun = async (tag: string) => {
    broken = true;
    const { workflowRunId } = await wf.trigger({ url: `${app.url}/flaky`, body: { tag }, retries: 1, retryDelay: '50' });
    const entry = await waitFor(`DLQ entry of ${tag}`, async () => {
      const { messages } = (await wf.dlq.list({ filter: { workflowRunId } })) as unknown as { messages: Json[] };
      return messages[0];
    });
    return { workflowRunId, entry };
  };

  test('a 3-step run completes once per step and its logs show each step and the response', async () => {
    const { workflowRunId } = await wf.trigger({ url: `${app.url}/three`, body: { n: 4 } });
    const log = await waitRun(workflowRunId, 'RUN_SUCCESS');
    assert.deepEqual(['s1', 's2', 's3'].map((s) => count(`${workflowRunId}:${s}`)), [1, 1, 1]);
    const names = (log.steps as Json[]).flatMap((g) => (g.steps as Json[]).map((s) => s.stepName));
    assert.deepEqual(names, ['init', 's1', 's2', 's3']);
    const outs = (log.steps as Json[]).slice(1).map((g) => JSON.parse(g.steps[0].out));
    assert.deepEqual(outs, [5, 50, 'done-50']);
    assert.deepEqual(JSON.parse(log.workflowRunResponse), { result: 'done-50' });
    assert.equal(log.workflowUrl, `${app.url}/three`);
    assert.ok(log.workflowRunCompletedAt >= log.workflowRunCreatedAt);
    // Every delivery carried the run id, creation time and the SDK protocol header.
    const deliveries = await waitFor('4 deliveries', () => {
      const d = app.requests.filter((r) => r.headers['upstash-workflow-runid'] === workflowRunId);
      return d.length >= 4 ? d : undefined;
    });
    assert.equal(deliveries.length, 4);
    assert.ok(deliveries.every((r) => r.headers['upstash-workflow-createdat'] === String(log.workflowRunCreatedAt)));
    assert.ok(deliveries.every((r) => r.headers['svc-workflow-runid'] === workflowRunId && r.headers['upstash-workflow-sdk-version'] === '1'));
    // A step for the finished run is refused with 400 (the SDK reads it as "run finished").
    const late = await q.api('/v2/batch', {
      method: 'POST',
      body: JSON.stringify([{ destination: `${app.url}/three`, headers: { 'upstash-workflow-runid': workflowRunId, 'upstash-workflow-init': 'false' }, body: '{}' }]),
    });
    assert.equal(late.status, 400);
    // The lazy-fetch endpoint answers 404 for an ended run.
    assert.equal((await q.api(`/v2/workflows/runs/${workflowRunId}`)).status, 404);
  });

  test('a failing step lands the run in the DLQ, calls the failure function; resume finishes without re-running steps', async () => {
    const { workflowRunId, entry } = await failRun('res1');
    assert.equal(entry.workflowRunId, workflowRunId);
    assert.equal(entry.workflowUrl, `${app.url}/flaky`);
    assert.equal(typeof entry.workflowCreatedAt, 'number');
    assert.equal(entry.responseStatus, 500);
    assert.equal(entry.failureCallback, `${app.url}/flaky`);
    assert.equal(count('res1:a'), 1);
    assert.equal(count('res1:b'), 2, 'retries: 1 -> two attempts');
    const failure = await waitFor('failure function', () => failures.find((f) => f.runId === workflowRunId));
    assert.equal(failure.failStatus, 500);
    assert.match(failure.failResponse, /step b broken for res1/);
    assert.deepEqual(failure.payload, { tag: 'res1' });
    const failedLog = await waitRun(workflowRunId, 'RUN_FAILED');
    assert.equal(failedLog.dlqId, entry.dlqId);
    await waitFor('failure callback state', async () => {
      const { messages } = (await wf.dlq.list({ filter: { workflowRunId } })) as unknown as { messages: Json[] };
      return messages[0]?.failureCallbackInfo?.state === 'CALLBACK_SUCCESS';
    });
    // Plain GET /v2/dlq lists it too, with the workflow fields.
    const plain = (await (await q.api('/v2/dlq')).json()) as Json;
    assert.ok(plain.messages.some((m: Json) => m.dlqId === entry.dlqId && m.workflowRunId === workflowRunId));

    broken = false;
    const resumed = (await wf.dlq.resume(entry.dlqId)) as unknown as Json;
    const run = resumed.workflowRuns ? resumed.workflowRuns[0] : resumed;
    assert.equal(run.workflowRunId, workflowRunId, 'resume without a run-id header keeps the run id');
    assert.ok(Number(run.workflowCreatedAt) > entry.workflowCreatedAt);
    await waitRun(workflowRunId, 'RUN_SUCCESS');
    assert.deepEqual([count('res1:a'), count('res1:b'), count('res1:c')], [1, 3, 1], 'a not re-run, b once more, c once');
    const { messages } = (await wf.dlq.list({ filter: { workflowRunId } })) as unknown as { messages: Json[] };
    assert.equal(messages.length, 0, 'the resumed entry left the DLQ');
  });

  test('restart re-runs every step; Workflow-RunId, Retries and Flow-Control overrides apply', async () => {
    const { entry } = await failRun('rst1');
    broken = false;
    const res = await q.api(`/v2/dlq/restart/${entry.dlqId}`, {
      method: 'POST',
      headers: { 'Upstash-Workflow-RunId': 'wfr_restarted-1', 'Upstash-Retries': '0', 'Svc-Flow-Control-Key': 'wf-key', 'Svc-Flow-Control-Value': 'parallelism=2' },
    });
    assert.equal(res.status, 200);
    const body = (await res.json()) as Json;
    assert.equal(body.workflowRunId, 'wfr_restarted-1');
    assert.equal(typeof body.workflowCreatedAt, 'number');
    await waitRun('wfr_restarted-1', 'RUN_SUCCESS');
    assert.deepEqual([count('rst1:a'), count('rst1:b'), count('rst1:c')], [2, 3, 1], 'restart runs a again');
    // The last delivery's outcome is recorded just after the run ended (its DELETE came first).
    const deliveries = await waitFor('4 deliveries', () => {
      const d = app.requests.filter((r) => r.headers['upstash-workflow-runid'] === 'wfr_restarted-1');
      return d.length >= 4 ? d : undefined;
    });
    assert.ok(deliveries.every((r) => r.headers['upstash-max-retries'] === '0'), 'Retries override on every step');
    const logs = await waitFor('4 DELIVERED with the key', async () => {
      const l = (await (await q.api('/v2/logs?flowControlKey=wf-key&state=DELIVERED')).json()) as Json;
      return l.logs.length >= 4 ? l : undefined;
    });
    assert.ok(logs.logs.every((l: Json) => l.flowControlKey === 'wf-key'));
  });

  test('resume with run-id and retries overrides (GET form); SDK restart with a flow-control override', async () => {
    const one = await failRun('rsm2');
    broken = false;
    const res = await q.api(`/v2/dlq/resume/${one.entry.dlqId}`, { headers: { 'Svc-Workflow-RunId': 'wfr_resumed-2', 'Svc-Retries': '2' } });
    assert.equal(res.status, 200);
    assert.equal(((await res.json()) as Json).workflowRunId, 'wfr_resumed-2');
    await waitRun('wfr_resumed-2', 'RUN_SUCCESS');
    assert.deepEqual([count('rsm2:a'), count('rsm2:c')], [1, 1]);
    const resumedDeliveries = app.requests.filter((r) => r.headers['upstash-workflow-runid'] === 'wfr_resumed-2');
    assert.ok(resumedDeliveries.length >= 2 && resumedDeliveries.every((r) => r.headers['upstash-max-retries'] === '2'));

    const two = await failRun('rst3');
    broken = false;
    const r = (await wf.dlq.restart(two.entry.dlqId, { flowControl: { key: 'sdk-key', rate: 50 }, retries: 1 })) as unknown as Json;
    const run = r.workflowRuns ? r.workflowRuns[0] : r;
    assert.notEqual(run.workflowRunId, two.workflowRunId, 'restart without a run-id header: a new id');
    assert.match(run.workflowRunId, /^wfr_/);
    await waitRun(run.workflowRunId, 'RUN_SUCCESS');
    const logs = (await (await q.api('/v2/logs?flowControlKey=sdk-key')).json()) as Json;
    assert.ok(logs.logs.length > 0 && logs.logs.every((l: Json) => l.maxRetries === 1));
  });

  test('delete a failed run from the DLQ, and its error cases', async () => {
    const { workflowRunId, entry } = await failRun('del1');
    // malformed id, unknown id, an entry that is not a workflow run
    const bad = await q.api('/v2/workflows/dlq/not-an-id', { method: 'DELETE' });
    assert.equal(bad.status, 400);
    assert.match(((await bad.json()) as Json).error, /invalid DLQ id/);
    const unknown = await q.api('/v2/workflows/dlq/1700000000000-999999', { method: 'DELETE' });
    assert.equal(unknown.status, 404);
    assert.ok(((await unknown.json()) as Json).error);
    const plain = await q.client.publish({ url: `${sink.url}/fail`, body: 'x', retries: 0 });
    const plainEntry = await waitFor('plain DLQ entry', async () => (await q.client.dlq.listMessages({ filter: { messageId: plain.messageId } } as never)).messages[0]);
    const notWf = await q.api(`/v2/workflows/dlq/${plainEntry.dlqId}`, { method: 'DELETE' });
    assert.equal(notWf.status, 400);
    assert.match(((await notWf.json()) as Json).error, /not a failed workflow run/);
    // restart/resume of those: same statuses
    assert.equal((await q.api(`/v2/dlq/restart/${plainEntry.dlqId}`, { method: 'POST' })).status, 400);
    assert.equal((await q.api('/v2/dlq/resume/1700000000000-999999', { method: 'POST' })).status, 404);
    // the plain message is not listed as a workflow run
    const wfList = (await (await q.api('/v2/dlq?source=workflow')).json()) as Json;
    assert.ok(!wfList.messages.some((m: Json) => m.dlqId === plainEntry.dlqId));

    const ok = await q.api(`/v2/workflows/dlq/${entry.dlqId}`, { method: 'DELETE' });
    assert.equal(ok.status, 200);
    const { messages } = (await wf.dlq.list({ filter: { workflowRunId } })) as unknown as { messages: Json[] };
    assert.equal(messages.length, 0);
    assert.equal((await q.api(`/v2/workflows/dlq/${entry.dlqId}`, { method: 'DELETE' })).status, 404);
    // the SDK's bulk form
    const other = await failRun('del2');
    const r = (await wf.dlq.delete(other.entry.dlqId)) as unknown as Json;
    assert.equal(r.deleted, 1);
    assert.equal(r.cursor, undefined);
  });

  test('waitForEvent: client.notify resumes the run with the event data; an unnotified wait times out', async () => {
    const { workflowRunId } = await wf.trigger({ url: `${app.url}/waiter`, body: { eventId: 'order-1', timeout: '30s' } });
    const waiters = await waitFor('waiter registered', async () => {
      const w = (await wf.getWaiters({ eventId: 'order-1' })) as unknown as Json[];
      return w.length ? w : undefined;
    });
    assert.equal(waiters[0].url, `${app.url}/waiter`);
    assert.ok(waiters[0].deadline > Date.now() / 1000);
    const res = (await wf.notify({ eventId: 'order-1', eventData: { paid: 42 } })) as unknown as Json[];
    assert.equal(res.length, 1);
    assert.match(res[0].messageId, /^msg_/);
    await waitRun(workflowRunId, 'RUN_SUCCESS');
    assert.deepEqual(waited.find((w) => w.runId === workflowRunId), { runId: workflowRunId, eventData: { paid: 42 }, timeout: false });
    assert.deepEqual(await wf.getWaiters({ eventId: 'order-1' }), []);
    assert.deepEqual(await wf.notify({ eventId: 'order-1', eventData: 'late' }), [], 'nobody waits any more');

    const t = await wf.trigger({ url: `${app.url}/waiter`, body: { eventId: 'never', timeout: '1s' } });
    await waitRun(t.workflowRunId, 'RUN_SUCCESS');
    assert.deepEqual(waited.find((w) => w.runId === t.workflowRunId), { runId: t.workflowRunId, eventData: undefined, timeout: true });
  });

  test('a trigger for a running run id is deduplicated; after the run ended the id starts a new run', async () => {
    const trigger = async () => {
      const res = await q.api('/v2/batch', {
        method: 'POST',
        body: JSON.stringify([
          {
            destination: `${app.url}/sleepy`,
            body: '{}',
            headers: {
              'content-type': 'application/json',
              'upstash-workflow-init': 'true',
              'upstash-workflow-runid': 'wfr_dup-1',
              'upstash-workflow-url': `${app.url}/sleepy`,
              'upstash-forward-upstash-workflow-sdk-version': '1',
            },
          },
        ]),
      });
      assert.equal(res.status, 200);
      return ((await res.json()) as Json[])[0];
    };
    assert.equal((await trigger()).deduplicated, undefined);
    assert.equal((await trigger()).deduplicated, true);
    await waitFor('first step of wfr_dup-1', () => count('wfr_dup-1:before') === 1);
    // context.cancel()'s request: DELETE /v2/workflows/runs/{id}?cancel=true
    assert.equal((await q.api('/v2/workflows/runs/wfr_dup-1?cancel=true', { method: 'DELETE' })).status, 200);
    await waitRun('wfr_dup-1', 'RUN_CANCELED');
    assert.equal((await trigger()).deduplicated, undefined);
    await waitFor('second run of wfr_dup-1 started', () => count('wfr_dup-1:before') === 2);
    // bulk cancel by exact workflow URL (the only running /sleepy run now)
    assert.equal(((await wf.cancel({ filter: { workflowUrl: `${app.url}/sleepy` } })) as unknown as Json).cancelled, 1);
    await waitRun('wfr_dup-1', 'RUN_CANCELED');
    assert.equal((await q.api('/v2/workflows/runs/wfr_nope?cancel=true', { method: 'DELETE' })).status, 404);
  });

  test('context.call: the third-party response comes back as the step result', async () => {
    const { workflowRunId } = await wf.trigger({ url: `${app.url}/caller`, body: {} });
    await waitRun(workflowRunId, 'RUN_SUCCESS');
    assert.deepEqual(waited.find((w) => w.runId === workflowRunId)?.call, { status: 201, body: { echo: '{"q":1}' } });
    assert.equal(sink.at('/ext').length, 1);
  });

  test('a failed failure function shows CALLBACK_FAIL and client.dlq.retryFailureFunction calls it again', async () => {
    const { workflowRunId, entry } = await failRun('ff1');
    const failedCb = await waitFor('failure callback failed', async () => {
      const { messages } = (await wf.dlq.list({ filter: { workflowRunId } })) as unknown as { messages: Json[] };
      return messages[0]?.failureCallbackInfo?.state === 'CALLBACK_FAIL' ? messages[0] : undefined;
    });
    assert.equal(failedCb.failureCallbackInfo.responseStatus, 500);
    const filtered = (await wf.dlq.list({ filter: { failureFunctionState: 'CALLBACK_FAIL' } })) as unknown as { messages: Json[] };
    assert.ok(filtered.messages.some((m) => m.dlqId === entry.dlqId));
    failureBroken = false;
    const r = (await wf.dlq.retryFailureFunction({ dlqId: entry.dlqId })) as unknown as Json;
    assert.equal(r.workflowRunId, workflowRunId);
    await waitFor('failure function ran', () => failures.find((f) => f.runId === workflowRunId));
    await waitFor('CALLBACK_SUCCESS', async () => {
      const { messages } = (await wf.dlq.list({ filter: { workflowRunId } })) as unknown as { messages: Json[] };
      return messages[0]?.failureCallbackInfo?.state === 'CALLBACK_SUCCESS';
    });
    // only a failed failure function can be retried
    assert.equal((await q.api(`/v2/workflows/dlq/callback/${entry.dlqId}`, { method: 'POST' })).status, 400);
  });

  test('cancel: client.cancel ends a sleeping run as RUN_CANCELED and its pending step is dropped', async () => {
    const { workflowRunId } = await wf.trigger({ url: `${app.url}/sleepy`, body: {} });
    await waitFor('first step done', () => count(`${workflowRunId}:before`) === 1);
    await waitFor('sleep step published', async () => ((await runLog(workflowRunId))?.steps as Json[] | undefined)?.some((g) => g.steps[0].stepName === 'nap'));
    const r = (await wf.cancel({ ids: workflowRunId } as never)) as unknown as Json;
    assert.equal(r.cancelled, 1);
    await waitRun(workflowRunId, 'RUN_CANCELED');
    const nap = ((await runLog(workflowRunId))!.steps as Json[]).find((g) => g.steps[0].stepName === 'nap')!.steps[0];
    const cancelledEvents = (await (await q.api(`/v2/events?messageId=${nap.messageId}&state=CANCELLED`)).json()) as Json;
    assert.equal(cancelledEvents.events.length, 1, 'the delayed sleep step was cancelled');
    assert.equal(count(`${workflowRunId}:after`), 0);
    // cancelling again finds no active run
    assert.equal(((await wf.cancel([workflowRunId])) as unknown as Json).cancelled, 0);
  });
});

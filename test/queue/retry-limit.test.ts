/**
 * The maximum retry count (`SVC_QUEUE_MAX_RETRIES`, default 20): a count above it answers 412, as
 * the hosted service answers a count above the plan's maximum (a malformed count stays 400), on
 * every path that takes one; the workflow SDK turns that 412 into a non-retryable failure of the
 * step instead of retrying the step.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { QstashError } from '@upstash/qstash';
import { Client as WorkflowClient } from '@upstash/workflow';
import { startQueue, startSink, waitFor, type Sink } from './helpers.js';
import { qstashEnv, startWorkflowApp, type WorkflowApp } from './workflow-helpers.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

describe('retry count above the maximum', () => {
  let q: Awaited<ReturnType<typeof startQueue>>;
  let sink: Sink;
  let app: WorkflowApp;
  before(async () => {
    q = await startQueue();
    sink = await startSink();
    app = await startWorkflowApp(
      qstashEnv(q),
      {
        '/greedy-call': [
          async (ctx) => {
            const r = await ctx.call('too-many-retries', { url: `${sink.url}/ext`, method: 'POST', body: '{}', retries: 25 });
            return r.status;
          },
          {},
        ],
      },
    );
  });
  after(async () => {
    await app.close();
    await sink.close();
    await q.close();
  });

  const publishStatus = async (headers: Record<string, string>) =>
    (await q.api(`/v2/publish/${sink.url}/r`, { method: 'POST', headers, body: 'x' })).status;

  test('default maximum 20: 21 and 1000000 answer 412 through the SDK and raw HTTP; malformed counts stay 400', async () => {
    const ok = await q.client.publish({ url: `${sink.url}/twenty`, body: 'x', retries: 20, delay: 3600 });
    assert.match(ok.messageId, /^msg_/);
    await assert.rejects(
      () => q.client.publish({ url: `${sink.url}/r`, body: 'x', retries: 21 }),
      (err: unknown) => err instanceof QstashError && err.status === 412 && /maximum of 20/.test(err.message),
    );
    assert.equal(await publishStatus({ 'Upstash-Retries': '1000000' }), 412);
    assert.equal(await publishStatus({ 'Upstash-Retries': 'abc' }), 400);
    assert.equal(await publishStatus({ 'Upstash-Retries': '-1' }), 400);
    // a callback's own retries, a batch entry, an enqueue, a schedule
    assert.equal(await publishStatus({ 'Upstash-Callback': `${sink.url}/cb`, 'Upstash-Callback-Retries': '50' }), 412);
    const batch = await q.api('/v2/batch', { method: 'POST', body: JSON.stringify([{ destination: `${sink.url}/b`, headers: { 'Upstash-Retries': '21' } }]) });
    assert.equal(batch.status, 412);
    await assert.rejects(
      () => q.client.queue({ queueName: 'rl' }).enqueue({ url: `${sink.url}/e`, body: 'x', retries: 99 }),
      (err: unknown) => err instanceof QstashError && err.status === 412,
    );
    await assert.rejects(
      () => q.client.schedules.create({ destination: `${sink.url}/s`, cron: '0 0 1 1 *', retries: 21 }),
      (err: unknown) => err instanceof QstashError && err.status === 412,
    );
    assert.equal(sink.at('/r').length + sink.at('/b').length + sink.at('/e').length, 0, 'nothing refused was delivered');
    await q.client.messages.cancel(ok.messageId);
  });

  test('SVC_QUEUE_MAX_RETRIES sets the maximum', async () => {
    const q2 = await startQueue({ SVC_QUEUE_MAX_RETRIES: '5' });
    try {
      const status = async (n: string) => (await q2.api(`/v2/publish/${sink.url}/m`, { method: 'POST', headers: { 'Upstash-Retries': n, 'Upstash-Delay': '1h' }, body: 'x' })).status;
      assert.equal(await status('5'), 200);
      assert.equal(await status('6'), 412);
      const body = (await (await q2.api(`/v2/publish/${sink.url}/m`, { method: 'POST', headers: { 'Upstash-Retries': '6' }, body: 'x' })).json()) as Json;
      assert.match(body.error, /maximum of 5/);
    } finally {
      await q2.close();
    }
  });

  test('workflow: a context.call asking for more retries than allowed fails its run at once (the SDK reads 412 as non-retryable)', async () => {
    const wf = new WorkflowClient({ baseUrl: q.url, token: q.token });
    const { workflowRunId } = await wf.trigger({ url: `${app.url}/greedy-call`, body: {}, retries: 2, retryDelay: '100' });
    const run = await waitFor(
      'the run ends',
      async () => {
        const { runs } = (await wf.logs({ filter: { workflowRunId } } as never)) as unknown as { runs: Json[] };
        return runs[0] && runs[0].workflowState !== 'RUN_STARTED' ? runs[0] : undefined;
      },
      60_000,
    );
    assert.equal(run.workflowState, 'RUN_FAILED');
    assert.equal(sink.at('/ext').length, 0, 'the third party was never called');
    // (the failure callback, which client.trigger points at the workflow URL, is not a step attempt)
    const attempts = app.requests.filter((r) => r.headers['upstash-workflow-runid'] === workflowRunId && !r.headers['upstash-workflow-is-failure']);
    assert.equal(attempts.length, 1, `the failing step was not retried (${attempts.map((r) => r.status).join(', ')})`);
    assert.equal(attempts[0].status, 489);
    const next = (run.steps as Json[]).find((g) => g.type === 'next')?.steps[0];
    assert.match(JSON.stringify(next?.errors ?? []), /maximum of 20/);
  });
});

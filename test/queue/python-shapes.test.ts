/**
 * The request shapes of the official Python SDKs (qstash-py, upstash-workflow), sent as raw HTTP
 * because no Python SDK runs here: every optional field of a JSON body sent as `null` is the same
 * as absent, a Python-shaped workflow run (trigger by publish, steps through `/v2/batch`, end by
 * DELETE) finishes, and the fields the Python parsers read (`period` of a flow-controlled
 * message, `retryDelayExpr` of a log entry) are there.
 *
 * The shapes copied here (qstash-py `qstash/message.py`):
 *   prepare_batch_message_body -> json.dumps([{"destination": ..., "headers": {...},
 *                                  "body": msg.get("body"), "queue": msg.get("queue")}])
 *   so `"queue": null` whenever no queue is set and `"body": null` without a body;
 * upstash-workflow (`context/auto_executor.py` submit_steps_to_qstash) sends each step through
 * `batch_json` with the step body `{"method": "POST", "stepId", "stepName", "stepType", "out",
 * "sleepFor": null, "sleepUntil": null, "concurrent": 1, "targetStep": null, "callUrl": null,
 * "callMethod": null, "callBody": null, "callHeaders": null}`, its trigger with `publish_json`
 * (`workflow_requests.py` _trigger_first_invocation) and its end with
 * `DELETE /v2/workflows/runs/{id}?cancel=false` (no body). Its `Client` (`client.py`): `notify`
 * posts the event data as JSON to `/v2/notify/{runId}/{eventId}` and reads `messageId`, `url` and
 * `workflowRunId` of every answer entry; `get_waiters` reads `workflowRunId` and `eventId` of
 * every `GET /v2/waiters/{eventId}` entry; `cancel` is `DELETE /v2/workflows/runs/{id}?cancel=true`.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { startQueue, startSink, waitFor, type Sink } from './helpers.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

describe('Python SDK request shapes (raw HTTP)', () => {
  let q: Awaited<ReturnType<typeof startQueue>>;
  let sink: Sink;
  before(async () => {
    q = await startQueue();
    sink = await startSink();
  });
  after(async () => {
    await sink.close();
    await q.close();
  });

  const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    q.api(path, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });

  test('/v2/batch in qstash-py\'s shape: "queue": null and "body": null are absent fields', async () => {
    const res = await post('/v2/batch', [
      // client.message.batch_json([{"url": ..., "body": {...}, "retries": 2}])
      { destination: `${sink.url}/py-1`, headers: { 'Content-Type': 'application/json', 'Upstash-Retries': '2' }, body: '{"hello": "world"}', queue: null },
      // client.message.batch([{"url": ...}]) without a body
      { destination: `${sink.url}/py-2`, headers: {}, body: null, queue: null },
      // with a queue
      { destination: `${sink.url}/py-3`, headers: { 'Upstash-Method': 'PUT' }, body: 'q', queue: 'py-queue' },
    ]);
    assert.equal(res.status, 200, await res.clone().text());
    const out = (await res.json()) as Json[];
    assert.equal(out.length, 3);
    for (const r of out) assert.match(r.messageId, /^msg_/);
    await waitFor('three deliveries', () => ['/py-1', '/py-2', '/py-3'].every((p) => sink.at(p).length === 1), 30_000);
    assert.equal(sink.at('/py-1')[0].body.toString(), '{"hello": "world"}');
    assert.equal(sink.at('/py-2')[0].body.length, 0);
    assert.equal(sink.at('/py-3')[0].method, 'PUT');
    assert.equal(sink.at('/py-3')[0].headers['upstash-queue-name'], 'py-queue');
    // a header sent as null is left out too; a null destination is still missing
    const nullHeader = await post('/v2/batch', [{ destination: `${sink.url}/py-4`, headers: { 'Upstash-Delay': null }, body: 'x', queue: null }]);
    assert.equal(nullHeader.status, 200);
    const noDest = await post('/v2/batch', [{ destination: null, headers: {}, body: 'x', queue: null }]);
    assert.equal(noDest.status, 400);
    assert.match(((await noDest.json()) as Json).error, /destination/);
  });

  test('null optional fields of batch triggers, queue upserts and URL-group endpoints are absent', async () => {
    const trig = await post('/v2/batch/trigger', [{ destination: `${sink.url}/wf-null`, body: null, headers: null }]);
    assert.equal(trig.status, 201, await trig.clone().text());
    const upsert = await post('/v2/queues', { queueName: 'py-upsert', parallelism: null, paused: null });
    assert.equal(upsert.status, 200, await upsert.clone().text());
    const qInfo = (await (await q.api('/v2/queues/py-upsert')).json()) as Json;
    assert.equal(qInfo.parallelism, 1);
    assert.equal(qInfo.paused, false);
    const group = await post('/v2/topics/py-group/endpoints', { endpoints: [{ url: `${sink.url}/g`, name: null }] });
    assert.equal(group.status, 200, await group.clone().text());
    const g = (await (await q.api('/v2/topics/py-group')).json()) as Json;
    assert.deepEqual(g.endpoints, [{ url: `${sink.url}/g` }]);
    // a bulk list sent as null is refused, never read as "every message"
    const bulk = await q.api('/v2/messages', { method: 'DELETE', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ messageIds: null }) });
    assert.equal(bulk.status, 400);
  });

  test('what the Python parsers read: period (default 1 s) of a flow-controlled message, retryDelayExpr of log entries', async () => {
    // prepare_headers(flow_control={"key": "py-fc", "parallelism": 2}) -> "parallelism=2", no period
    const res = await q.api(`/v2/publish/${sink.url}/py-fc`, {
      method: 'POST',
      headers: { 'Upstash-Delay': '1h', 'Upstash-Retry-Delay': '1000 * retried', 'Upstash-Flow-Control-Key': 'py-fc', 'Upstash-Flow-Control-Value': 'parallelism=2' },
      body: 'x',
    });
    assert.equal(res.status, 200, await res.clone().text());
    const { messageId } = (await res.json()) as Json;
    const msg = (await (await q.api(`/v2/messages/${messageId}`)).json()) as Json;
    assert.equal(msg.flowControlKey, 'py-fc');
    assert.equal(msg.parallelism, 2);
    assert.equal(msg.period, 1, 'parse_flow_control reads period (seconds); the default is 1');
    // the JS SDK reads the same message through its client
    const viaSdk = await q.client.messages.get(messageId);
    assert.equal((viaSdk as Json).period, 1);
    // qstash-py's log parser: retry_delay_expression=event.get("retryDelayExpr")
    const events = (await (await q.api(`/v2/events?messageId=${messageId}`)).json()) as Json;
    assert.ok(events.events.length >= 1);
    for (const e of events.events) {
      assert.equal(e.retryDelayExpr, '1000 * retried');
      assert.equal(e.retryDelayExpression, '1000 * retried');
    }
    const logs = (await (await q.api(`/v2/logs?messageId=${messageId}`)).json()) as Json;
    assert.equal(logs.logs[0].retryDelayExpr, '1000 * retried');
    // a schedule with the same value reports the period too
    const sched = await q.client.schedules.create({ destination: `${sink.url}/py-sched`, cron: '0 0 1 1 *', flowControl: { key: 'py-fc-s', parallelism: 3 } });
    const s = await q.client.schedules.get(sched.scheduleId);
    assert.equal((s as Json).period, 1);
    await q.client.messages.cancel(messageId);
  });

  test('a workflow run in upstash-workflow (Python) shape: trigger by publish, steps through /v2/batch with "queue": null, end by DELETE', async () => {
    const runId = 'wfr_python-shaped-1';
    const errors: string[] = [];
    let deliveries = 0;
    // The endpoint does what upstash-workflow's serve does for `ctx.run("double", lambda: n * 2)`.
    const endpoint = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', async () => {
        deliveries++;
        const url = `http://127.0.0.1:${(endpoint.address() as AddressInfo).port}/py-wf`;
        const steps = JSON.parse(Buffer.concat(chunks).toString('utf8') || '[]') as { messageId: string; body: string; callType: string }[];
        const initial = JSON.parse(Buffer.from(steps[0].body, 'base64').toString('utf8')) as { n: number };
        // recreate_user_headers: every incoming header except upstash-workflow-* (and proxies')
        const userHeaders: Record<string, string> = {};
        for (const [k, v] of Object.entries(req.headers)) {
          if (typeof v === 'string' && !k.startsWith('upstash-workflow-') && !k.startsWith('x-forwarded-')) userHeaders[k] = v;
        }
        try {
          // serve() verifies every delivery (the step's forwarded Upstash-Signature of an earlier
          // delivery must not replace the new one)
          await q.receiver().verify({ signature: String(req.headers['upstash-signature']), body: Buffer.concat(chunks).toString('utf8'), url });
          if (steps.length === 1) {
            const headers: Record<string, string> = {
              'Upstash-Workflow-Init': 'false',
              'Upstash-Workflow-RunId': runId,
              'Upstash-Workflow-Url': url,
              'Upstash-Feature-Set': 'LazyFetch,InitialBody,WF_DetectTrigger',
              'Upstash-Forward-Upstash-Workflow-Sdk-Version': '1',
              'Content-Type': 'application/json',
            };
            for (const [k, v] of Object.entries(userHeaders)) headers[`Upstash-Forward-${k}`] = v;
            const stepBody = {
              method: 'POST',
              stepId: 1,
              stepName: 'double',
              stepType: 'Run',
              out: JSON.stringify(initial.n * 2),
              sleepFor: null,
              sleepUntil: null,
              concurrent: 1,
              targetStep: null,
              callUrl: null,
              callMethod: null,
              callBody: null,
              callHeaders: null,
            };
            const r = await post('/v2/batch', [{ destination: url, headers, body: JSON.stringify(stepBody), queue: null }]);
            if (r.status !== 200) errors.push(`batch ${r.status}: ${await r.text()}`);
          } else {
            const r = await q.api(`/v2/workflows/runs/${runId}?cancel=false`, { method: 'DELETE' });
            if (r.status !== 200) errors.push(`delete ${r.status}: ${await r.text()}`);
          }
        } catch (err) {
          errors.push(String(err));
        }
        res.writeHead(200, { 'content-type': 'application/json', 'Upstash-Workflow-Sdk-Version': '1' });
        res.end(JSON.stringify({ workflowRunId: runId }));
      });
    });
    await new Promise<void>((resolve) => endpoint.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(endpoint.address() as AddressInfo).port}/py-wf`;
    try {
      // _trigger_first_invocation: publish_json(url, body=payload, headers=_get_headers("true", ...))
      const trigger = await q.api(`/v2/publish/${url}`, {
        method: 'POST',
        headers: {
          'Content-Type': 'application/json',
          'Upstash-Workflow-Init': 'true',
          'Upstash-Workflow-RunId': runId,
          'Upstash-Workflow-Url': url,
          'Upstash-Feature-Set': 'LazyFetch,InitialBody,WF_DetectTrigger',
          'Upstash-Forward-Upstash-Workflow-Sdk-Version': '1',
          'Upstash-Forward-X-Tenant': 'py',
        },
        body: JSON.stringify({ n: 21 }),
      });
      assert.equal(trigger.status, 200, await trigger.clone().text());
      const run = await waitFor(
        'the run ends (or a step is refused)',
        async () => {
          if (errors.length) return { error: errors.join('; ') };
          const { runs } = (await (await q.api(`/v2/workflows/logs?workflowRunId=${runId}`)).json()) as { runs: Json[] };
          return runs[0]?.workflowState === 'RUN_SUCCESS' ? runs[0] : undefined;
        },
        60_000,
      );
      assert.deepEqual(errors, [], 'every Python-shaped request was accepted');
      assert.equal(run.workflowState, 'RUN_SUCCESS');
      assert.equal(deliveries, 2);
      const step = (run.steps as Json[]).flatMap((g) => g.steps as Json[]).find((s) => s.stepName === 'double');
      assert.equal(step?.stepType, 'Run');
      assert.equal(step?.out, '42');
    } finally {
      endpoint.closeAllConnections();
      await new Promise<void>((resolve) => endpoint.close(() => resolve()));
    }
  });

  test('upstash-workflow (Python) Client: get_waiters and notify find the fields they read; cancel ends the run', async () => {
    // a run held at its first step (its endpoint never answers), waiting for an event
    const hang = await startSink(() => ({ delayMs: 120_000 }));
    try {
      const runId = 'wfr_py_client';
      const t = await post(`/v2/trigger/${hang.url}/wf`, {}, { 'upstash-workflow-runid': runId });
      assert.equal(t.status, 200, await t.clone().text());
      const w = await post('/v2/wait/py-event', { url: `${sink.url}/wf`, timeout: '1h', step: { stepId: 1, stepName: 'w', stepType: 'Wait', concurrent: 1 } }, { 'upstash-workflow-runid': runId });
      assert.equal(w.status, 200, await w.clone().text());

      // get_waiters: Waiter(workflow_run_id=item["workflowRunId"], event_id=item["eventId"], ...)
      const waiters = (await (await q.api('/v2/waiters/py-event')).json()) as Json[];
      assert.equal(waiters.length, 1);
      assert.equal(waiters[0].workflowRunId, runId);
      assert.equal(waiters[0].eventId, 'py-event');

      // notify(event_id, event_data, workflow_run_id): json.dumps of the data, Content-Type application/json
      const n = await q.api(`/v2/notify/${runId}/py-event`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ ok: 1 }) });
      assert.equal(n.status, 200);
      const answers = (await n.json()) as Json[];
      assert.equal(answers.length, 1);
      // NotifyResponse(message_id=item["messageId"], url=item["url"], workflow_run_id=item["workflowRunId"])
      assert.match(answers[0].messageId, /^msg_/);
      assert.equal(answers[0].url, `${sink.url}/wf`);
      assert.equal(answers[0].workflowRunId, runId);
      assert.equal(answers[0].waiter.url, `${sink.url}/wf`, 'the JS SDK\'s shape stays');

      // cancel(workflow_run_id): DELETE ...?cancel=true, no body
      const c = await q.api(`/v2/workflows/runs/${runId}?cancel=true`, { method: 'DELETE' });
      assert.ok(c.status >= 200 && c.status < 300, `cancel ${c.status}`);
      const logs = (await (await q.api(`/v2/workflows/logs?workflowRunId=${runId}`)).json()) as Json;
      assert.equal(logs.runs[0].workflowState, 'RUN_CANCELED');
    } finally {
      await hang.close();
    }
  });
});

/**
 * The read-only console (`SVC_CONSOLE_READONLY=true`) refuses by operation, not by HTTP method.
 * A workflow run fails for real (`@upstash/workflow`'s `serve` against svc) and lands in the DLQ;
 * `GET /console/api/queue/v2/dlq/resume/<dlqId>` — a GET that resumes the run — is refused with
 * 403, as is every other queue operation that changes state, whatever its method; the run stays
 * failed. kv writes sent as GET paths (`/set/k/v`, `/flushall`) and vector writes are refused by
 * the areas' read-only tokens; nothing changes. Reads still work, and the kv key browser lists the
 * keys (the one SCAN the hosted read-only token may not run goes with the standard token), in
 * Chromium too.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Client as WorkflowClient } from '@upstash/workflow';
import { Redis } from '@upstash/redis';
import { Index } from '@upstash/vector';
import { startTestSvc } from '../helpers/env.js';
import { waitFor } from '../helpers/wait.js';
import { startWorkflowApp, type WorkflowApp } from '../queue/workflow-helpers.js';
import { launchBrowser, screenshot, signIn } from './browser.js';
import { consoleCall, consoleLogin, workflowEnv, type ConsoleSession } from './helpers.js';

type Svc = Awaited<ReturnType<typeof startTestSvc>>;
type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

describe('console: read-only by operation', () => {
  let svc: Svc;
  let app: WorkflowApp;
  let wf: WorkflowClient;
  let s: ConsoleSession;
  let redis: Redis;
  before(async () => {
    svc = await startTestSvc(['queue', 'kv', 'vector', 'mgmt'], { env: { SVC_CONSOLE_READONLY: 'true', SVC_VECTOR_DIMENSION: '3' } });
    const token = svc.ctx.credentials.get('queue.token');
    app = await startWorkflowApp(
      workflowEnv(svc),
      {
        '/broken': [
          async (ctx) => {
            await ctx.run('ok', () => 'fine');
            await ctx.run('fails', () => {
              throw new Error('always fails');
            });
          },
          {},
        ],
      },
    );
    wf = new WorkflowClient({ baseUrl: svc.urls.queue!, token });
    s = await consoleLogin(svc);
    redis = new Redis({ url: svc.urls.kv!, token: svc.ctx.credentials.get('kv.token') });
  });
  after(async () => {
    await app?.close();
    await svc?.close();
  });

  test('a GET that resumes a failed workflow run is refused; so is every other queue write; the run stays failed', async () => {
    const { workflowRunId } = await wf.trigger({ url: `${app.url}/broken`, body: {}, retries: 0 });
    const failed = async (): Promise<Json | undefined> => {
      const r = await consoleCall(svc, s, 'GET', 'queue/v2/workflows/dlq');
      assert.equal(r.status, 200, JSON.stringify(r.body));
      return (r.body.messages as Json[]).find((m) => m.workflowRunId === workflowRunId);
    };
    const entry = await waitFor('the failed run in the DLQ', failed, 60_000);
    const dlqId = encodeURIComponent(entry.dlqId);

    const writes: [string, string, unknown?][] = [
      ['GET', `queue/v2/dlq/resume/${dlqId}`],
      ['POST', `queue/v2/dlq/resume/${dlqId}`],
      ['POST', `queue/v2/workflows/dlq/resume/${dlqId}`],
      ['POST', `queue/v2/workflows/dlq/restart/${dlqId}`],
      ['POST', `queue/v2/dlq/restart/${dlqId}`],
      ['POST', 'queue/v2/workflows/dlq/resume', { dlqIds: [entry.dlqId] }],
      ['POST', `queue/v2/workflows/dlq/callback/${dlqId}`],
      ['DELETE', `queue/v2/workflows/dlq/${dlqId}`],
      ['DELETE', `queue/v2/workflows/runs/${workflowRunId}`],
      ['GET', `queue/v2/workflows/hooks/u/${workflowRunId}/e`],
      ['POST', 'queue/v2/publish/http://127.0.0.1:9/x', 'body'],
      ['POST', 'queue/v2/batch', []],
      ['POST', 'queue/v2/enqueue/q/http://127.0.0.1:9/x', 'body'],
      ['POST', 'queue/v2/trigger/http://127.0.0.1:9/x', {}],
      ['DELETE', 'queue/v2/messages/x'],
      ['POST', `queue/v2/dlq/retry/${dlqId}`],
      ['DELETE', `queue/v2/dlq/${dlqId}`],
      ['POST', 'queue/v2/schedules/http://127.0.0.1:9/x'],
      ['PATCH', 'queue/v2/schedules/s/pause'],
      ['POST', 'queue/v2/queues', { queueName: 'q' }],
      ['POST', 'queue/v2/queues/q/pause'],
      ['POST', 'queue/v2/topics/t/endpoints', { endpoints: [{ url: 'http://127.0.0.1:9/x' }] }],
      ['POST', 'queue/v2/flowControl/k/resetRate'],
      ['POST', 'queue/v2/keys/rotate'],
      ['POST', 'queue/v2/notify/e', 'x'],
      ['GET', 'queue/v2/stats/../dlq/resume/x'],
    ];
    for (const [method, path, body] of writes) {
      const r = await consoleCall(svc, s, method, path, body);
      assert.deepEqual([r.status, r.body], [403, { error: 'the console is read-only (SVC_CONSOLE_READONLY=true)' }], `${method} ${path}`);
    }
    const still = await failed();
    assert.ok(still, 'the run is still in the DLQ');
    const { runs } = (await wf.logs({ workflowRunId } as never)) as unknown as { runs: Json[] };
    assert.equal(runs[0].workflowState, 'RUN_FAILED');

    // reads pass
    for (const path of ['v2/stats', 'v2/logs?count=1', `v2/workflows/dlq/${dlqId}`, 'v2/dlq', 'v2/schedules', 'v2/queues', 'v2/topics', 'v2/flowControl', 'v2/globalParallelism', 'v2/keys', `v2/workflows/logs?workflowRunId=${workflowRunId}`]) {
      const r = await consoleCall(svc, s, 'GET', `queue/${path}`);
      assert.equal(r.status, 200, `GET ${path}: ${JSON.stringify(r.body)}`);
    }
  });

  test('kv and vector writes are refused by the read-only tokens, GET paths included; reads and the key listing work', async () => {
    await redis.set('sentinel', 'here');
    for (const [method, path, body] of [
      ['GET', 'kv/set/sentinel/changed'],
      ['GET', 'kv/flushall'],
      ['GET', 'kv/del/sentinel'],
      ['POST', 'kv/', ['DEL', 'sentinel']],
      ['POST', 'kv/pipeline', [['SET', 'sentinel', 'changed']]],
    ] as [string, string, unknown?][]) {
      const r = await consoleCall(svc, s, method, path, body);
      assert.match(JSON.stringify(r.body), /NOPERM|no permissions/i, `${method} ${path}`);
    }
    assert.equal(await redis.get('sentinel'), 'here');

    // the key browser's SCAN: allowed (with any case and options), and it only lists
    const scan = await consoleCall(svc, s, 'POST', 'kv/', ['scan', '0', 'MATCH', 'sent*', 'COUNT', '100']);
    assert.deepEqual([scan.status, scan.body], [200, { result: ['0', ['sentinel']] }]);
    // KEYS, and SCAN inside a pipeline, keep the read-only token's rules
    assert.equal((await consoleCall(svc, s, 'POST', 'kv/', ['KEYS', '*'])).status, 400);
    const piped = await consoleCall(svc, s, 'POST', 'kv/pipeline', [['SCAN', '0']]);
    assert.match(JSON.stringify(piped.body), /NOPERM|no permissions/i);
    assert.deepEqual((await consoleCall(svc, s, 'GET', 'kv/get/sentinel')).body, { result: 'here' });

    const index = new Index({ url: svc.urls.vector!, token: svc.ctx.credentials.get('vector.default.token') });
    await index.upsert({ id: 'a', vector: [1, 0, 0] });
    for (const [method, path, body] of [
      ['POST', 'vector/default/upsert', { id: 'b', vector: [0, 1, 0] }],
      ['DELETE', 'vector/default/delete', ['a']],
      ['DELETE', 'vector/default/reset'],
    ] as [string, string, unknown?][]) {
      const r = await consoleCall(svc, s, method, path, body);
      assert.notEqual(r.status, 200, `${method} ${path}: ${JSON.stringify(r.body)}`);
    }
    const q = await consoleCall(svc, s, 'POST', 'vector/default/query', { vector: [1, 0, 0], topK: 5 });
    assert.equal(q.status, 200);
    assert.deepEqual((q.body.result as Json[]).map((r) => r.id), ['a']);
  });

  test('in Chromium: the read-only kv page lists the keys', async () => {
    await redis.set('listed:1', 'x');
    const b = await launchBrowser();
    try {
      await signIn(b.page, svc);
      await b.page.goto(`${svc.urls.mgmt}/console/#/kv/keys?match=listed:*`);
      await b.page.locator('tr[data-key="listed:1"]').waitFor({ timeout: 30_000 });
      await screenshot(b.page, '06-readonly-kv-keys');
      assert.deepEqual(b.errors, []);
    } finally {
      await b.close();
    }
  });
});

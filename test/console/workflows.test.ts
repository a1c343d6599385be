/**
 * The console's workflow pages in a real browser: runs served by `@upstash/workflow`'s `serve`
 * against a real svc. A run whose step fails lands in the DLQ, is resumed from the console's
 * "Failed runs" page and completes without re-running its finished step; a sleeping run is
 * cancelled from its page; the timeline shows parallel branches; step outputs holding HTML stay
 * text; no page logs a JavaScript error.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Client as WorkflowClient } from '@upstash/workflow';
import { startTestSvc } from '../helpers/env.js';
import { waitFor } from '../queue/helpers.js';
import { startWorkflowApp, type WorkflowApp } from '../queue/workflow-helpers.js';
import { launchBrowser, screenshot, signIn, type ConsoleBrowser } from './browser.js';
import { workflowEnv, XSS } from './helpers.js';

type Svc = Awaited<ReturnType<typeof startTestSvc>>;
type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

describe('console: workflow pages', () => {
  let svc: Svc;
  let app: WorkflowApp;
  let wf: WorkflowClient;
  let b: ConsoleBrowser;
  let broken = true;
  const ran = new Map<string, number>();
  const bump = (k: string) => ran.set(k, (ran.get(k) ?? 0) + 1);

  const runLog = async (workflowRunId: string): Promise<Json | undefined> => {
    const { runs } = (await wf.logs({ workflowRunId } as never)) as unknown as { runs: Json[] };
    return runs.find((r) => r.workflowRunId === workflowRunId);
  };
  const waitState = (id: string, state: string) => waitFor(`run ${id} ${state}`, async () => (await runLog(id))?.workflowState === state, 60_000);

  before(async () => {
    svc = await startTestSvc(['queue', 'mgmt']);
    const token = svc.ctx.credentials.get('queue.token');
    app = await startWorkflowApp(
      workflowEnv(svc),
      {
        '/flaky': [
          async (ctx) => {
            const tag = (ctx.requestPayload as { tag: string }).tag;
            await ctx.run('fetch', () => (bump(`${tag}:fetch`), XSS[1]));
            await ctx.run('charge', () => {
              bump(`${tag}:charge`);
              if (broken) throw new Error(`charge failed ${XSS[0]}`);
              return 'charged';
            });
            await Promise.all([ctx.run('email', () => 'sent'), ctx.run('audit', () => 'logged')]);
            return 'done';
          },
          {},
        ],
        '/sleeper': [
          async (ctx) => {
            await ctx.run('before', () => 'x');
            await ctx.sleep('nap', 3600);
            await ctx.run('after', () => 'y');
          },
          {},
        ],
      },
    );
    wf = new WorkflowClient({ baseUrl: svc.urls.queue!, token });
    b = await launchBrowser();
    await signIn(b.page, svc);
  });
  after(async () => {
    await b?.close();
    await app?.close();
    await svc?.close();
  });

  test('a failed run is resumed from the console and completes', async () => {
    const { page } = b;
    const { workflowRunId } = await wf.trigger({ url: `${app.url}/flaky`, body: { tag: 'r1' }, retries: 0 });
    await waitState(workflowRunId, 'RUN_FAILED');
    await page.goto(`${svc.urls.mgmt}/console/#/workflows/failed`);
    const row = page.locator(`tr[data-failed="${workflowRunId}"]`);
    await row.waitFor();
    await screenshot(page, '20-workflows-failed');
    broken = false;
    await row.locator('[data-resume]').click();
    await page.click('[data-confirm]');
    await page.locator('.notice.ok', { hasText: 'Resumed' }).waitFor();
    await waitState(workflowRunId, 'RUN_SUCCESS');
    assert.equal(ran.get('r1:fetch'), 1, 'the finished step is not run again');
    assert.equal(ran.get('r1:charge'), 2);

    await page.goto(`${svc.urls.mgmt}/console/#/workflows/runs?state=RUN_SUCCESS`);
    await page.locator(`tr[data-run="${workflowRunId}"]`).click();
    await page.locator('[data-timeline] [data-parallel]').waitFor();
    assert.equal(await page.locator('[data-parallel] .step').count(), 2, 'parallel branches side by side');
    assert.ok(((await page.textContent('[data-timeline]')) ?? '').includes(XSS[1]), 'step output shown as text');
    assert.equal(await page.locator('img[src=x]').count(), 0);
    await screenshot(page, '21-workflow-run');
    assert.deepEqual(b.errors, []);
  });

  test('failed runs restarted and deleted from the console', async () => {
    const { page } = b;
    broken = true;
    const { workflowRunId: toRestart } = await wf.trigger({ url: `${app.url}/flaky`, body: { tag: 'r2' }, retries: 0 });
    const { workflowRunId: toDelete } = await wf.trigger({ url: `${app.url}/flaky`, body: { tag: 'r3' }, retries: 0 });
    await waitState(toRestart, 'RUN_FAILED');
    await waitState(toDelete, 'RUN_FAILED');
    await page.goto(`${svc.urls.mgmt}/console/#/workflows/failed`);
    await page.locator(`tr[data-failed="${toDelete}"] [data-delete]`).click();
    await page.click('[data-confirm]');
    await page.locator('.notice.ok', { hasText: 'Deleted' }).waitFor();
    await waitFor('row gone', async () => (await page.locator(`tr[data-failed="${toDelete}"]`).count()) === 0, 15_000);
    broken = false;
    await page.locator(`tr[data-failed="${toRestart}"] [data-restart]`).click();
    await page.click('[data-confirm]');
    const note = await page.locator('.notice.ok', { hasText: 'Restarted' }).textContent();
    const newRun = /run (\S+)\./.exec(note ?? '')?.[1];
    assert.ok(newRun, note ?? '');
    await waitState(newRun, 'RUN_SUCCESS');
    assert.equal(ran.get('r2:fetch'), 2, 'a restart runs the first step again');
    const { messages } = (await wf.dlq.list()) as unknown as { messages: Json[] };
    assert.deepEqual(messages.filter((m) => [toRestart, toDelete].includes(m.workflowRunId)), []);
    assert.deepEqual(b.errors, []);
  });

  test('a sleeping run is cancelled from its page', async () => {
    const { page } = b;
    const { workflowRunId } = await wf.trigger({ url: `${app.url}/sleeper`, body: {} });
    await waitFor('sleep step', async () => ((await runLog(workflowRunId))?.steps ?? []).length >= 2, 30_000);
    await page.goto(`${svc.urls.mgmt}/console/#/workflows/runs?state=RUN_STARTED`);
    await page.locator(`tr[data-run="${workflowRunId}"]`).click();
    await page.click('[data-cancel]');
    await page.click('[data-confirm]');
    await waitState(workflowRunId, 'RUN_CANCELED');
    await page.goto(`${svc.urls.mgmt}/console/#/workflows/runs`);
    await page.locator('table[data-table=runs] tbody tr').nth(1).waitFor();
    await screenshot(page, '22-workflows-runs');
    assert.deepEqual(b.errors, []);
  });
});

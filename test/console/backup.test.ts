/**
 * The console's overview shows the last backup of this svc process (`/console/api/overview`
 * `backup`): none yet, then the time, size and directory of a successful one, then a failed one
 * with its error. Real chromium against a real svc; backups through `POST /v2/backup`.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { startTestSvc, tempDir } from '../helpers/env.js';
import { postBackup } from '../ops/backup-helpers.js';
import { launchBrowser, screenshot, signIn } from './browser.js';

test('console overview: the last backup, successful or failed', { timeout: 240_000 }, async () => {
  const tmp = tempDir('svc-console-backup-');
  const svc = await startTestSvc(['queue', 'kv', 'vector', 'mgmt'], { env: { SVC_VECTOR_DIMENSION: '3' } });
  const b = await launchBrowser();
  try {
    const creds = { 'mgmt.user': svc.ctx.credentials.get('mgmt.user'), 'mgmt.password': svc.ctx.credentials.get('mgmt.password') };
    await signIn(b.page, svc);
    const stat = b.page.locator('[data-stat=backup] .stat');
    const show = async () => {
      await b.page.goto(`${svc.urls.mgmt}/console/#/overview`);
      await b.page.reload();
      await stat.waitFor({ timeout: 30_000 });
      return (await stat.innerText()).replace(/\s+/g, ' ');
    };
    assert.match(await show(), /Last backup None yet/i);

    const dir = path.join(tmp.dir, 'b1');
    assert.equal((await postBackup(svc.urls.mgmt!, creds, { dir })).status, 200);
    const ok = await show();
    assert.match(ok, /Last backup \d+s ago/i);
    assert.ok(ok.includes(dir), ok);
    await screenshot(b.page, '90-overview-backup');

    // a backup whose directory cannot be created (its parent is a file)
    fs.writeFileSync(path.join(tmp.dir, 'file'), '');
    assert.equal((await postBackup(svc.urls.mgmt!, creds, { dir: path.join(tmp.dir, 'file', 'b2') })).status, 500);
    assert.match(await show(), /Last backup Failed .*(EEXIST|ENOTDIR)/i);
    assert.deepEqual(b.errors, []);
  } finally {
    await b.close();
    await svc.close();
    tmp.cleanup();
  }
});

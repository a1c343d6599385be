/**
 * A real browser for the console tests: the system's Debian `chromium` (installed by
 * `scripts/install-deps.sh`; never downloaded) driven through `playwright-core`, headless, with a
 * fresh profile directory per launch. Every page records its JavaScript errors (console `error`
 * messages and uncaught exceptions) so tests can assert there are none; screenshots go to the
 * git-ignored `test-artifacts/console/`.
 */
import fs from 'node:fs';
import path from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import type { RunningSvc } from '../../src/main.js';
import { tempDir } from '../helpers/env.js';

/** Where the browser lives (Debian's package). */
export const CHROMIUM = process.env.SVC_TEST_CHROMIUM ?? '/usr/bin/chromium';
/** Screenshots of every page, for people to look at (`.gitignore`d). */
export const SCREENSHOT_DIR = path.resolve('test-artifacts/console');

export interface ConsoleBrowser {
  browser: Browser;
  context: BrowserContext;
  page: Page;
  /** JavaScript errors seen so far on `page` (console.error and uncaught exceptions). */
  errors: string[];
  close(): Promise<void>;
}

/** Launches chromium with a fresh profile and opens one page with error recording. */
export async function launchBrowser(): Promise<ConsoleBrowser> {
  const profile = tempDir('svc-chromium-');
  const context = await chromium.launchPersistentContext(profile.dir, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
    viewport: { width: 1360, height: 860 },
  });
  const page = context.pages()[0] ?? (await context.newPage());
  const errors: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(`console.error: ${m.text()}`);
  });
  page.on('pageerror', (e) => errors.push(`uncaught: ${e.message}`));
  return {
    browser: context.browser()!,
    context,
    page,
    errors,
    async close() {
      await context.close();
      profile.cleanup();
    },
  };
}

/** Saves a full-page screenshot as `<name>.png` under {@link SCREENSHOT_DIR}. */
export async function screenshot(page: Page, name: string): Promise<void> {
  fs.mkdirSync(SCREENSHOT_DIR, { recursive: true });
  await page.screenshot({ path: path.join(SCREENSHOT_DIR, `${name}.png`), fullPage: true });
}

/** Signs in through the form with the svc's management account and waits for the shell. */
export async function signIn(page: Page, svc: RunningSvc): Promise<void> {
  await page.goto(`${svc.urls.mgmt}/console/`);
  await page.fill('input[name=user]', svc.ctx.credentials.get('mgmt.user'));
  await page.fill('input[name=password]', svc.ctx.credentials.get('mgmt.password'));
  await page.click('button[type=submit]');
  await page.waitForSelector('aside.side');
}

/**
 * Web console first-render bench: fills a queue store with `--messages` (default 1,000,000)
 * delayed messages (one CREATED event each) plus `--dlq` (default 1,000) dead-lettered ones, starts
 * svc on it (in process, every area), signs in with chromium (playwright-core, `/usr/bin/chromium`)
 * and times each page from navigation until its main table or panel is drawn, and each API call
 * those pages make. Prints a markdown report (`--out <file>` writes it there).
 *
 *   npm run bench:console -- --messages 1000000
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { chromium } from 'playwright-core';
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/logger.js';
import { createContext, startSvc } from '../src/main.js';
import { buildMessage } from '../src/queue/build.js';
import { openSqliteQueueStore } from '../src/queue/store/sqlite.js';
import { requirePrograms } from './lib/needs.js';
import { adoptTempDir, onCleanup } from './lib/proc.js';

function arg(name: string, def: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : def;
}
const outIdx = process.argv.indexOf('--out');
const OUT = outIdx >= 0 ? process.argv[outIdx + 1] : undefined;
const MESSAGES = arg('messages', 1_000_000);
const DLQ = arg('dlq', 1_000);
const RUNS = arg('runs', 3);

async function fill(dir: string): Promise<number> {
  const store = openSqliteQueueStore(path.join(dir, 'queue.sqlite'), 'everysec');
  const t = Date.now();
  const body = Buffer.from(JSON.stringify({ hello: 'world' }));
  const t0 = performance.now();
  for (let i = 0; i < MESSAGES; i += 10_000) {
    const batch = Array.from({ length: Math.min(10_000, MESSAGES - i) }, (_, k) =>
      buildMessage({ method: 'POST', headers: { 'Content-Type': ['application/json'] }, maxRetries: 3, delayMs: 86_400_000 + i + k }, { url: `http://127.0.0.1:9/delayed/${(i + k) % 1000}` }, body, t),
    );
    await store.enqueue(batch, t, 0);
  }
  // dead-lettered messages: due now, claimed and failed for the last time
  const owner = 'bench';
  const dead = Array.from({ length: DLQ }, (_, k) => buildMessage({ method: 'POST', headers: {}, maxRetries: 0 }, { url: `http://127.0.0.1:9/dead/${k % 10}` }, body, t));
  await store.enqueue(dead, t, 0);
  let n = 0;
  while (n < DLQ) {
    const claimed = await store.claimDue({ now: Date.now(), limit: 500, owner, leaseUntil: Date.now() + 60_000 });
    if (!claimed.length) break;
    for (const m of claimed) await store.moveToDlq(m.id, owner, Date.now(), { status: 500, error: 'HTTP 500', body: Buffer.from('broken') }, `${Date.now()}-${n++}`, []);
  }
  await store.close();
  return performance.now() - t0;
}

async function main(): Promise<void> {
  requirePrograms('bench:console', [{ cmd: '/usr/bin/chromium', pkg: 'chromium' }]);
  const dir = adoptTempDir(fs.mkdtempSync(path.join(os.tmpdir(), 'svc-bench-console-')));
  try {
    const fillMs = await fill(dir);
    const config = loadConfig({ SVC_HOST: '127.0.0.1', SVC_QUEUE_PORT: '0', SVC_KV_PORT: '0', SVC_VECTOR_PORT: '0', SVC_MGMT_PORT: '0', SVC_DATA_DIR: dir, SVC_LOG_LEVEL: 'warn', SVC_VECTOR_DIMENSION: '3' });
    const svc = await startSvc(createContext(config, { logger: createLogger('warn'), env: {} }));
    onCleanup(() => svc.close()); // Ctrl-C: svc (in this process) stops its redis-server first
    const profile = adoptTempDir(fs.mkdtempSync(path.join(os.tmpdir(), 'svc-bench-chromium-')));
    const context = await chromium.launchPersistentContext(profile, {
      executablePath: '/usr/bin/chromium',
      headless: true,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
      viewport: { width: 1360, height: 860 },
    });
    onCleanup(() => context.close());
    const rows: string[] = [];
    const calls = new Map<string, number[]>();
    try {
      const page = context.pages()[0] ?? (await context.newPage());
      page.on('requestfinished', (r) => {
        const u = new URL(r.url());
        if (!u.pathname.startsWith('/console/api/')) return;
        const t = r.timing();
        const key = `${r.method()} ${u.pathname.replace(/\/console\/api\//, '')}`;
        if (!calls.has(key)) calls.set(key, []);
        calls.get(key)!.push(t.responseEnd);
      });
      await page.goto(`${svc.urls.mgmt}/console/`);
      await page.fill('input[name=user]', svc.ctx.credentials.get('mgmt.user'));
      await page.fill('input[name=password]', svc.ctx.credentials.get('mgmt.password'));
      await page.click('button[type=submit]');
      await page.waitForSelector('aside.side');
      const pages: [string, string][] = [
        ['#/overview', '[data-state=ready]'],
        ['#/queue/logs', 'table[data-table=logs] tbody tr'],
        ['#/queue/logs?url=http%3A%2F%2F127.0.0.1%3A9%2Fdelayed%2F7', 'table[data-table=logs] tbody tr'],
        ['#/queue/logs?state=FAILED', 'table[data-table=logs] tbody tr'],
        ['#/queue/dlq', 'table[data-table=dlq] tbody tr'],
        ['#/queue/schedules', '.card .empty, table[data-table=schedules]'],
        ['#/workflows/runs', '.card .empty, table[data-table=runs]'],
        ['#/kv/keys', '.card .empty, table[data-table=keys]'],
        ['#/vector', 'table[data-table=namespaces]'],
      ];
      for (const [hash, selector] of pages) {
        const times: number[] = [];
        for (let i = 0; i < RUNS; i++) {
          await page.goto('about:blank');
          const t0 = performance.now();
          await page.goto(`${svc.urls.mgmt}/console/${hash}`);
          await page.locator(selector).first().waitFor({ timeout: 60_000 });
          times.push(performance.now() - t0);
        }
        times.sort((a, b) => a - b);
        rows.push(`| \`${hash}\` | ${times[Math.floor(times.length / 2)].toFixed(0)} | ${times[times.length - 1].toFixed(0)} |`);
      }
    } finally {
      await context.close();
      fs.rmSync(profile, { recursive: true, force: true });
      await svc.close();
    }
    const api = [...calls].map(([k, v]) => {
      v.sort((a, b) => a - b);
      return `| \`${k}\` | ${v.length} | ${v[Math.floor(v.length / 2)].toFixed(0)} | ${v[v.length - 1].toFixed(0)} |`;
    });
    const report = [
      `### Console first render, ${MESSAGES.toLocaleString('en-US')} waiting messages + ${DLQ.toLocaleString('en-US')} in the DLQ (${new Date().toISOString().slice(0, 10)}, ${os.cpus().length} CPUs)`,
      '',
      `Store filled in ${(fillMs / 1000).toFixed(1)} s. Each page loaded ${RUNS} times from a blank tab (full page load: HTML, scripts, API calls, render) until its main table or panel shows.`,
      '',
      '| page | median ms | max ms |',
      '| --- | --- | --- |',
      ...rows,
      '',
      'API calls made by those pages (browser-side time to the last response byte):',
      '',
      '| call | n | median ms | max ms |',
      '| --- | --- | --- | --- |',
      ...api,
      '',
    ].join('\n');
    if (OUT) fs.writeFileSync(OUT, report);
    process.stdout.write(report);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

await main();

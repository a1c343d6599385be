/**
 * A PostgreSQL outage does not flood the log: svc (its own process, queue on a throw-away
 * PostgreSQL cluster) gets 300 requests while the database is down — publishes on the fast front
 * and log reads on Fastify — and answers each 503; its log holds one error line per kind of
 * failure and then summaries with `repeated` counts, which add up to every refused request
 * (one line per refused request before).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startTestPostgres } from '../helpers/postgres.js';
import { waitFor } from '../helpers/wait.js';
import { spawnSvc } from '../mgmt/helpers.js';

test('300 requests refused during a PostgreSQL outage: a few error lines whose counts add up to 300, not 300 lines', async () => {
  const pg = await startTestPostgres({ own: true });
  const svc = await spawnSvc(['queue'], { SVC_QUEUE_DATABASE_URL: await pg.newDatabase(), SVC_LOG_LEVEL: 'error' });
  try {
    const token = svc.credentials()['queue.token'];
    const auth = { authorization: `Bearer ${token}` };
    assert.equal((await fetch(`${svc.urls.queue}/v2/logs`, { headers: auth })).status, 200);
    pg.kill();
    const statuses = new Map<number, number>();
    for (let i = 0; i < 150; i++) {
      for (const r of await Promise.all([
        fetch(`${svc.urls.queue}/v2/publish/http://127.0.0.1:9/x`, { method: 'POST', headers: auth, body: 'x' }),
        fetch(`${svc.urls.queue}/v2/logs`, { headers: auth }),
      ])) {
        await r.arrayBuffer();
        statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
      }
    }
    assert.deepEqual([...statuses], [[503, 300]]);
    const failures = () =>
      svc
        .output()
        .split('\n')
        .filter((l) => l.includes('"queue: request failed'))
        .map((l) => JSON.parse(l) as { repeated?: number });
    // the summaries come at the end of each 10 s interval
    const lines = await waitFor('every refused request accounted for', () => {
      const ls = failures();
      return ls.reduce((n, l) => n + (l.repeated ?? 1), 0) === 300 ? ls : undefined;
    }, 60_000);
    console.log(`# ${lines.length} error lines for 300 refused requests${lines.length <= 10 ? `: ${lines.map((l) => l.repeated ?? 1).join(' + ')}` : ''}`);
    assert.ok(lines.length <= 10, `${lines.length} lines`);
  } finally {
    await svc.close();
    await pg.stop();
  }
});

/**
 * `GET /v2/logs`, `/v2/events`, `/v2/dlq` pages are bounded by bytes as well as by count
 * (`SVC_QUEUE_MAX_PAGE_BYTES`): with messages of 900 KB a page holds only a few entries, the
 * cursor continues where the page stopped, and following it yields every entry exactly once — the
 * same entries a count-only listing gives. Through @upstash/qstash and raw HTTP.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startQueue, startSink, waitFor, type Sink } from './helpers.js';

const BODY = 900 * 1024;
const N = 8;
const MAX_PAGE = 2 * 1024 * 1024;

describe('page byte bound', () => {
  let sink: Sink;
  let q: Awaited<ReturnType<typeof startQueue>>;
  const ids: string[] = [];
  before(async () => {
    sink = await startSink((r) => (r.url.startsWith('/fail') ? { status: 500, body: 'e'.repeat(200 * 1024) } : undefined));
    q = await startQueue({ SVC_QUEUE_MAX_PAGE_BYTES: String(MAX_PAGE) });
    for (let i = 0; i < N; i++) {
      const body = String(i).repeat(BODY);
      ids.push((await q.client.publish({ url: `${sink.url}/${i % 2 ? 'fail' : 'ok'}${i}`, body, retries: 0 })).messageId);
    }
    await waitFor('every delivery attempted', () => sink.requests.length === N, 60_000);
    await waitFor('DLQ filled', async () => {
      let n = 0;
      let cursor: string | undefined;
      do {
        const page = await q.client.dlq.listMessages({ cursor } as never);
        n += page.messages.length;
        cursor = page.cursor;
      } while (cursor);
      return n === N / 2;
    }, 60_000);
  });
  after(async () => {
    await q.close();
    await sink.close();
  });

  /** Follows the cursor of `path` (raw HTTP); returns every page's entries and its JSON size. */
  async function pages(path: string, field: string): Promise<{ entries: Record<string, unknown>[]; sizes: number[]; counts: number[] }> {
    const entries: Record<string, unknown>[] = [];
    const sizes: number[] = [];
    const counts: number[] = [];
    let cursor: string | undefined;
    for (let guard = 0; guard < 500; guard++) {
      const res = await q.api(`${path}${path.includes('?') ? '&' : '?'}${cursor ? `cursor=${cursor}` : ''}`);
      const text = await res.text();
      assert.equal(res.status, 200, text);
      const page = JSON.parse(text) as Record<string, unknown>;
      const list = page[field] as Record<string, unknown>[];
      entries.push(...list);
      sizes.push(Buffer.byteLength(text));
      counts.push(list.length);
      cursor = page.cursor as string | undefined;
      if (!cursor) return { entries, sizes, counts };
    }
    throw new Error('cursor never ended');
  }

  test('logs and events: pages stay within the byte bound and the cursor visits every entry once', async () => {
    for (const [path, field] of [['/v2/logs', 'logs'], ['/v2/events', 'events']] as const) {
      const { entries, sizes, counts } = await pages(path, field);
      // each entry carries a 900 KB body (1.2 MB as base64): at most 2 per page, never 100
      assert.ok(Math.max(...counts) <= 3, `${path} counts ${counts}`);
      // bodies are bounded at 2 MiB raw; base64 and the rest of the entry add about a third
      for (const s of sizes) assert.ok(s < MAX_PAGE * 1.5 + BODY * 1.5, `${path} page of ${s} bytes`);
      const keys = entries.map((e) => `${e.messageId}/${e.state}/${e.time}`);
      assert.equal(new Set(keys).size, keys.length, 'no entry twice');
      for (const id of ids) assert.ok(entries.some((e) => e.messageId === id && e.state === 'CREATED'), `${id} CREATED listed`);
      assert.ok(entries.length >= N * 3, `${entries.length} entries`);
    }
  });

  test('DLQ through the SDK: small pages, every entry once', async () => {
    const seen: string[] = [];
    let cursor: string | undefined;
    let pagesSeen = 0;
    do {
      const page = await q.client.dlq.listMessages({ cursor } as never);
      assert.ok(page.messages.length <= 2, `page of ${page.messages.length}`);
      seen.push(...page.messages.map((m) => m.messageId));
      cursor = page.cursor;
      pagesSeen++;
    } while (cursor);
    assert.ok(pagesSeen >= 2, `${pagesSeen} pages`);
    assert.deepEqual([...seen].sort(), ids.filter((_, i) => i % 2).sort());
  });

  test('the count bound still holds for small entries', async () => {
    const { counts } = await pages('/v2/logs?count=1', 'logs');
    assert.ok(counts.every((c) => c === 1), String(counts));
  });
});

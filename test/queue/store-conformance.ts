/**
 * The QueueStore conformance suite: every durable operation of the queue (messages, leases,
 * retries, DLQ, logs, dedup, cancel, URL groups, queues, flow control and admission, schedules,
 * workflow runs, steps and waiters) against one store implementation. `store.test.ts` runs it for
 * each backend; a backend is a factory of fresh, empty stores on real storage (no mocks).
 */
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { buildMessage } from '../../src/queue/build.js';
import type { NewMessage } from '../../src/queue/model.js';
import type { FlowControlStore, QueueAdmissionStore, ScheduleStore, UrlGroupEndpoint, UrlGroupStore } from '../../src/queue/store/resource-types.js';
import type { QueueStore } from '../../src/queue/store/types.js';

/**
 * A fresh empty store; `reopen` opens the same storage again after `store.close()` (for a store
 * shared by several nodes, also while it is open: another node).
 */
export interface StoreUnderTest {
  store: QueueStore;
  reopen(): Promise<QueueStore>;
  cleanup(): void | Promise<void>;
}

const T0 = 1_700_000_000_000;

function msg(url: string, over: Partial<NewMessage> = {}): NewMessage {
  return { ...buildMessage({ method: 'POST', headers: { 'Content-Type': ['text/plain'] }, maxRetries: 2 }, { url }, Buffer.from('hi'), T0), ...over };
}

/** The four resource parts of `store` as one object (the cases below call across them). */
function resources(store: QueueStore): UrlGroupStore & QueueAdmissionStore & FlowControlStore & ScheduleStore {
  const parts = [store.urlGroups(), store.queues(), store.flowControl(), store.schedules()] as unknown as Record<PropertyKey, unknown>[];
  return new Proxy({} as UrlGroupStore & QueueAdmissionStore & FlowControlStore & ScheduleStore, {
    get(_t, prop) {
      const part = parts.find((p) => typeof p[prop] === 'function');
      return part ? (part[prop] as (...a: unknown[]) => unknown).bind(part) : undefined;
    },
  });
}

/** Registers the conformance tests for one backend. */
export function storeConformance(name: string, factory: () => Promise<StoreUnderTest>): void {
  describe(`QueueStore conformance: ${name}`, () => {
    const cleanups: (() => void | Promise<void>)[] = [];
    after(async () => {
      for (const c of cleanups) await c();
    });
    const open = async () => {
      const f = await factory();
      cleanups.push(f.cleanup);
      return f;
    };

    test('concurrent enqueues: one that fails (a duplicate message id) fails alone, the others commit', async () => {
      const { store } = await open();
      const first = msg('http://a.test/first');
      await store.enqueue([first], T0, 0);
      const ok1 = msg('http://a.test/ok1');
      const ok2 = msg('http://a.test/ok2');
      const results = await Promise.allSettled([
        store.enqueue([ok1], T0, 0),
        store.enqueue([{ ...msg('http://a.test/dup'), id: first.id }], T0, 0),
        store.enqueue([ok2], T0, 0),
      ]);
      assert.deepEqual(results.map((r) => r.status), ['fulfilled', 'rejected', 'fulfilled']);
      for (const m of [first, ok1, ok2]) assert.equal((await store.getMessage(m.id))?.url, m.url);
      await store.close();
    });

    test('enqueue, claim in due order, complete; owner and lease rules', async () => {
      const { store } = await open();
      for (const o of ['w1', 'w2', 'w3']) await store.holdOwner?.(o);
      const a = msg('http://a.test/1', { dueAt: T0 + 20 });
      const b = msg('http://a.test/2', { dueAt: T0 + 10 });
      const c = msg('http://a.test/3', { dueAt: T0 + 10_000 });
      await store.enqueue([a, b, c], T0, 60_000);
      assert.equal(await store.nextDueAt(), T0 + 10);
      const claimed = await store.claimDue({ owner: 'w1', now: T0 + 100, limit: 10, leaseUntil: T0 + 5000 });
      assert.deepEqual(claimed.map((m) => m.id), [b.id, a.id]);
      assert.equal(await store.nextDueAt(), T0 + 10_000, 'claimed messages leave the due index');
      assert.equal((await store.claimDue({ owner: 'w2', now: T0 + 100, limit: 10, leaseUntil: T0 + 5000 })).length, 0);
      assert.equal(await store.complete(b.id, 'w2', T0 + 200, { status: 200 }, []), false, 'only the owner completes');
      assert.equal(await store.complete(b.id, 'w1', T0 + 200, { status: 200 }, []), true);
      assert.equal(await store.getMessage(b.id), undefined, 'delivered messages are not pending');
      assert.equal(await store.releaseLeases(T0 + 4000), 0);
      assert.equal(await store.releaseLeases(T0 + 6000), 1, 'expired lease of a is released');
      const again = await store.claimDue({ owner: 'w3', now: T0 + 6000, limit: 10, leaseUntil: T0 + 9000 });
      assert.deepEqual(again.map((m) => m.id), [a.id]);
      await store.close();
    });

    test('message fields round-trip; claims skip excluded origins; followUps are enqueued', async () => {
      const { store } = await open();
      const full = msg('http://f.test:8080/p?q=1', {
        headers: { 'Content-Type': ['application/json'], 'X-Multi': ['a', 'b'] },
        body: Buffer.from([0, 1, 2, 255]),
        notBefore: T0,
        retryDelay: '1000 * retried',
        timeoutMs: 5000,
        callback: 'http://cb.test/',
        callbackOptions: { method: 'PUT', headers: { A: ['1'] }, maxRetries: 1 },
        failureCallback: 'http://fcb.test/',
        callerIp: '10.0.0.1',
        labels: ['x', 'y'],
        topicName: 't',
        endpointName: 'e',
        scheduleId: 's',
        workflow: { runSeq: 1, runId: 'wfr_1', createdAt: T0, url: 'http://f.test:8080/p', initialBody: 'e30=' },
      });
      const other = msg('http://g.test/');
      await store.enqueue([full, other], T0, 0);
      const got = await store.getMessage(full.id);
      assert.ok(got);
      for (const k of ['url', 'method', 'headers', 'body', 'createdAt', 'notBefore', 'dueAt', 'maxRetries', 'retryDelay', 'timeoutMs', 'callback', 'callbackOptions', 'failureCallback', 'callerIp', 'labels', 'topicName', 'endpointName', 'scheduleId', 'workflow'] as const) {
        assert.deepEqual(got[k], full[k], k);
      }
      assert.equal(got.status, 'pending');
      assert.equal(got.retried, 0);
      assert.equal(got.cancelRequested, false);
      const claimed = await store.claimDue({ owner: 'w', now: T0, limit: 10, leaseUntil: T0 + 1000, excludeOrigins: ['http://f.test:8080'] });
      assert.deepEqual(claimed.map((m) => m.id), [other.id]);
      const cb = msg('http://cb.test/');
      assert.equal(await store.complete(other.id, 'w', T0 + 1, { status: 200 }, [cb]), true);
      assert.ok(await store.getMessage(cb.id), 'callback stored with the completion');
      await store.close();
    });

    test('reschedule counts retries; moveToDlq keeps response; DLQ list/get/delete/retry', async () => {
      const { store } = await open();
      const a = msg('http://b.test/x', { dueAt: T0, labels: ['l1'] });
      await store.enqueue([a], T0, 60_000);
      await store.claimDue({ owner: 'w', now: T0, limit: 1, leaseUntil: T0 + 1000 });
      assert.equal(await store.reschedule(a.id, 'w', T0 + 1, { status: 500, error: 'boom' }, T0 + 50, []), true);
      const [m] = await store.claimDue({ owner: 'w', now: T0 + 60, limit: 1, leaseUntil: T0 + 1000 });
      assert.equal(m.retried, 1);
      const outcome = { status: 500, headers: { 'X-A': ['1'] }, body: Buffer.from([0xff, 0x00]), error: 'boom' };
      assert.equal(await store.moveToDlq(a.id, 'w', T0 + 70, outcome, `${T0 + 70}-${m.seq}`, []), true);
      const page = await store.listDlq({ label: ['l1'] }, { count: 10, order: 'latestFirst' });
      assert.equal(page.items.length, 1);
      assert.equal(page.cursor, undefined);
      assert.deepEqual(page.items[0].outcome.body, outcome.body);
      assert.equal(page.items[0].outcome.status, 500);
      assert.deepEqual(page.items[0].outcome.headers, outcome.headers);
      assert.equal((await store.listDlq({ label: ['other'] }, { count: 10, order: 'latestFirst' })).items.length, 0);
      assert.equal((await store.listDlq({ responseStatus: [500], url: [a.url] }, { count: 10, order: 'latestFirst' })).items.length, 1);
      const dlqId = page.items[0].dlqId;
      assert.ok(await store.getDlq(dlqId));
      const r = await store.retryDlq({ dlqIds: [dlqId] }, 1, T0 + 100, (e) => msg(e.message.url, { dueAt: T0 + 100 }));
      assert.equal(r.messageIds.length, 1);
      assert.equal(await store.getDlq(dlqId), undefined, 'retried entries leave the DLQ');
      assert.ok(await store.getMessage(r.messageIds[0]));
      assert.equal((await store.deleteDlq({ dlqIds: [dlqId] }, 1)).deleted, 0);
      const logs = await store.listLogs({ messageIds: [a.id] }, { count: 100, order: 'earliestFirst' });
      assert.deepEqual(logs.items.map((l) => l.state), ['CREATED', 'ACTIVE', 'ERROR', 'RETRY', 'ACTIVE', 'ERROR', 'FAILED']);
      assert.equal(logs.items[2].nextDeliveryTime, T0 + 50);
      assert.equal(logs.items[2].outcome?.status, 500);
      await store.close();
    });

    test('DLQ and logs paging: cursors both ways, filters, delete by filter in batches', async () => {
      const { store } = await open();
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) {
        const m = msg(`http://p.test/${i}`, { dueAt: T0, maxRetries: 0 });
        await store.enqueue([m], T0, 0);
        const [c] = await store.claimDue({ owner: 'w', now: T0, limit: 1, leaseUntil: T0 + 1000 });
        await store.moveToDlq(c.id, 'w', T0 + i, { status: 400 + i }, `dlq-${i}`, []);
        ids.push(`dlq-${i}`);
      }
      const seen: string[] = [];
      let cursor: string | undefined;
      do {
        const p = await store.listDlq({}, { count: 2, order: 'earliestFirst', cursor });
        seen.push(...p.items.map((e) => e.dlqId));
        cursor = p.cursor;
      } while (cursor);
      assert.deepEqual(seen, ids);
      const latest = await store.listDlq({}, { count: 2, order: 'latestFirst' });
      assert.deepEqual(latest.items.map((e) => e.dlqId), ['dlq-4', 'dlq-3']);
      assert.ok(latest.cursor);
      assert.deepEqual((await store.listDlq({ fromDate: T0 + 3 }, { count: 10, order: 'earliestFirst' })).items.map((e) => e.dlqId), ['dlq-3', 'dlq-4']);
      assert.deepEqual((await store.listDlq({ responseStatus: [401, 402] }, { count: 10, order: 'earliestFirst' })).items.map((e) => e.dlqId), ['dlq-1', 'dlq-2']);
      const d1 = await store.deleteDlq({}, 3);
      assert.deepEqual(d1, { deleted: 3, more: true });
      const d2 = await store.deleteDlq({}, 3);
      assert.deepEqual(d2, { deleted: 2, more: false });
      const logs = await store.listLogs({ state: ['FAILED'] }, { count: 3, order: 'latestFirst' });
      assert.equal(logs.items.length, 3);
      assert.ok(logs.cursor);
      const rest = await store.listLogs({ state: ['FAILED'] }, { count: 3, order: 'latestFirst', cursor: logs.cursor });
      assert.equal(rest.items.length, 2);
      assert.equal(rest.cursor, undefined);
      await store.close();
    });

    test('DLQ and logs pages bounded by bytes (Page.maxBytes): at least one entry, the cursor continues', async () => {
      const { store } = await open();
      const body = Buffer.alloc(1000, 'b');
      for (let i = 0; i < 5; i++) {
        const m = { ...msg(`http://bytes.test/${i}`, { dueAt: T0, maxRetries: 0 }), body };
        await store.enqueue([m], T0, 0);
        const [c] = await store.claimDue({ owner: 'w', now: T0, limit: 1, leaseUntil: T0 + 1000 });
        await store.moveToDlq(c.id, 'w', T0 + i, { status: 500, body: Buffer.alloc(500) }, `bytes-${i}`, []);
      }
      const dlqSizes: number[] = [];
      const seen: string[] = [];
      let cursor: string | undefined;
      do {
        // each entry: 1000 body + 500 response bytes; 3100 holds two
        const p = await store.listDlq({}, { count: 100, order: 'earliestFirst', cursor, maxBytes: 3100 });
        dlqSizes.push(p.items.length);
        seen.push(...p.items.map((e) => e.dlqId));
        cursor = p.cursor;
      } while (cursor);
      assert.deepEqual(dlqSizes, [2, 2, 1]);
      assert.deepEqual(seen, [0, 1, 2, 3, 4].map((i) => `bytes-${i}`));
      const one = await store.listDlq({}, { count: 100, order: 'latestFirst', maxBytes: 10 });
      assert.equal(one.items.length, 1, 'a page holds at least one entry');
      assert.ok(one.cursor);
      const logSizes: number[] = [];
      const states: string[] = [];
      cursor = undefined;
      do {
        const p = await store.listLogs({ url: ['http://bytes.test/0'] }, { count: 100, order: 'earliestFirst', cursor, maxBytes: 2500 });
        logSizes.push(p.items.length);
        states.push(...p.items.map((l) => l.state));
        cursor = p.cursor;
      } while (cursor);
      assert.deepEqual(states, ['CREATED', 'ACTIVE', 'ERROR', 'FAILED']);
      assert.ok(Math.max(...logSizes) <= 2, String(logSizes));
      await store.close();
    });

    test('dedup within the window; cancel pending and in-flight', async () => {
      const { store } = await open();
      const a = msg('http://c.test/', { dedupKey: 'id:k1' });
      const b = msg('http://c.test/', { dedupKey: 'id:k1' });
      const [ra, rb] = await store.enqueue([a, b], T0, 1000);
      assert.deepEqual([ra.deduplicated, rb.deduplicated, rb.messageId], [false, true, a.id]);
      const c = msg('http://c.test/', { dedupKey: 'id:k1' });
      const [rc] = await store.enqueue([c], T0 + 2000, 1000);
      assert.equal(rc.deduplicated, false, 'window passed');
      await store.claimDue({ owner: 'w', now: T0 + 3000, limit: 1, leaseUntil: T0 + 9000 });
      assert.equal(await store.cancel({}, T0 + 3001), 2);
      assert.equal(await store.getMessage(c.id), undefined, 'unclaimed one cancelled at once');
      assert.ok(await store.getMessage(a.id), 'in-flight one waits for its attempt');
      await store.reschedule(a.id, 'w', T0 + 3002, { error: 'x' }, T0 + 4000, []);
      assert.equal(await store.getMessage(a.id), undefined, 'cancel honoured when the attempt ended');
      await store.close();
    });

    test('dedup across concurrent enqueues: one message per key', async () => {
      const { store } = await open();
      const res = await Promise.all(Array.from({ length: 20 }, () => store.enqueue([msg('http://dd.test/', { dedupKey: 'id:same' })], T0, 60_000)));
      const stored = res.flat().filter((r) => !r.deduplicated);
      assert.equal(stored.length, 1);
      assert.ok(res.flat().every((r) => r.messageId === stored[0].messageId));
      await store.close();
    });

    test('enqueue hand-off: due messages come back claimed, up to the limit', async () => {
      const { store } = await open();
      for (const o of ['w', 'w2']) await store.holdOwner?.(o);
      const due = [msg('http://e.test/1'), msg('http://e.test/2'), msg('http://e.test/3')];
      const later = msg('http://e.test/later', { dueAt: T0 + 60_000 });
      const res = await store.enqueue([...due, later], T0, 0, { owner: 'w', leaseUntil: T0 + 1000, ids: new Set([due[0].id, due[1].id]) });
      assert.deepEqual(res.map((r) => r.claimed?.id), [due[0].id, due[1].id, undefined, undefined]);
      assert.equal(res[0].claimed?.retried, 0);
      const rest = await store.claimDue({ owner: 'w2', now: T0, limit: 10, leaseUntil: T0 + 5000 });
      assert.deepEqual(rest.map((m) => m.id), [due[2].id], 'handed-off messages are leased, the others are not');
      assert.equal(await store.complete(due[0].id, 'w', T0 + 1, { status: 200 }, []), true);
      const logs = await store.listLogs({ messageIds: [due[0].id] }, { count: 10, order: 'earliestFirst' });
      assert.deepEqual(logs.items.map((l) => l.state), ['CREATED', 'ACTIVE', 'DELIVERED']);
      assert.equal(await store.releaseLeases(T0 + 2000), 1, 'the lease of due[1] expires like any other');
      await store.close();
    });

    test('logs of handed-off messages: every page size and order lists the same entries once; state filters; histogram', async () => {
      const { store } = await open();
      await store.holdOwner?.('w');
      const ms = [msg('http://h.test/1'), msg('http://h.test/2'), msg('http://h.test/3')];
      await store.enqueue(ms, T0, 0, { owner: 'w', leaseUntil: T0 + 1000, ids: new Set([ms[0].id, ms[2].id]) });
      assert.equal(await store.complete(ms[0].id, 'w', T0 + 1, { status: 200 }, []), true);
      const key = (l: { state: string; message: { id: string } }) => `${l.message.id} ${l.state}`;
      const earliest = (await store.listLogs({}, { count: 100, order: 'earliestFirst' })).items;
      assert.deepEqual(earliest.map(key), [
        `${ms[0].id} CREATED`, `${ms[0].id} ACTIVE`, `${ms[1].id} CREATED`, `${ms[2].id} CREATED`, `${ms[2].id} ACTIVE`, `${ms[0].id} DELIVERED`,
      ]);
      assert.equal(earliest[0].nextDeliveryTime, T0);
      assert.equal(earliest[1].nextDeliveryTime, undefined, 'ACTIVE has no next delivery time');
      assert.equal(earliest[1].time, T0);
      for (const order of ['earliestFirst', 'latestFirst'] as const) {
        const all = (await store.listLogs({}, { count: 100, order })).items.map(key);
        assert.deepEqual(all, order === 'earliestFirst' ? earliest.map(key) : earliest.map(key).reverse());
        for (const count of [1, 2, 3]) {
          const seen: string[] = [];
          let cursor: string | undefined;
          do {
            const p = await store.listLogs({}, { count, order, cursor });
            assert.ok(p.items.length <= count);
            seen.push(...p.items.map(key));
            cursor = p.cursor;
          } while (cursor);
          assert.deepEqual(seen, all, `${order}, ${count} per page`);
        }
      }
      const active = await store.listLogs({ state: ['ACTIVE'] }, { count: 1, order: 'earliestFirst' });
      assert.deepEqual(active.items.map(key), [`${ms[0].id} ACTIVE`]);
      const activeRest = await store.listLogs({ state: ['ACTIVE'] }, { count: 10, order: 'earliestFirst', cursor: active.cursor });
      assert.deepEqual(activeRest.items.map(key), [`${ms[2].id} ACTIVE`]);
      const created = await store.listLogs({ state: ['CREATED', 'DELIVERED'] }, { count: 10, order: 'latestFirst' });
      assert.deepEqual(created.items.map(key), [`${ms[0].id} DELIVERED`, `${ms[2].id} CREATED`, `${ms[1].id} CREATED`, `${ms[0].id} CREATED`]);
      const hist = await store.eventHistogram?.(T0, T0 + 10, 1);
      if (hist) assert.deepEqual({ ...hist }, { CREATED: [3], ACTIVE: [2], DELIVERED: [1] });
      await store.close();
    });

    test('group commit: concurrent enqueues share transactions and survive reopen', async () => {
      const f = await open();
      const msgs = Array.from({ length: 500 }, (_, i) => msg(`http://d.test/${i}`));
      const results = await Promise.all(msgs.map((m) => f.store.enqueue([m], T0, 0)));
      assert.equal(results.length, 500);
      await f.store.close();
      const s2 = await f.reopen();
      for (const m of [msgs[0], msgs[499]]) assert.ok(await s2.getMessage(m.id));
      await s2.close();
    });

    if (name !== 'sqlite') {
      test('shared store: leases of an owner that is no longer alive are handed back at once; renewal extends live ones', async () => {
        const a = await open();
        const b = { store: await a.reopen() }; // a second node on the same database
        await a.store.holdOwner?.('node-a');
        await b.store.holdOwner?.('node-b');
        const ms = [msg('http://lv.test/1'), msg('http://lv.test/2')];
        await a.store.enqueue(ms, T0, 0);
        const now = Date.now();
        const [ca] = await a.store.claimDue({ owner: 'node-a', now, limit: 1, leaseUntil: now + 60_000 });
        const [cb] = await b.store.claimDue({ owner: 'node-b', now, limit: 1, leaseUntil: now + 60_000 });
        assert.ok(ca && cb && ca.id !== cb.id, 'each node claimed a different message');
        assert.equal(await b.store.releaseLeases(now), 0, 'both owners alive, leases not expired');
        assert.deepEqual(await a.store.renewLeases!('node-a', [ca.id, cb.id], now + 120_000), [ca.id], 'only own leases are renewed');
        await a.store.close(); // node a "dies": its liveness lock goes with its connection
        assert.equal(await b.store.releaseLeases(now), 1, "the dead node's lease is handed back");
        const [again] = await b.store.claimDue({ owner: 'node-b', now, limit: 10, leaseUntil: now + 60_000 });
        assert.equal(again?.id, ca.id);
        await b.store.close();
      });
    }

    test('prune: finished messages, logs, dedup keys and DLQ entries older than their retention go, nothing younger', async () => {
      const { store } = await open();
      const done = msg('http://pr.test/done', { dedupKey: 'id:p' });
      const dead = msg('http://pr.test/dead', { maxRetries: 0 });
      const live = msg('http://pr.test/live', { dueAt: T0 + 10_000_000 });
      await store.enqueue([done, dead, live], T0, 1000);
      await store.claimDue({ owner: 'w', now: T0, limit: 10, leaseUntil: T0 + 1000 });
      await store.complete(done.id, 'w', T0 + 1, { status: 200 }, []);
      await store.moveToDlq(dead.id, 'w', T0 + 1, { status: 500 }, 'dlq-p', []);
      await store.prune(T0 + 5000, T0 + 5000);
      assert.equal((await store.listLogs({}, { count: 100, order: 'earliestFirst' })).items.length, 0, 'logs older than the retention pruned');
      assert.ok(await store.getDlq('dlq-p'), 'DLQ entry kept (and its message)');
      assert.ok(await store.getMessage(live.id), 'pending message kept');
      const [again] = await store.enqueue([msg('http://pr.test/done', { dedupKey: 'id:p' })], T0 + 5000, 1000);
      assert.equal(again.deduplicated, false, 'expired dedup key pruned');
      await store.prune(T0 + 5000, T0 + 5000, T0 + 1);
      assert.ok(await store.getDlq('dlq-p'), 'DLQ entry younger than the DLQ retention kept');
      await store.prune(T0 + 5000, T0 + 5000, T0 + 2);
      assert.equal(await store.getDlq('dlq-p'), undefined, 'DLQ entry older than the DLQ retention pruned');
      assert.equal(await resources(store).messageStatuses([dead.id, done.id]).then((s) => Object.keys(s).length), 0, 'and the finished messages with it');
      await store.close();
    });

    test('URL groups: add (no duplicates), remove by name or url, empty group vanishes, delete', async () => {
      const { store } = await open();
      const r = resources(store);
      await r.addEndpoints('g1', [{ url: 'http://a.test/' }, { url: 'http://b.test/', name: 'b' }], T0);
      await r.addEndpoints('g1', [{ url: 'http://a.test/' }, { url: 'http://c.test/', name: 'c' }], T0 + 10);
      const g = await r.getGroup('g1');
      assert.deepEqual(g?.endpoints, [{ url: 'http://a.test/' }, { name: 'b', url: 'http://b.test/' }, { name: 'c', url: 'http://c.test/' }]);
      assert.equal(g?.createdAt, T0);
      assert.equal(g?.updatedAt, T0 + 10);
      await r.addEndpoints('g0', [{ url: 'http://z.test/' }], T0);
      assert.deepEqual((await r.listGroups()).map((x) => x.name), ['g0', 'g1']);
      assert.equal(await r.removeEndpoints('nope', [{ url: 'http://a.test/' }], T0), false);
      assert.equal(await r.removeEndpoints('g1', [{ name: 'b' } as UrlGroupEndpoint, { url: 'http://a.test/' }], T0 + 20), true);
      assert.deepEqual((await r.getGroup('g1'))?.endpoints, [{ name: 'c', url: 'http://c.test/' }]);
      assert.equal(await r.removeEndpoints('g1', [{ name: 'c', url: 'http://c.test/' }], T0 + 30), true);
      assert.equal(await r.getGroup('g1'), undefined, 'a group without endpoints is deleted');
      assert.equal(await r.deleteGroup('g0'), true);
      assert.equal(await r.deleteGroup('g0'), false);
      assert.deepEqual(await r.listGroups(), []);
      await store.close();
    });

    test('queues: upsert, ensure keeps settings, lag, pause, delete cancels waiting messages', async () => {
      const { store } = await open();
      const r = resources(store);
      await r.upsertQueue('q1', { parallelism: 3 }, T0);
      await r.ensureQueues(['q1', 'q2'], T0 + 1);
      assert.deepEqual(
        (await r.listQueues()).map((q) => [q.name, q.parallelism, q.paused, q.createdAt]),
        [['q1', 3, false, T0], ['q2', 1, false, T0 + 1]],
      );
      await r.upsertQueue('q1', { paused: true }, T0 + 2);
      let q1 = await r.getQueue('q1');
      assert.deepEqual([q1?.parallelism, q1?.paused, q1?.updatedAt], [3, true, T0 + 2], 'partial upsert keeps the other field');
      assert.equal(await r.setQueuePaused('q1', false, T0 + 3), true);
      assert.equal(await r.setQueuePaused('nope', false, T0 + 3), false);
      const held = [msg('http://q.test/1', { queueName: 'q1', held: true }), msg('http://q.test/2', { queueName: 'q1', held: true })];
      await store.enqueue(held, T0, 0);
      q1 = await r.getQueue('q1');
      assert.equal(q1?.lag, 2);
      assert.equal(q1?.paused, false);
      assert.equal(await r.getQueue('nope'), undefined);
      assert.equal(await r.deleteQueue('q1', T0 + 4), true);
      assert.equal(await r.deleteQueue('q1', T0 + 4), false);
      assert.deepEqual(await r.messageStatuses(held.map((m) => m.id)), { [held[0].id]: 'cancelled', [held[1].id]: 'cancelled' });
      const logs = await store.listLogs({ messageIds: [held[0].id] }, { count: 10, order: 'earliestFirst' });
      assert.deepEqual(logs.items.map((l) => l.state), ['CREATED', 'CANCEL_REQUESTED', 'CANCELLED']);
      await store.close();
    });

    test('admission: held messages are not claimable until released, FIFO heads, counts, next held due', async () => {
      const { store } = await open();
      const r = resources(store);
      await r.upsertQueue('q', { parallelism: 2 }, T0);
      const qm = [0, 1, 2].map((i) => msg(`http://adm.test/q${i}`, { queueName: 'q', held: true }));
      const km = [0, 1].map((i) => msg(`http://adm.test/k${i}`, { flowControlKey: 'k', flowControl: { parallelism: 1 }, held: true }));
      const late = msg('http://adm.test/late', { queueName: 'q2', held: true, dueAt: T0 + 5000 });
      await store.enqueue([...qm, ...km, late], T0, 0);
      assert.equal((await store.claimDue({ owner: 'w', now: T0, limit: 10, leaseUntil: T0 + 1000 })).length, 0, 'held messages are not claimable');
      assert.equal(await store.nextDueAt(), undefined, 'held messages are outside the due index');
      const seen = await r.admit((tx) => {
        const out = {
          queues: tx.heldQueues().sort(),
          keys: tx.heldKeys(),
          cfg: tx.queueConfig('q'),
          none: tx.queueConfig('q2'),
          heads: tx.queueHeads('q', 2, T0).map((h) => h.seq),
          lateHeads: tx.queueHeads('q2', 10, T0).length,
          keyHeads: tx.keyHeads('k', 10, T0).map((h) => h.flowControlKey),
          admittedBefore: tx.admittedInQueue('q'),
          next: tx.nextHeldDue(T0),
        };
        tx.release(tx.queueHeads('q', 2, T0).map((h) => h.seq));
        return out;
      }, T0);
      assert.deepEqual(seen.queues, ['q', 'q2']);
      assert.deepEqual(seen.keys, ['k']);
      assert.deepEqual(seen.cfg, { parallelism: 2, paused: false });
      assert.equal(seen.none, undefined);
      assert.equal(seen.heads.length, 2);
      assert.ok(seen.heads[0] < seen.heads[1], 'FIFO by sequence');
      assert.equal(seen.lateHeads, 0, 'not due yet');
      assert.deepEqual(seen.keyHeads, ['k', 'k']);
      assert.equal(seen.admittedBefore, 0);
      assert.equal(seen.next, T0 + 5000);
      const counts = await r.admit((tx) => ({ q: tx.admittedInQueue('q'), k: tx.admittedForKey('k') }), T0);
      assert.deepEqual(counts, { q: 2, k: 0 });
      const claimed = await store.claimDue({ owner: 'w', now: T0, limit: 10, leaseUntil: T0 + 1000 });
      assert.deepEqual(claimed.map((m) => m.id).sort(), [qm[0].id, qm[1].id].sort(), 'released messages are claimable, in order');
      await store.complete(qm[0].id, 'w', T0 + 1, { status: 200 }, []);
      assert.equal(await r.admit((tx) => tx.admittedInQueue('q'), T0), 1, 'a delivered message frees its slot');
      await store.close();
    });

    test('flow control: record limits, waiting/admitted counts, pin, unpin, pause, search', async () => {
      const { store } = await open();
      const r = resources(store);
      await r.recordFlowControl([{ key: 'fk', fc: { parallelism: 2, rate: 10, period: 60 } }, { key: 'other', fc: { rate: 1 } }], T0);
      await store.enqueue([msg('http://fc.test/', { flowControlKey: 'fk', held: true }), msg('http://fc.test/', { flowControlKey: 'fk' })], T0, 0);
      let k = await r.getFlowKey('fk');
      assert.deepEqual(
        [k?.parallelism, k?.rate, k?.periodS, k?.paused, k?.waiting, k?.admitted],
        [2, 10, 60, false, 1, 1],
      );
      assert.equal(await r.pinFlow('fk', { parallelism: 1 }, T0 + 1), true);
      assert.equal(await r.pinFlow('fk', { rate: 5 }, T0 + 2), true);
      k = await r.getFlowKey('fk');
      assert.deepEqual([k?.pinnedParallelism, k?.pinnedRate, k?.pinnedPeriodS], [1, 5, 1], 'pins accumulate; rate pinned without period = 1 s');
      await r.recordFlowControl([{ key: 'fk', fc: { parallelism: 4 } }], T0 + 3);
      k = await r.getFlowKey('fk');
      assert.deepEqual([k?.parallelism, k?.pinnedParallelism], [4, 1], 'new limits recorded, pins kept');
      assert.equal(await r.unpinFlow('fk', { parallelism: true, rate: false }, T0 + 4), true);
      k = await r.getFlowKey('fk');
      assert.deepEqual([k?.pinnedParallelism, k?.pinnedRate], [undefined, 5]);
      assert.equal(await r.unpinFlow('fk', { parallelism: false, rate: true }, T0 + 4), true);
      k = await r.getFlowKey('fk');
      assert.deepEqual([k?.pinnedRate, k?.pinnedPeriodS], [undefined, undefined]);
      assert.equal(await r.setFlowPaused('fk', true, T0 + 5), true);
      assert.equal((await r.getFlowKey('fk'))?.paused, true);
      assert.equal(await r.setFlowPaused('nope', true, T0 + 5), false);
      assert.equal(await r.pinFlow('nope', { rate: 1 }, T0), false);
      assert.equal(await r.unpinFlow('nope', { parallelism: true, rate: true }, T0), false);
      assert.equal(await r.getFlowKey('nope'), undefined);
      assert.deepEqual((await r.listFlowKeys()).map((x) => x.key), ['fk', 'other']);
      assert.deepEqual((await r.listFlowKeys('th')).map((x) => x.key), ['other']);
      await store.close();
    });

    test('schedules: upsert, list, due, fire once per due time, pause, delete, message statuses', async () => {
      const { store } = await open();
      const r = resources(store);
      const base = { cron: '* * * * *', destination: 'http://s.test/', options: { method: 'POST', headers: { A: ['1'] }, maxRetries: 1 }, body: Buffer.from('sb'), paused: false, lastMessageIds: [] };
      await r.upsertSchedule({ ...base, id: 's1', createdAt: T0, nextTime: T0 + 60_000, queueName: 'q', callerIp: '1.2.3.4' });
      await r.upsertSchedule({ ...base, id: 's2', createdAt: T0 + 1, nextTime: T0 + 120_000 });
      const s1 = await r.getSchedule('s1');
      assert.deepEqual([s1?.cron, s1?.options, s1?.body, s1?.queueName, s1?.callerIp, s1?.nextTime, s1?.lastTime], [base.cron, base.options, base.body, 'q', '1.2.3.4', T0 + 60_000, undefined]);
      assert.deepEqual((await r.listSchedules()).map((s) => s.id), ['s1', 's2']);
      assert.equal(await r.nextScheduleTime(), T0 + 60_000);
      assert.deepEqual((await r.dueSchedules(T0 + 60_000)).map((s) => s.id), ['s1']);
      const m = msg('http://s.test/', { scheduleId: 's1' });
      const both = await Promise.all([
        r.fireSchedule('s1', T0 + 60_000, [m], T0 + 120_000, T0 + 60_001),
        r.fireSchedule('s1', T0 + 60_000, [msg('http://s.test/', { scheduleId: 's1' })], T0 + 120_000, T0 + 60_001),
      ]);
      assert.deepEqual(both.sort(), [false, true], 'a due time fires once');
      const fired = await r.getSchedule('s1');
      assert.deepEqual([fired?.lastTime, fired?.nextTime, fired?.lastMessageIds], [T0 + 60_001, T0 + 120_000, [m.id]]);
      assert.ok(await store.getMessage(m.id), 'fired message stored');
      assert.deepEqual(await r.messageStatuses([m.id, 'msg_unknown']), { [m.id]: 'pending' });
      assert.equal(await r.setSchedulePaused('s2', true, undefined), true);
      assert.equal(await r.fireSchedule('s2', T0 + 120_000, [], T0 + 180_000, T0 + 120_000), false, 'paused schedules do not fire');
      assert.deepEqual((await r.dueSchedules(T0 + 1_000_000)).map((s) => s.id), ['s1'], 'paused ones are never due');
      assert.equal(await r.setSchedulePaused('nope', true, undefined), false);
      assert.equal(await r.deleteSchedule('s2'), true);
      assert.equal(await r.deleteSchedule('s2'), false);
      assert.equal(await r.getSchedule('s2'), undefined);
      await store.close();
    });

    test('workflow runs: create, find (active first), steps, finish once, update, DLQ link, list with filters', async () => {
      const { store } = await open();
      const w = store.workflows!();
      const cfg = { headers: { A: ['1'] }, retries: 2, triggerMessageId: 'msg_t' };
      const r1 = await w.createRun({ runId: 'wfr_a', createdAt: T0, url: 'http://wf.test/a', initialBody: Buffer.from('in'), config: cfg, labels: ['L'], callerIp: '9.9.9.9', flowControlKey: 'fk' }, T0);
      const run = await w.getRun(r1);
      assert.deepEqual([run?.runId, run?.state, run?.config, run?.labels, run?.initialBody, run?.flowControlKey], ['wfr_a', 'RUN_STARTED', cfg, ['L'], Buffer.from('in'), 'fk']);
      await w.addStep(r1, 'msg_1', 'step', Buffer.from('{"stepId":1}'), T0 + 1);
      await w.addStep(r1, 'msg_2', 'toCallback', Buffer.from('{"stepId":2}'), T0 + 2);
      assert.deepEqual((await w.steps(r1)).map((s) => [s.messageId, s.callType, s.body.toString()]), [['msg_1', 'step', '{"stepId":1}'], ['msg_2', 'toCallback', '{"stepId":2}']]);
      assert.equal(await w.finishRun(r1, 'RUN_FAILED', T0 + 3, { dlqId: 'dlq-w' }), true);
      assert.equal(await w.finishRun(r1, 'RUN_SUCCESS', T0 + 4), false, 'only a started run finishes');
      assert.equal((await w.runByDlqId('dlq-w'))?.seq, r1);
      // resume: same run id, new creation time; the active one wins
      const r2 = await w.createRun({ runId: 'wfr_a', createdAt: T0 + 10, url: 'http://wf.test/a', initialBody: Buffer.from('in'), config: cfg }, T0 + 10);
      await w.copySteps(r2, [{ messageId: 'msg_1', callType: 'step', body: Buffer.from('{"stepId":1}') }], T0 + 10);
      assert.equal((await w.findRun('wfr_a'))?.seq, r2);
      assert.equal((await w.findRun('wfr_a', T0))?.seq, r1);
      assert.equal((await w.steps(r2)).length, 1);
      assert.equal(await w.findRun('wfr_none'), undefined);
      const next = { messageId: 'msg_3', state: 'STEP_RETRY' as const, retries: 2, errors: [{ error: 'e', status: 500, time: T0 }] };
      const failure = { state: 'CALLBACK_INPROGRESS' as const, url: 'http://f.test/' };
      await w.updateRun(r2, T0 + 11, { next, failure, dlqId: 'dlq-x' });
      let got = await w.getRun(r2);
      assert.deepEqual([got?.next, got?.failure, got?.dlqId, got?.updatedAt], [next, failure, 'dlq-x', T0 + 11]);
      await w.updateRun(r2, T0 + 12, { next: null, dlqId: null });
      got = await w.getRun(r2);
      assert.deepEqual([got?.next, got?.failure, got?.dlqId], [undefined, failure, undefined], 'null clears, undefined keeps');
      await w.finishRun(r2, 'RUN_SUCCESS', T0 + 13, { response: 'done' });
      assert.equal((await w.getRun(r2))?.response, 'done');
      const r3 = await w.createRun({ runId: 'wfr_b', createdAt: T0 + 20, url: 'http://wf.test/b/x', initialBody: Buffer.alloc(0), config: { headers: {} } }, T0 + 20);
      const ids = async (f: Parameters<typeof w.listRuns>[0], limit = 10, cursor?: number) => (await w.listRuns(f, limit, cursor)).map((x) => x.seq);
      assert.deepEqual(await ids({}), [r3, r2, r1], 'newest first');
      assert.deepEqual(await ids({}, 2), [r3, r2]);
      assert.deepEqual(await ids({}, 10, r2), [r1], 'after the cursor');
      assert.deepEqual(await ids({ runIds: ['wfr_b'] }), [r3]);
      assert.deepEqual(await ids({ urlPrefix: 'http://wf.test/b' }), [r3]);
      assert.deepEqual(await ids({ url: ['http://wf.test/a'] }), [r2, r1]);
      assert.deepEqual(await ids({ states: ['RUN_FAILED'] }), [r1]);
      assert.deepEqual(await ids({ label: ['L'] }), [r1]);
      // inDlq: a run whose DLQ entry exists (r1's 'dlq-w' has none yet, so it is not in the DLQ)
      assert.deepEqual(await ids({ inDlq: true }), []);
      const dead = msg('http://wf.test/a');
      await store.enqueue([dead], T0, 0);
      await store.claimDue({ owner: 'w', now: T0, limit: 1, leaseUntil: T0 + 1000 });
      assert.equal(await store.moveToDlq(dead.id, 'w', T0 + 1, { status: 500 }, 'dlq-w', []), true);
      assert.deepEqual(await ids({ inDlq: true }), [r1]);
      assert.deepEqual(await ids({ failureState: 'CALLBACK_INPROGRESS' }), [r2]);
      assert.deepEqual(await ids({ createdAt: T0 + 10 }), [r2]);
      assert.deepEqual(await ids({ flowControlKey: ['fk'], callerIp: ['9.9.9.9'] }), [r1]);
      assert.deepEqual(await ids({ fromDate: T0 + 5, toDate: T0 + 15 }), [r2]);
      await store.close();
    });

    test('workflow notifies kept for a later wait (taken once, run-specific or any run); run retention', async () => {
      const { store } = await open();
      const w = store.workflows!();
      await w.addNotify({ eventId: 'e', runId: 'wfr_x', data: Buffer.from('for x'), createdAt: T0 });
      await w.addNotify({ eventId: 'e', data: Buffer.from('any'), createdAt: T0 + 1 });
      assert.equal((await w.takeNotify('e', 'wfr_y', T0))?.data.toString(), 'any', 'a notify to another run is skipped');
      const both = await Promise.all([w.takeNotify('e', 'wfr_x', T0), w.takeNotify('e', 'wfr_x', T0)]);
      assert.deepEqual(both.map((n) => n?.data.toString()).sort(), ['for x', undefined].sort());
      await w.addNotify({ eventId: 'old', data: Buffer.alloc(0), createdAt: T0 });
      assert.equal(await w.takeNotify('old', 'wfr_x', T0 + 1), undefined, 'older than the look-back');
      const ended = await w.createRun({ runId: 'wfr_e', createdAt: T0, url: 'http://wf.test/', initialBody: Buffer.alloc(0), config: { headers: {} } }, T0);
      await w.addStep(ended, 'msg_e', 'step', Buffer.from('{}'), T0);
      await w.finishRun(ended, 'RUN_SUCCESS', T0 + 10);
      const live = await w.createRun({ runId: 'wfr_l', createdAt: T0, url: 'http://wf.test/', initialBody: Buffer.alloc(0), config: { headers: {} } }, T0);
      assert.equal(await w.pruneRuns(T0 + 5, T0, 10), 0, 'ended after the cut-off');
      assert.equal(await w.pruneRuns(T0 + 100, T0 + 100, 10), 1);
      assert.equal(await w.getRun(ended), undefined);
      assert.equal((await w.steps(ended)).length, 0);
      assert.ok(await w.getRun(live), 'running runs are kept');
      await store.close();
    });

    test('moveToDlq ends the workflow run in its transaction; runs whose first message is missing are dropped', async () => {
      const { store } = await open();
      const w = store.workflows!();
      const run = await w.createRun({ runId: 'wfr_d', createdAt: T0, url: 'http://wf.test/', initialBody: Buffer.alloc(0), config: { headers: {}, failureCallback: 'http://f.test/' } }, T0);
      const m = msg('http://wf.test/');
      await store.enqueue([m], T0, 0);
      await store.claimDue({ owner: 'w', now: T0, limit: 1, leaseUntil: T0 + 1000 });
      const next = { messageId: m.id, state: 'STEP_FAILED', retries: 0, errors: [{ error: 'boom', time: T0 + 1 }] };
      const failure = { state: 'CALLBACK_INPROGRESS', url: 'http://f.test/' };
      assert.equal(await store.moveToDlq(m.id, 'w', T0 + 1, { status: 500 }, 'dlq-run', [], { runSeq: run, next, failure }), true);
      const failed = await w.getRun(run);
      assert.deepEqual([failed?.state, failed?.dlqId, failed?.completedAt, failed?.next, failed?.failure], ['RUN_FAILED', 'dlq-run', T0 + 1, next, failure]);
      assert.equal((await w.runByDlqId('dlq-run'))?.seq, run);
      // an ended run is left as it is
      const m2 = msg('http://wf.test/');
      await store.enqueue([m2], T0 + 2, 0);
      await store.claimDue({ owner: 'w', now: T0 + 2, limit: 1, leaseUntil: T0 + 1000 });
      await store.moveToDlq(m2.id, 'w', T0 + 3, { status: 500 }, 'dlq-run2', [], { runSeq: run, next: { ...next, messageId: m2.id } });
      assert.equal((await w.getRun(run))?.dlqId, 'dlq-run');

      const started = msg('http://wf.test/');
      await store.enqueue([started], T0, 0);
      const kept = await w.createRun({ runId: 'wfr_k', createdAt: T0 + 10, url: 'http://wf.test/', initialBody: Buffer.alloc(0), config: { headers: {}, startMessageId: started.id } }, T0 + 10);
      const lost = await w.createRun({ runId: 'wfr_lost', createdAt: T0 + 11, url: 'http://wf.test/', initialBody: Buffer.alloc(0), config: { headers: {}, startMessageId: 'msg_never_stored' } }, T0 + 11);
      await w.addStep(lost, 'msg_s', 'step', Buffer.from('{}'), T0 + 11);
      const old = await w.createRun({ runId: 'wfr_old', createdAt: T0 + 12, url: 'http://wf.test/', initialBody: Buffer.alloc(0), config: { headers: {} } }, T0 + 12);
      const young = await w.createRun({ runId: 'wfr_young', createdAt: T0 + 50, url: 'http://wf.test/', initialBody: Buffer.alloc(0), config: { headers: {}, startMessageId: 'msg_in_flight' } }, T0 + 50);
      assert.deepEqual(await w.dropUnstartedRuns(T0, T0 + 20), ['wfr_lost']);
      assert.equal(await w.getRun(lost), undefined);
      assert.equal((await w.steps(lost)).length, 0);
      for (const seq of [kept, old, young]) assert.ok(await w.getRun(seq), 'runs with their first message, without the field, or created after the cut-off stay');
      await store.close();
    });

    test('workflow waiters: add, by event oldest first, expired by deadline, taken once', async () => {
      const { store } = await open();
      const w = store.workflows!();
      const run = await w.createRun({ runId: 'wfr_w', createdAt: T0, url: 'http://wf.test/', initialBody: Buffer.alloc(0), config: { headers: {} } }, T0);
      const a = await w.addWaiter({ eventId: 'ev', runSeq: run, url: 'http://wf.test/', deadline: T0 + 1000, step: { stepId: 2, stepType: 'Wait' }, timeoutUrl: 'http://to.test/', timeoutHeaders: { H: ['v'] }, createdAt: T0 });
      const b = await w.addWaiter({ eventId: 'ev', runSeq: run, url: 'http://wf.test/', deadline: T0 + 500, step: { stepId: 3 }, createdAt: T0 + 1 });
      await w.addWaiter({ eventId: 'other', runSeq: run, url: 'http://wf.test/', deadline: T0 + 9000, step: {}, createdAt: T0 + 2 });
      const list = await w.waiters('ev');
      assert.deepEqual(list.map((x) => x.seq), [a, b]);
      assert.deepEqual([list[0].step, list[0].timeoutUrl, list[0].timeoutHeaders, list[0].deadline], [{ stepId: 2, stepType: 'Wait' }, 'http://to.test/', { H: ['v'] }, T0 + 1000]);
      assert.deepEqual((await w.expiredWaiters(T0 + 1000, 10)).map((x) => x.seq), [b, a], 'by deadline');
      assert.deepEqual((await w.expiredWaiters(T0 + 1000, 1)).map((x) => x.seq), [b]);
      const takes = await Promise.all([w.takeWaiter(a), w.takeWaiter(a)]);
      assert.deepEqual(takes.sort(), [false, true]);
      assert.deepEqual((await w.waiters('ev')).map((x) => x.seq), [b]);
      await store.close();
    });
  });
}

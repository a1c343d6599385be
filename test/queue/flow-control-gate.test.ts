/**
 * The admission gate of queues and flow-control keys, in process.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';

test('flow-control gate: an attempt whose outcome is committed but not yet ended still counts against the rate', async () => {
  // The race behind a 4th arrival in a rate-3 window: the store already counts the finished
  // message as no longer admitted while the dispatcher has not yet reported the attempt's end.
  const { AdmissionGate } = await import('../../src/queue/flow-control/gate.js');
  let admitted = 3;
  const released: number[] = [];
  let nextSeq = 10;
  const tx = {
    heldQueues: () => [],
    heldKeys: () => ['rk'],
    queueConfig: () => undefined,
    flowKey: (key: string) => ({ key, rate: 3, periodS: 1, paused: false, admitted }),
    admittedInQueue: () => 0,
    admittedForKey: () => admitted,
    queueHeads: () => [],
    keyHeads: (_k: string, limit: number) => Array.from({ length: Math.max(0, limit) }, () => ({ seq: nextSeq++, flowControlKey: 'rk' })),
    release: (seqs: number[]) => released.push(...seqs),
    nextHeldDue: () => undefined,
  };
  let now = 1_000_000;
  const routing = { admit: async <T>(fn: (t: typeof tx) => T) => fn(tx) };
  const gate = new AdmissionGate({
    queues: routing as never,
    flows: {} as never,
    clock: { now: () => now },
    logger: { error() {}, warn() {}, info() {} } as never,
    onRelease: () => undefined,
  });
  const round = async () => {
    gate.start();
    await new Promise((r) => setTimeout(r, 5));
    gate.stop();
  };
  for (let i = 0; i < 3; i++) gate.onStart({ flowControlKey: 'rk', retried: 0 });
  admitted = 2; // one attempt's outcome committed; onEnd not called yet
  await round();
  assert.deepEqual(released, [], 'no slot while three attempts are running or just ended');
  gate.onEnd({ flowControlKey: 'rk' }, now);
  admitted = 0; // all three finished in the store, only one end reported
  await round();
  assert.deepEqual(released, [], 'two attempts still running, one ended within the period');
  gate.onEnd({ flowControlKey: 'rk' }, now);
  gate.onEnd({ flowControlKey: 'rk' }, now);
  now += 1000; // one period after the ends: the window is free again
  await round();
  assert.equal(released.length, 3);
});

test('enqueue hooks: messages outside queues, flow control and workflows are prepared synchronously (nothing to await); the others as before', async () => {
  const { AdmissionGate } = await import('../../src/queue/flow-control/gate.js');
  const { EnqueueService } = await import('../../src/queue/enqueue.js');
  const { buildMessage } = await import('../../src/queue/build.js');
  const ensured: string[][] = [];
  const gate = new AdmissionGate({
    queues: { ensureQueues: async (names: string[]) => void ensured.push(names) } as never,
    flows: { recordFlowControl: async () => undefined } as never,
    clock: { now: () => 0 },
    logger: { error() {}, warn() {}, info() {} } as never,
    onRelease: () => undefined,
  });
  const service = new EnqueueService({ store: {} as never, dispatcher: {} as never, clock: { now: () => 0 }, dedupWindowMs: 0 });
  service.admission = gate;
  const opts = { method: 'POST', headers: {}, maxRetries: 0 };
  const plain = buildMessage(opts, { url: 'https://example.com/a' }, Buffer.alloc(0), 0);
  assert.equal(gate.prepare([plain], 0), undefined);
  assert.equal(service.prepare([plain], 0), undefined);
  assert.equal(plain.held, undefined);
  const queued = buildMessage(opts, { url: 'https://example.com/a', queueName: 'q1' }, Buffer.alloc(0), 0);
  const p = service.prepare([plain, queued], 0);
  assert.ok(p instanceof Promise);
  await p;
  assert.equal(queued.held, true);
  assert.equal(plain.held, undefined);
  assert.deepEqual(ensured, [['q1']]);
  // a workflow hook that has work runs before admission, which then sees its result
  const order: string[] = [];
  service.workflows = {
    prepare: (msgs) => {
      order.push('workflows');
      return Promise.resolve().then(() => {
        msgs[0].queueName = 'q2';
      });
    },
  };
  const later = buildMessage(opts, { url: 'https://example.com/b' }, Buffer.alloc(0), 0);
  await service.prepare([later], 0);
  assert.equal(later.held, true);
  assert.deepEqual(ensured, [['q1'], ['q2']]);
  assert.deepEqual(order, ['workflows']);
});

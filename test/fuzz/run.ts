/**
 * Runs the fuzzer (`fuzz.ts`) against a fresh svc with every area (in this process, so a crash
 * is an uncaught exception here) and a loopback sink as queue destination, then checks that every
 * area still answers correct requests through the official SDKs.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from '@upstash/qstash';
import { Redis } from '@upstash/redis';
import { Index } from '@upstash/vector';
import { startTestSvc } from '../helpers/env.js';
import { runFuzz, type FuzzReport } from './fuzz.js';

export interface FuzzRun extends FuzzReport {
  /** Uncaught exceptions and unhandled rejections seen while fuzzing (a crash of svc). */
  crashes: string[];
  /** Problems of the correct requests sent afterwards ([] = every area answered correctly). */
  afterwards: string[];
}

/** Fuzzes a fresh svc with `perArea` requests per area from `seed`. */
export async function fuzzFreshSvc(seed: number, perArea: number, concurrency = 4): Promise<FuzzRun> {
  const sink = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => res.end('ok'));
  });
  await new Promise<void>((resolve) => sink.listen(0, '127.0.0.1', () => resolve()));
  const sinkUrl = `http://127.0.0.1:${(sink.address() as AddressInfo).port}`;
  const svc = await startTestSvc(['queue', 'kv', 'vector', 'mgmt'], { env: { SVC_VECTOR_DIMENSION: '2', SVC_KV_SCRIPT_TIMEOUT_MS: '1000' } });
  const crashes: string[] = [];
  const onCrash = (err: unknown) => crashes.push(String((err as Error)?.stack ?? err));
  process.on('uncaughtException', onCrash);
  process.on('unhandledRejection', onCrash);
  const c = svc.ctx.credentials;
  try {
    const report = await runFuzz(
      {
        urls: { queue: svc.urls.queue!, kv: svc.urls.kv!, vector: svc.urls.vector!, mgmt: svc.urls.mgmt! },
        tokens: {
          queue: c.get('queue.token'),
          kv: c.get('kv.token'),
          kvReadonly: c.get('kv.readonlyToken'),
          vector: c.get('vector.default.token'),
          vectorReadonly: c.get('vector.default.readonlyToken'),
          mgmtUser: c.get('mgmt.user'),
          mgmtPassword: c.get('mgmt.password'),
        },
        sinkUrl,
      },
      { seed, perArea, concurrency },
    );
    const afterwards: string[] = [];
    const check = async (what: string, fn: () => Promise<boolean>) => {
      try {
        if (!(await fn())) afterwards.push(`${what}: wrong answer`);
      } catch (err) {
        afterwards.push(`${what}: ${(err as Error).message}`);
      }
    };
    await check('kv SET/GET', async () => {
      const redis = new Redis({ url: svc.urls.kv!, token: c.get('kv.token') });
      await redis.set('fuzz:after', 'ok');
      return (await redis.get('fuzz:after')) === 'ok';
    });
    await check('vector upsert/query', async () => {
      const index = new Index({ url: svc.urls.vector!, token: c.get('vector.default.token') });
      await index.upsert({ id: 'fuzz-after', vector: [0.6, 0.8] }, { namespace: 'fuzz-after' });
      const q = await index.query({ vector: [0.6, 0.8], topK: 1 }, { namespace: 'fuzz-after' });
      return q[0]?.id === 'fuzz-after';
    });
    await check('queue publish', async () => {
      const qstash = new Client({ baseUrl: svc.urls.queue!, token: c.get('queue.token') });
      const r = await qstash.publishJSON({ url: `${sinkUrl}/after`, body: { ok: true } });
      return typeof r.messageId === 'string';
    });
    await check('mgmt health', async () => (await fetch(`${svc.urls.mgmt}/v2/health`)).status === 200);
    return { ...report, crashes, afterwards };
  } finally {
    process.off('uncaughtException', onCrash);
    process.off('unhandledRejection', onCrash);
    await svc.close();
    sink.closeAllConnections();
    await new Promise<void>((resolve) => sink.close(() => resolve()));
  }
}

/**
 * Test helpers for workflow runs: a real workflow endpoint — the SDK's Request-based `serve` of
 * `@upstash/workflow` behind a small node:http -> fetch `Request` adapter — whose QStash settings
 * (`QSTASH_URL`, token, signing keys) are read at request time, so a restarted svc on a new port
 * can be followed. Records every request it gets.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { serve, type Client as WorkflowClient } from '@upstash/workflow';
import { waitFor } from './helpers.js';

export type WorkflowEnv = Record<string, string>;

/** The QStash env of the workflow SDK for a queue started by `startQueue` (URL, token, signing keys). */
export function qstashEnv(q: { url: string; token: string; keys(): { currentSigningKey: string; nextSigningKey: string } }): WorkflowEnv {
  const keys = q.keys();
  return { QSTASH_URL: q.url, QSTASH_TOKEN: q.token, QSTASH_CURRENT_SIGNING_KEY: keys.currentSigningKey, QSTASH_NEXT_SIGNING_KEY: keys.nextSigningKey };
}
/** A fetch-style handler given the request and the QStash env (e.g. the cloudflare `serveMany`). */
export interface RawRoute {
  fetch(req: Request, env: WorkflowEnv): Promise<Response>;
}

export interface AppRequest {
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  status: number;
}

export interface WorkflowApp {
  url: string;
  env: WorkflowEnv;
  requests: AppRequest[];
  close(): Promise<void>;
}

/**
 * Answers a request before the SDK sees it (a failing or non-workflow endpoint); undefined = let
 * the SDK handle it.
 */
export type Intercept = (path: string, headers: http.IncomingHttpHeaders, body: string) => { status: number; body?: string; headers?: Record<string, string> } | undefined;

/**
 * Starts the endpoint; `routes` maps a path (`/three`) to a `serve(...)` factory; `intercept`
 * answers chosen requests itself (they are recorded too).
 */
export async function startWorkflowApp(
  env: WorkflowEnv,
  routes: Record<string, Parameters<typeof serve> | RawRoute>,
  intercept?: Intercept,
): Promise<WorkflowApp> {
  const requests: AppRequest[] = [];
  const app: WorkflowApp = { url: '', env, requests, close: async () => undefined };
  const server = http.createServer(async (req, res) => {
    try {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const body = Buffer.concat(chunks);
      const path = (req.url ?? '/').split('?')[0];
      const own = intercept?.(path, req.headers, body.toString('utf8'));
      if (own) {
        requests.push({ path, headers: req.headers, body: body.toString('utf8'), status: own.status });
        res.writeHead(own.status, own.headers ?? {}).end(own.body ?? '');
        return;
      }
      const route = routes[path];
      if (!route) {
        res.writeHead(404).end('no such workflow');
        return;
      }
      const headers = new Headers();
      for (const [k, v] of Object.entries(req.headers)) if (v !== undefined) headers.set(k, Array.isArray(v) ? v.join(', ') : v);
      const request = new Request(app.url + req.url, {
        method: req.method,
        headers,
        body: req.method === 'GET' || req.method === 'HEAD' ? undefined : body,
      });
      let response: Response;
      if ('fetch' in route) response = await route.fetch(request, { ...app.env });
      else {
        const [fn, opts] = route;
        // Built per request so the QStash URL/keys of a restarted svc apply at once.
        const { handler } = serve(fn, { ...opts, url: app.url + path, env: { ...app.env } });
        response = await handler(request);
      }
      const out = Buffer.from(await response.arrayBuffer());
      requests.push({ path, headers: req.headers, body: body.toString('utf8'), status: response.status });
      res.writeHead(response.status, Object.fromEntries(response.headers));
      res.end(out);
    } catch (err) {
      res.writeHead(500).end(String(err));
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  app.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  app.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return app;
}

type RunLog = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** The log entry of run `workflowRunId` (`wf.logs`, filtered by run id), or undefined. */
export async function workflowRunLog(wf: WorkflowClient, workflowRunId: string): Promise<RunLog | undefined> {
  const { runs } = (await wf.logs({ filter: { workflowRunId } } as never)) as unknown as { runs: RunLog[] };
  return runs.find((x) => x.workflowRunId === workflowRunId);
}

/** Waits up to `ms` ms until run `id` is in `state` (e.g. `RUN_SUCCESS`); resolves to its log entry. */
export function waitForRunState(wf: WorkflowClient, id: string, state: string, ms: number): Promise<RunLog> {
  return waitFor(`run ${id} in ${state}`, async () => {
    const r = await workflowRunLog(wf, id);
    return r?.workflowState === state ? r : undefined;
  }, ms);
}

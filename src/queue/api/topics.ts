/**
 * URL groups, a.k.a. topics: `POST /v2/topics/{name}/endpoints`
 * (create or add), `DELETE /v2/topics/{name}/endpoints` (group deleted when empty),
 * `GET /v2/topics`, `GET /v2/topics/{name}` (404 when missing), `DELETE /v2/topics/{name}`.
 * Names: letters, digits, `-`, `_`, `.` (400 otherwise). Publishing to a group name fans out to
 * one message per endpoint ({@link resolveUrlGroup}).
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Target } from '../build.js';
import { queueError } from '../errors.js';
import type { UrlGroupStore, UrlGroupEndpoint } from '../store/resource-types.js';
import type { QueueApiContext } from './context.js';
import { jsonBody, withoutNulls } from './messages.js';
import { checkDestination } from './publish.js';

/** URL-group and queue names (alphanumeric, `-`, `_`, `.`). */
export const NAME_RE = /^[A-Za-z0-9._-]+$/;

/** @throws QueueError 400 when `name` breaks the naming rule. */
export function checkName(kind: string, name: string): void {
  if (!NAME_RE.test(name)) throw queueError('invalidName', kind, name);
}

function endpointsOf(body: Record<string, unknown>, needUrl: boolean): UrlGroupEndpoint[] {
  const v = body.endpoints;
  if (!Array.isArray(v) || v.length === 0) throw queueError('endpointsNotArray');
  return v.map((e, i) => {
    if (!e || typeof e !== 'object') throw queueError('endpointNotObject', i);
    const { url, name } = withoutNulls(e as Record<string, unknown>); // `"name": null` = no name
    if (url !== undefined && typeof url !== 'string') throw queueError('endpointUrlType', i);
    if (name !== undefined && typeof name !== 'string') throw queueError('endpointNameType', i);
    if (needUrl && !url) throw queueError('endpointUrlRequired', i);
    if (!needUrl && !url && !name) throw queueError('endpointNeedsUrlOrName', i);
    const out: UrlGroupEndpoint = { url: (url as string | undefined) ?? (undefined as unknown as string) };
    if (typeof name === 'string' && name) out.name = name;
    return out;
  });
}

/** The publish targets of URL group `name`, or undefined when no such group exists. */
export async function resolveUrlGroup(groups: UrlGroupStore, name: string): Promise<Target[] | undefined> {
  if (!NAME_RE.test(name)) return undefined;
  const g = await groups.getGroup(name);
  if (!g || g.endpoints.length === 0) return undefined;
  return g.endpoints.map((e) => ({ url: e.url, topicName: g.name, endpointName: e.name }));
}

export function registerTopicRoutes(app: FastifyInstance, ctx: QueueApiContext, groups: UrlGroupStore): void {
  type P = FastifyRequest<{ Params: { name: string } }>;

  app.post('/v2/topics/:name/endpoints', async (req: P, reply) => {
    checkName('URL group', req.params.name);
    const eps = endpointsOf(jsonBody(req), true);
    for (const e of eps) checkDestination(e.url, ctx.config.blockPrivateDestinations);
    await groups.addEndpoints(req.params.name, eps, ctx.clock.now());
    return reply.code(200).send();
  });

  app.delete('/v2/topics/:name/endpoints', async (req: P, reply) => {
    checkName('URL group', req.params.name);
    const eps = endpointsOf(jsonBody(req), false);
    if (!(await groups.removeEndpoints(req.params.name, eps, ctx.clock.now()))) throw queueError('urlGroupNotFound', req.params.name);
    return reply.code(200).send();
  });

  app.get('/v2/topics', async () => groups.listGroups());

  app.get('/v2/topics/:name', async (req: P) => {
    const g = await groups.getGroup(req.params.name);
    if (!g) throw queueError('urlGroupNotFound', req.params.name);
    return g;
  });

  app.delete('/v2/topics/:name', async (req: P, reply) => {
    if (!(await groups.deleteGroup(req.params.name))) throw queueError('urlGroupNotFound', req.params.name);
    return reply.code(200).send();
  });
}

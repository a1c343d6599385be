/**
 * Signing keys: `GET /v2/keys` -> `{current, next}`;
 * `POST /v2/keys/rotate`: current := next, next := a fresh key, answers the new pair. Keys live in
 * the credential store (so the management API can rotate them the same way) and are read at
 * request time; on a store shared by several nodes they are kept in the database too
 * (`credential-sync.ts`), so a rotation on one node takes effect on every node.
 */
import type { FastifyInstance } from 'fastify';
import { rotateSigningKeys, signingKeys } from '../../credentials.js';
import type { QueueApiContext } from './context.js';

/** Registers `GET /v2/keys` and `POST /v2/keys/rotate`. */
export function registerKeyRoutes(app: FastifyInstance, ctx: QueueApiContext): void {
  app.get('/v2/keys', async () => signingKeys(ctx.credentials));
  app.post('/v2/keys/rotate', async () => {
    const pair = rotateSigningKeys(ctx.credentials);
    // several nodes: answered once the new pair is stored for all of them (503 when that failed)
    await ctx.credentials.settled();
    return pair;
  });
}

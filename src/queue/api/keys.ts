/**
 * Signing keys: `GET /v2/keys` -> `{current, next}`;
 * `POST /v2/keys/rotate`: current := next, next := a fresh key, answers the new pair. Keys live in
 * the credential store (so the management API can rotate them the same way) and are read at
 * request time.
 */
import type { FastifyInstance } from 'fastify';
import { rotateSigningKeys, signingKeys } from '../../credentials.js';
import type { QueueApiContext } from './context.js';

/** Registers `GET /v2/keys` and `POST /v2/keys/rotate`. */
export function registerKeyRoutes(app: FastifyInstance, ctx: QueueApiContext): void {
  app.get('/v2/keys', async () => signingKeys(ctx.credentials));
  app.post('/v2/keys/rotate', async () => rotateSigningKeys(ctx.credentials));
}

/** Type re-exports used by the shared HTTP helpers. */
export type { FastifyReply, FastifyRequest } from 'fastify';
export type { IncomingHttpHeaders } from 'node:http';

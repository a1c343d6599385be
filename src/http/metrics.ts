/**
 * Request metrics of a Fastify-served area (shared plumbing): every answered request counts in
 * `svc_http_requests_total{area,route,status_class}` and `svc_http_request_duration_seconds`
 * (`src/metrics.ts`), labelled with the route pattern as registered (`/v2/messages/:messageId`,
 * never the raw URL, so the label set stays bounded); requests no route matched are `unmatched`.
 */
import type { FastifyInstance } from 'fastify';
import type { HttpMeter } from '../metrics.js';

/** Adds the `onResponse` hook that records each request of `app` in `meter`. */
export function meterFastify(app: FastifyInstance, meter: HttpMeter): void {
  app.addHook('onResponse', (req, reply, done) => {
    meter.route(req.routeOptions.url ?? 'unmatched').record(reply.statusCode, reply.elapsedTime / 1000);
    done();
  });
}

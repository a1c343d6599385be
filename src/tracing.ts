/**
 * OpenTelemetry tracing, shared by every area: the tracer provider (set up once per process from
 * the standard `OTEL_*` variables) and the few helpers the areas start, link and end spans with.
 *
 * Off by default. {@link startTracing} turns it on when `OTEL_EXPORTER_OTLP_ENDPOINT` or
 * `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set (and neither `OTEL_SDK_DISABLED=true` nor
 * `OTEL_TRACES_EXPORTER=none` says otherwise). Only then are the SDK packages loaded
 * (`@opentelemetry/sdk-trace`, `@opentelemetry/exporter-trace-otlp-http`,
 * `@opentelemetry/resources`, `@opentelemetry/core`: dynamic imports), a tracer provider with a
 * batching OTLP/HTTP (JSON) exporter registered as the global one, and the W3C Trace Context
 * propagator set. With it off, areas pay one {@link tracingOn} call per request and allocate
 * nothing for tracing.
 *
 * Read from the environment (OpenTelemetry SDK environment variable specification):
 * `OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT`, `_HEADERS`, `_TIMEOUT`, `_COMPRESSION`, certificates (by
 * the exporter); `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES` (resource; service.name defaults
 * to `svc`); `OTEL_TRACES_SAMPLER` / `OTEL_TRACES_SAMPLER_ARG` (default `parentbased_always_on`);
 * `OTEL_BSP_SCHEDULE_DELAY`, `OTEL_BSP_EXPORT_TIMEOUT`, `OTEL_BSP_MAX_QUEUE_SIZE`,
 * `OTEL_BSP_MAX_EXPORT_BATCH_SIZE` (ms / spans). The exporter speaks OTLP/HTTP with JSON bodies
 * (`http/json`); another `OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL` is reported once and ignored.
 *
 * Areas import only this module and `@opentelemetry/api` (never the SDK). Parents are passed
 * explicitly as W3C `traceparent`/`tracestate` values ({@link TraceContext}); no context manager
 * is registered.
 */
import {
  diag,
  DiagLogLevel,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Span,
  type TextMapGetter,
  type Tracer,
} from '@opentelemetry/api';
import type { Sampler } from '@opentelemetry/sdk-trace';
import type { Logger } from './logger.js';

export { SpanKind, type Attributes, type Span };

/** A W3C Trace Context (`traceparent`, optional `tracestate`), as sent and as forwarded. */
export interface TraceContext {
  traceparent: string;
  tracestate?: string;
}

/** Set while tracing is on (between {@link startTracing} and its shutdown). */
let tracer: Tracer | undefined;

/** True when spans are recorded and exported (cheap: one variable read). */
export function tracingOn(): boolean {
  return tracer !== undefined;
}

/**
 * W3C Trace Context level 1 `traceparent`: version (not `ff`), 32-hex trace id and 16-hex parent
 * id (neither all zeros), 2-hex flags, lower-case hex; a later version than `00` may append `-`
 * fields (version `00` is exactly 55 characters).
 */
const TRACEPARENT = /^(?!ff)[0-9a-f]{2}-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}(?:-[\x21-\x7e]*)?$/;
/** Longest `traceparent` / `tracestate` kept (W3C: propagate at least 512 characters of `tracestate`). */
const MAX_TRACE_HEADER = 512;

const first = (v: string | string[] | undefined): string | undefined => (Array.isArray(v) ? v[0] : v);

/**
 * The trace context of a request's `traceparent` / `tracestate` header values; undefined when the
 * `traceparent` is absent or malformed (W3C Trace Context: then both are ignored). A `tracestate`
 * longer than 512 characters is dropped.
 */
export function traceContextOf(traceparent: string | string[] | undefined, tracestate?: string | string[]): TraceContext | undefined {
  const tp = first(traceparent)?.trim();
  if (tp === undefined || tp.length > MAX_TRACE_HEADER || !TRACEPARENT.test(tp) || (tp.startsWith('00-') && tp.length !== 55)) return undefined;
  const ts = first(tracestate)?.trim();
  return ts && ts.length <= MAX_TRACE_HEADER ? { traceparent: tp, tracestate: ts } : { traceparent: tp };
}

const getter: TextMapGetter<TraceContext> = {
  keys: () => ['traceparent', 'tracestate'],
  get: (c, key) => (key === 'traceparent' ? c.traceparent : key === 'tracestate' ? c.tracestate : undefined),
};

/**
 * Starts a span (tracing on only: callers check {@link tracingOn} first) as a child of `parent`,
 * or as the root of a new trace when there is none. The caller ends it ({@link endSpan}).
 */
export function startSpan(name: string, kind: SpanKind, parent: TraceContext | undefined, attributes?: Attributes): Span {
  const ctx = parent ? propagation.extract(ROOT_CONTEXT, parent, getter) : ROOT_CONTEXT;
  return tracer!.startSpan(name, { kind, attributes }, ctx);
}

/** The trace context that makes `span` the parent of what receives it (its `traceparent`, and the `tracestate` it carries). */
export function spanTraceContext(span: Span): TraceContext {
  const carrier: Record<string, string> = {};
  propagation.inject(trace.setSpan(ROOT_CONTEXT, span), carrier);
  return carrier.tracestate ? { traceparent: carrier.traceparent, tracestate: carrier.tracestate } : { traceparent: carrier.traceparent };
}

/**
 * Ends `span` (no-op for undefined). `error` (a thrown value or a message) marks it failed
 * (status ERROR, `error.type`, an exception event for thrown errors).
 */
export function endSpan(span: Span | undefined, error?: unknown): void {
  if (!span) return;
  if (error !== undefined) {
    const message = error instanceof Error ? error.message : String(error);
    if (error instanceof Error) span.recordException(error);
    span.setAttribute('error.type', error instanceof Error ? error.name : 'error');
    span.setStatus({ code: SpanStatusCode.ERROR, message });
  }
  span.end();
}

/**
 * A server span for an incoming HTTP request (kv, vector): child of the request's own
 * `traceparent`, kind SERVER. Undefined when tracing is off (the caller's only cost).
 */
export function requestSpan(name: string, headers: Record<string, string | string[] | undefined>, attributes?: Attributes): Span | undefined {
  if (tracer === undefined) return undefined;
  return startSpan(name, SpanKind.SERVER, traceContextOf(headers.traceparent, headers.tracestate), attributes);
}

/** Ends a {@link requestSpan} with the HTTP status it was answered with (5xx = error). */
export function endRequestSpan(span: Span | undefined, status: number): void {
  if (!span) return;
  span.setAttribute('http.response.status_code', status);
  endSpan(span, status >= 500 ? `answered ${status}` : undefined);
}

/** True when the environment asks for trace export (see the module comment). */
export function tracingRequested(env: Record<string, string | undefined>): boolean {
  if ((env.OTEL_SDK_DISABLED ?? '').trim().toLowerCase() === 'true') return false;
  const exporters = (env.OTEL_TRACES_EXPORTER ?? '').toLowerCase();
  if (exporters.split(',').some((e) => e.trim() === 'none')) return false;
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim() || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim());
}

/** What {@link startTracing} returns: flush and stop exporting (at shutdown). */
export interface TracingHandle {
  /** Exports the spans still buffered (bounded by `OTEL_BSP_EXPORT_TIMEOUT`), then turns tracing off. */
  shutdown(): Promise<void>;
}

const num = (v: string | undefined): number | undefined => {
  const n = v === undefined || v.trim() === '' ? NaN : Number(v);
  return Number.isFinite(n) && n >= 0 ? n : undefined;
};

/**
 * Turns tracing on when {@link tracingRequested} says so (else resolves undefined and loads
 * nothing). `env` is the process environment (the exporter and the resource detector read
 * `process.env` themselves, as the SDK does); `logger` receives the SDK's warnings and export
 * errors. Never throws for a bad `OTEL_*` value: it is logged and the default used.
 */
export async function startTracing(logger: Logger, env: Record<string, string | undefined> = process.env): Promise<TracingHandle | undefined> {
  if (tracer !== undefined || !tracingRequested(env)) return undefined;
  const [sdk, otlp, resources, core] = await Promise.all([
    import('@opentelemetry/sdk-trace'),
    import('@opentelemetry/exporter-trace-otlp-http'),
    import('@opentelemetry/resources'),
    import('@opentelemetry/core'),
  ]);
  const log = logger.child({ component: 'tracing' });
  diag.setLogger(
    {
      // the SDK hands over a failed export's error as a JSON string
      error: (msg, ...args) => log.error({ detail: msg, ...(args.length ? { args } : {}) }, 'tracing: OpenTelemetry SDK error (e.g. a failed export, whose spans are dropped)'),
      warn: (msg, ...args) => log.warn({ detail: msg, ...(args.length ? { args } : {}) }, 'tracing: OpenTelemetry SDK warning'),
      info: () => undefined,
      debug: () => undefined,
      verbose: () => undefined,
    },
    { logLevel: DiagLogLevel.WARN, suppressOverrideMessage: true },
  );
  const protocol = env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? env.OTEL_EXPORTER_OTLP_PROTOCOL;
  if (protocol !== undefined && protocol.trim() !== 'http/json') {
    log.warn({ protocol }, 'svc exports traces as OTLP/HTTP with JSON bodies (http/json); the protocol asked for is not used');
  }
  const sampler = samplerFromEnv(sdk, env, log);
  const resource = resources
    .resourceFromAttributes({ 'service.name': 'svc' })
    .merge(resources.detectResources({ detectors: [resources.envDetector] }));
  const processor = new sdk.BatchSpanProcessor({
    exporter: new otlp.OTLPTraceExporter(),
    scheduledDelayMillis: num(env.OTEL_BSP_SCHEDULE_DELAY),
    exportTimeoutMillis: num(env.OTEL_BSP_EXPORT_TIMEOUT),
    maxQueueSize: num(env.OTEL_BSP_MAX_QUEUE_SIZE),
    maxExportBatchSize: num(env.OTEL_BSP_MAX_EXPORT_BATCH_SIZE),
  });
  const provider = new sdk.TracerProvider({ resource, sampler, spanProcessors: [processor] });
  trace.setGlobalTracerProvider(provider);
  propagation.setGlobalPropagator(new core.W3CTraceContextPropagator());
  tracer = trace.getTracer('svc');
  log.info({ sampler: sampler.toString() }, 'tracing on: exporting spans over OTLP/HTTP');
  return {
    async shutdown() {
      tracer = undefined;
      await provider.shutdown().catch((err: unknown) => log.warn({ err }, 'tracing: flushing spans at shutdown failed'));
      trace.disable();
      propagation.disable();
    },
  };
}

type SdkTrace = typeof import('@opentelemetry/sdk-trace');

/** The sampler of `OTEL_TRACES_SAMPLER` / `OTEL_TRACES_SAMPLER_ARG` (SDK environment variable specification). */
function samplerFromEnv(sdk: SdkTrace, env: Record<string, string | undefined>, log: Logger): Sampler {
  const name = (env.OTEL_TRACES_SAMPLER ?? 'parentbased_always_on').trim().toLowerCase();
  const arg = num(env.OTEL_TRACES_SAMPLER_ARG);
  const ratio = arg !== undefined && arg <= 1 ? arg : 1;
  if (name.endsWith('traceidratio') && env.OTEL_TRACES_SAMPLER_ARG !== undefined && ratio !== arg) {
    log.warn({ OTEL_TRACES_SAMPLER_ARG: env.OTEL_TRACES_SAMPLER_ARG }, 'tracing: sampler ratio must be within [0, 1]; using 1');
  }
  switch (name) {
    case 'always_on':
      return new sdk.AlwaysOnSampler();
    case 'always_off':
      return new sdk.AlwaysOffSampler();
    case 'traceidratio':
      return new sdk.TraceIdRatioBasedSampler(ratio);
    case 'parentbased_always_off':
      return new sdk.ParentBasedSampler({ root: new sdk.AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new sdk.ParentBasedSampler({ root: new sdk.TraceIdRatioBasedSampler(ratio) });
    case 'parentbased_always_on':
      return new sdk.ParentBasedSampler({ root: new sdk.AlwaysOnSampler() });
    default:
      log.warn({ OTEL_TRACES_SAMPLER: name }, 'tracing: unknown sampler; using parentbased_always_on');
      return new sdk.ParentBasedSampler({ root: new sdk.AlwaysOnSampler() });
  }
}

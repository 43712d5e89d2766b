/**
 * Tracing, off unless OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)
 * is set: then the OpenTelemetry Node SDK starts at boot (startTelemetry) and exports
 * spans over OTLP, configured by the SDK's own variables (OTEL_SERVICE_NAME,
 * OTEL_EXPORTER_OTLP_PROTOCOL, OTEL_TRACES_SAMPLER, ...). Off, nothing of the SDK is
 * loaded and every helper here returns at its first line (`tracing` is false).
 *
 * The spans are written by hand at the few points one event crosses (docs/decisions.md,
 * "Tracing"): the HTTP request (api/src/middleware/tracing.ts), the Kafka record's
 * `traceparent` header (written per event by EventLog.publish, read by the delivery
 * consumer and the API's fan-out), each delivery attempt, and the read that returns it.
 */
import { context, trace, type Context, type Link, type Span, type SpanContext, type Tracer } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';

/** W3C Trace Context, used explicitly (not the global propagator): only our own Kafka records carry it. */
const w3c = new W3CTraceContextPropagator();

let tracing = false;

/** Whether spans are recorded: the SDK was started here, or a test registered its own provider. */
export function tracingOn(): boolean {
  return tracing;
}

/** Turns the helpers on (startTelemetry; tests that register an in-memory provider) or off. */
export function setTracing(on: boolean): void {
  tracing = on;
}

export function tracer(): Tracer {
  return trace.getTracer('event-platform');
}

/** Whether the environment asks for OTLP export of traces. */
function telemetryRequested(env: NodeJS.ProcessEnv): boolean {
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) && env.OTEL_SDK_DISABLED !== 'true';
}

/**
 * Starts the OpenTelemetry SDK when the environment asks for it (telemetryRequested);
 * returns its shutdown (flushes the spans still batched), or null when off. The SDK
 * reads its OTEL_* variables itself; `service` names the process when OTEL_SERVICE_NAME
 * is unset. Only traces are exported (metrics stay on /metrics, logs on stdout).
 */
export async function startTelemetry(service: string, env: NodeJS.ProcessEnv): Promise<(() => Promise<void>) | null> {
  if (!telemetryRequested(env)) return null;
  const { NodeSDK } = await import('@opentelemetry/sdk-node');
  const sdk = new NodeSDK({
    serviceName: env.OTEL_SERVICE_NAME || `event-platform-${service}`,
    instrumentations: [],
    // The SDK's defaults for these are "otlp" too; traces are what this service exports.
    metricReaders: [],
    logRecordProcessors: [],
  });
  sdk.start();
  setTracing(true);
  return () => sdk.shutdown();
}

/** The `traceparent` of `ctx`'s span (the active one by default); undefined without a valid span. */
export function traceparentOf(ctx: Context = context.active()): string | undefined {
  if (!tracing) return undefined;
  const carrier: Record<string, string> = {};
  w3c.inject(ctx, carrier, { set: (c, k, v) => (c[k] = v) });
  return carrier.traceparent;
}

/** The remote span context a `traceparent` names (a Kafka header: string or bytes); undefined when absent or malformed. */
export function spanContextFrom(traceparent: string | Buffer | null | undefined): SpanContext | undefined {
  if (!tracing || traceparent === undefined || traceparent === null) return undefined;
  const value = typeof traceparent === 'string' ? traceparent : traceparent.toString('latin1');
  const ctx = w3c.extract(context.active(), { traceparent: value }, { get: (c, k) => c[k], keys: (c) => Object.keys(c) });
  const sc = trace.getSpanContext(ctx);
  return sc && trace.isSpanContextValid(sc) ? sc : undefined;
}

/** A context whose parent is the remote span `traceparent` names (the root context when none). */
export function contextFrom(traceparent: string | Buffer | null | undefined): Context {
  const sc = spanContextFrom(traceparent);
  return sc ? trace.setSpanContext(context.active(), sc) : context.active();
}

/** The active span's ids, for log lines; undefined outside a recorded span. */
export function activeSpanIds(): { trace_id: string; span_id: string } | undefined {
  if (!tracing) return undefined;
  const span: Span | undefined = trace.getActiveSpan();
  const sc = span?.spanContext();
  return sc && trace.isSpanContextValid(sc) ? { trace_id: sc.traceId, span_id: sc.spanId } : undefined;
}

/**
 * The `traceparent` of recent events by id (tracing on), so that a read returning
 * an event can link to that event's trace. Bounded: the oldest are forgotten first
 * (a read of an older event has no link; its span is there all the same).
 */
export class EventTraces {
  private readonly byId = new Map<string, string>();

  constructor(private readonly max = 10_000) {}

  note(eventId: string, traceparent: string | Buffer): void {
    if (!tracing) return;
    if (this.byId.size >= this.max) this.byId.delete(this.byId.keys().next().value as string);
    this.byId.set(eventId, typeof traceparent === 'string' ? traceparent : traceparent.toString('latin1'));
  }

  /** Adds to `span` a link to the trace of each event it knows of `ids`. */
  link(span: Span | undefined, ids: Iterable<string>): void {
    if (!tracing || !span) return;
    const links: Link[] = [];
    for (const id of ids) {
      const sc = spanContextFrom(this.byId.get(id));
      if (sc) links.push({ context: sc, attributes: { 'event_platform.event_id': id } });
    }
    if (links.length > 0) span.addLinks(links);
  }
}

/** `fn`, to run later in the context active now (tracing on: its log lines carry this span's trace_id); `fn` itself when off. */
export function bindActive<F extends (...args: never[]) => unknown>(fn: F): F {
  return tracing ? context.bind(context.active(), fn) : fn;
}

import { context, SpanKind, SpanStatusCode, trace, type Span } from '@opentelemetry/api';
import type { Context, Next } from 'koa';
import { contextFrom, tracer, tracingOn } from '#shared/telemetry.js';
import { parkedOf } from '../live/held.js';

/**
 * One server span per request while tracing is on (shared/src/telemetry.ts), the
 * active span for everything the request does: an ingest's publish becomes its child
 * (and the Kafka records carry it), log lines carry its trace_id. A `traceparent`
 * from the caller is continued. A parked request (live/held.ts) ends its span
 * once its handler has written it. Off: the request goes straight on.
 */
export function tracing() {
  return function traceRequest(ctx: Context, next: Next): Promise<void> {
    return tracingOn() ? traced(ctx, next) : next();
  };
}

async function traced(ctx: Context, next: Next): Promise<void> {
  const parent = contextFrom(ctx.get('traceparent') || undefined);
  const span = tracer().startSpan(ctx.method, { kind: SpanKind.SERVER, attributes: { 'http.request.method': ctx.method, 'url.path': ctx.path } }, parent);
  try {
    await context.with(trace.setSpan(parent, span), next);
  } finally {
    const route = (ctx as Context & { _matchedRoute?: string | RegExp })._matchedRoute;
    if (typeof route === 'string') {
      span.updateName(`${ctx.method} ${route}`);
      span.setAttribute('http.route', route);
    }
    const end = (status: number): void => {
      span.setAttribute('http.response.status_code', status);
      if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
      span.end();
    };
    const parked = parkedOf(ctx);
    if (parked) parked.whenDone(end);
    else end(ctx.status);
  }
}

/** The request's span (tracing on), for what answers it later (a parked long-poll). */
export function requestSpan(): Span | undefined {
  return tracingOn() ? trace.getActiveSpan() : undefined;
}

import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { contextFrom, tracer, tracingOn } from '#shared/telemetry.js';
import type { AttemptRecord } from './deliveries.js';

/**
 * The span of one delivery attempt (tracing on), a child of the event's publish span
 * (the Kafka record's `traceparent`, kept on the delivery document for its retries),
 * written once the attempt is over, with its own start and end times: the send itself
 * runs in the dispatcher, which knows nothing of tracing.
 */
export function traceAttempt(attempt: AttemptRecord): void {
  if (!tracingOn()) return;
  const d = attempt.delivery;
  const span = tracer().startSpan(
    'webhook attempt',
    {
      kind: SpanKind.CLIENT,
      startTime: attempt.at,
      attributes: {
        'http.request.method': 'POST',
        'event_platform.delivery_id': d._id,
        'event_platform.event_id': d.event_id,
        'event_platform.event_type': d.event_type,
        'event_platform.subscription_id': d.subscription_id,
        'event_platform.attempt': attempt.attempt,
        'event_platform.outcome': attempt.outcome,
        ...(attempt.status === null ? {} : { 'http.response.status_code': attempt.status }),
      },
    },
    contextFrom(d.traceparent),
  );
  if (attempt.outcome !== 'ok') span.setStatus({ code: SpanStatusCode.ERROR, message: attempt.error ?? attempt.outcome });
  span.end(new Date(attempt.at.getTime() + attempt.durationMs));
}

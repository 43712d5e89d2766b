import { expect } from 'chai';
import { ROOT_CONTEXT, trace, TraceFlags } from '@opentelemetry/api';
import { contextFrom, setTracing, spanContextFrom, traceparentOf, tracingOn } from './telemetry.js';

describe('telemetry: the traceparent of a Kafka record', () => {
  const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
  const spanId = '00f067aa0ba902b7';
  const inSpan = trace.setSpan(ROOT_CONTEXT, trace.wrapSpanContext({ traceId, spanId, traceFlags: TraceFlags.SAMPLED }));
  let was = false;
  beforeEach(() => {
    was = tracingOn();
    setTracing(true);
  });
  afterEach(() => setTracing(was));

  it('writes the span as a W3C traceparent and reads it back, as a string or as header bytes', () => {
    const header = traceparentOf(inSpan);
    expect(header).to.equal(`00-${traceId}-${spanId}-01`);
    for (const value of [header, Buffer.from(header!, 'latin1')]) {
      const sc = spanContextFrom(value);
      expect(sc).to.include({ traceId, spanId, traceFlags: TraceFlags.SAMPLED, isRemote: true });
      expect(trace.getSpanContext(contextFrom(value))?.traceId).to.equal(traceId);
    }
  });

  it('reads nothing from an absent or malformed header, and writes nothing outside a span', () => {
    for (const bad of [undefined, null, '', 'garbage', `00-${'0'.repeat(32)}-${spanId}-01`, `00-${traceId}-${spanId}-01,00-${traceId}-${spanId}-01`]) {
      expect(spanContextFrom(bad), String(bad)).to.equal(undefined);
      expect(trace.getSpanContext(contextFrom(bad)), String(bad)).to.equal(undefined);
    }
    expect(traceparentOf(ROOT_CONTEXT)).to.equal(undefined);
  });

  it('does nothing while tracing is off', () => {
    setTracing(false);
    expect(traceparentOf(inSpan)).to.equal(undefined);
    expect(spanContextFrom(`00-${traceId}-${spanId}-01`)).to.equal(undefined);
  });
});

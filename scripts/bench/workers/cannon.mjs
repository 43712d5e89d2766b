// Load generator: autocannon in its own process. Each request takes the next
// body (or path) of the lists it was given, so load spreads over accounts,
// partitions and pages as real traffic would.
import autocannon from 'autocannon';
import { serve } from './serve.mjs';

function run({ url, connections, seconds, amount, method = 'GET', headers = {}, bodies, paths, pipelining = 1, timeoutSeconds = 10 }) {
  let i = 0;
  const setupRequest = (req) => {
    const n = i++;
    if (bodies) req.body = bodies[n % bodies.length];
    if (paths) req.path = paths[n % paths.length];
    return req;
  };
  return new Promise((resolve, reject) => {
    autocannon(
      { url, connections, ...(amount ? { amount } : { duration: seconds }), timeout: timeoutSeconds, pipelining, method, headers, requests: [{ method, setupRequest }] },
      (err, result) => {
        if (err) return reject(err);
        resolve({
          ok: result['2xx'],
          non2xx: result.non2xx,
          errors: result.errors,
          timeouts: result.timeouts,
          seconds: result.duration,
          latency: { p50: result.latency.p50, p99: result.latency.p99, mean: result.latency.average },
          rps: result['2xx'] / result.duration,
        });
      },
    );
  });
}

serve({ run });

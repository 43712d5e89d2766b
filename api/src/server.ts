import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { ensureIndexes } from '#shared/mongo/index.js';
import { createApp } from './app.js';
import type { ApiConfig } from './config.js';
import { createDeps, type ApiDeps } from './deps.js';
import { startEventsRuntime } from './live/runtime.js';
import { answerClientError } from './middleware/client-error.js';


/**
 * The whole shutdown (waiters answered, HTTP drained, consumers and producer
 * stopped, database closed) is bounded by this, inside docker-compose.yml's
 * `stop_grace_period` (20 s) with room for the process to exit before SIGKILL.
 */
export const API_SHUTDOWN_MS = 17_000;
export interface RunningApi {
  url: string;
  server: http.Server;
  deps: ApiDeps;
  close(): Promise<void>;
}

/**
 * Starts one API process's worth of work: dependencies, background consumers
 * and the HTTP server. Tests call this with port 0.
 */
export async function startApi(config: ApiConfig, opts: { deps?: ApiDeps } = {}): Promise<RunningApi> {
  const deps = opts.deps ?? createDeps(config);
  const { log, lifecycle } = deps;

  // MongoDB may be down at boot: serve anyway (readyz says 503) and keep trying.
  const indexes = ensureIndexes(deps.mongo, log).catch((err: unknown) => {
    log.warn({ err }, 'could not create MongoDB indexes yet; retrying in the background');
    const timer = setInterval(() => {
      ensureIndexes(deps.mongo, log).then(() => clearInterval(timer), () => undefined);
    }, 5000);
    timer.unref();
    lifecycle.onStop('index-retry', () => clearInterval(timer));
  });
  await indexes;

  // The unknown-email login's dummy hash, made now so the first such login costs what any login does.
  deps.passwords.prepareDummy().catch((err: unknown) => log.warn({ err }, 'could not prepare the dummy password hash; the first unknown-email login will'));

  // The fan-out's positions are pinned before the first request, so every waiter has a P.
  await startEventsRuntime(deps.events, lifecycle);

  const app = createApp(deps);
  const { requestTimeoutMs, headersTimeoutMs } = config.http;
  const server = http.createServer(
    {
      // A request (headers, then body) must arrive within these, so a client that
      // trickles bytes (slowloris) cannot hold a connection and a parser for ever.
      // requestTimeout stops counting once the request is in: long-polls (55 s)
      // and streams (~50 s) answer for as long as they like.
      requestTimeout: requestTimeoutMs,
      headersTimeout: headersTimeoutMs,
      // How often Node looks for requests past those limits (its default is 30 s).
      connectionsCheckingInterval: Math.max(100, Math.min(5000, Math.floor(headersTimeoutMs / 4))),
    },
    app.callback(),
  );
  server.keepAliveTimeout = 65_000;
  server.timeout = 0;
  server.on('clientError', answerClientError(log));

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    // A backlog above Node's 511: a fleet of readers reconnecting at once (a deploy, a network
    // blip) overflows a short accept queue, and the kernel then drops or resets their connections.
    server.listen({ port: config.http.port, host: config.http.host, backlog: config.http.listenBacklog }, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const url = `http://${config.http.host.includes(':') ? `[${config.http.host}]` : config.http.host}:${port}`;
  log.info({ url }, 'api listening');

  // Registered last so it runs first: stop taking requests before tearing down what they use.
  lifecycle.onStop('http', async () => {
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      // Keep-alive connections go idle as their last response (a long-poll just
      // released, a stream just ended) is written: close each as soon as it does.
      const sweep = setInterval(() => server.closeIdleConnections(), 50);
      server.once('close', () => clearInterval(sweep));
      server.closeIdleConnections();
    });
  });
  // Runs before the server closes: pending long-polls answer `timed_out` (clients loop), streams end.
  lifecycle.onStop('live waiters', () => deps.events.registry.closeAll('shutdown'));

  return { url, server, deps, close: () => lifecycle.stop(10_000, API_SHUTDOWN_MS) };
}

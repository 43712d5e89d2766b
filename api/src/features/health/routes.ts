import type Router from '@koa/router';
import { AppError } from '#shared/errors/index.js';
import { pingMongo } from '#shared/mongo/index.js';
import type { ApiDeps } from '../../deps.js';
import { newRouter, publicRoute, route } from '../../middleware/route.js';
import { errors } from '../../shapes.js';
import { HealthSchema, ReadySchema } from './schemas.js';

const CHECK_TIMEOUT_MS = 2000;

/**
 * null when the dependency answers. A failure is logged with its detail and
 * reported as plain "not reachable": /readyz is open to anyone who can reach
 * the port, and driver messages name internal hosts and ports.
 */
async function check(deps: ApiDeps, name: string, fn: () => Promise<void>): Promise<string | null> {
  try {
    await fn();
    return null;
  } catch (err) {
    deps.log.warn({ err, dependency: name }, 'readiness check failed');
    return 'not reachable';
  }
}

export function healthRoutes(deps: ApiDeps): Router {
  const router = newRouter();

  // Liveness: the process is up and its event loop turns.
  route(router, deps.config.http, {
    method: 'get',
    path: '/healthz',
    guard: publicRoute(),
    doc: { operationId: 'healthz', tags: ['operations'], summary: 'Liveness: the process is up', responses: { '200': { description: 'Up', schema: HealthSchema } } },
  }, (ctx) => {
    ctx.body = { status: 'ok' };
  });

  // Readiness: MongoDB and Kafka answer and both event consumers are alive; otherwise 503 so a balancer routes elsewhere.
  route(router, deps.config.http, {
    method: 'get',
    path: '/readyz',
    guard: publicRoute(),
    doc: {
      operationId: 'readyz',
      tags: ['operations'],
      summary: 'Readiness: MongoDB and Kafka answer within 2 s',
      description: 'A 503 lists each failed check in `details` (`mongo`, `kafka`, `process` while shutting down).',
      responses: { '200': { description: 'Ready', schema: ReadySchema }, ...errors(503) },
    },
  }, async (ctx) => {
    const [mongo, kafka] = await Promise.all([
      check(deps, 'mongo', () => pingMongo(deps.mongo, CHECK_TIMEOUT_MS)),
      check(deps, 'kafka', () => deps.kafkaProbe.check(CHECK_TIMEOUT_MS)),
    ]);
    const failed = [
      ...(mongo ? [{ path: 'mongo', message: mongo }] : []),
      ...(kafka ? [{ path: 'kafka', message: kafka }] : []),
    ];
    // A consumer silent past its bound is dead until the watchdog has replaced it: this process serves stale or no events meanwhile.
    for (const consumer of [...(deps.events.materializerEnabled ? [deps.events.materializer.health()] : []), deps.events.fanout.health()]) {
      if (!consumer.alive) failed.push({ path: consumer.name, message: 'consumer not running' });
    }
    if (deps.lifecycle.isStopping) failed.push({ path: 'process', message: 'shutting down' });
    if (failed.length > 0) throw new AppError('unavailable', 'Service is not ready', failed, { 'Retry-After': '5' });
    ctx.body = { status: 'ready', checks: { mongo: 'ok', kafka: 'ok' } };
  });

  return router;
}

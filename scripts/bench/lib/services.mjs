// Starting the service's own processes for a scenario, configured the way a
// bench needs them: its own topic, the run's database, budgets raised so the
// rate limiter meters without refusing (it still does its MongoDB work).
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { entryArgs, freePort, startNode, waitHttp } from './proc.mjs';

export const INGEST_TOKEN = `bench-ingest-${randomBytes(12).toString('hex')}`;
const JWT_SECRET = randomBytes(32).toString('hex');
const WEBHOOK_SECRET_KEY = randomBytes(32).toString('base64');

export function serviceEnv(ctx, topic, extra = {}) {
  return {
    // development, not production: only so the webhook scenario may reach its
    // receivers on 127.0.0.1 (WEBHOOK_ALLOW_PRIVATE_TARGETS is refused in production).
    NODE_ENV: 'development',
    LOG_LEVEL: 'info',
    KAFKA_BROKERS: ctx.services.KAFKA_BROKERS,
    MONGO_URL: ctx.services.MONGO_URL,
    MONGO_DB: ctx.db,
    EVENTS_TOPIC: topic,
    EVENTS_PARTITIONS: '12',
    JWT_SECRET,
    INGEST_TOKEN,
    WEBHOOK_SECRET_KEY,
    SIGNUP_LIMIT_PER_HOUR: '1000000',
    LOGIN_LIMIT_PER_MINUTE: '1000000',
    API_KEY_LIMIT_PER_MINUTE: '1000000',
    SESSION_LIMIT_PER_MINUTE: '1000000',
    // The bench measures the event paths; signing up its accounts at scrypt's
    // 2^17 default would add minutes. scripts/bench/login.mjs measures logins.
    PASSWORD_SCRYPT_N: '16384',
    ...extra,
  };
}

/** One API process on a free port; resolves once it serves requests. */
export async function startApi(ctx, { name, topic, env = {}, execArgv = [] }) {
  const port = await freePort();
  const child = startNode(name, entryArgs(ctx.runner, 'api'), {
    env: serviceEnv(ctx, topic, { HOST: '127.0.0.1', PORT: String(port), INSTANCE_ID: `${name}-${ctx.runId}`, ...env }),
    logFile: join(ctx.scratch, `${ctx.scenario}-${name}.log`),
    probe: true,
    execArgv: [...ctx.execArgv, ...execArgv],
  });
  const url = `http://127.0.0.1:${port}`;
  await waitHttp(`${url}/readyz`, child);
  return { url, child, name };
}

/** One delivery process; resolves once its consumer group has joined. */
export async function startDelivery(ctx, { name, topic, env = {} }) {
  // Its metrics endpoint on a port of its own: the default 9464 may be another process's.
  const metricsPort = await freePort();
  const child = startNode(name, entryArgs(ctx.runner, 'delivery'), {
    env: serviceEnv(ctx, topic, { INSTANCE_ID: `${name}-${ctx.runId}`, METRICS_PORT: String(metricsPort), ...env }),
    logFile: join(ctx.scratch, `${ctx.scenario}-${name}.log`),
    probe: true,
    execArgv: ctx.execArgv,
  });
  return { child, name };
}

// Micro-benchmark: what a request held *inside* Koa's middleware chain costs
// by its router's place in the chain, with Koa's plain middleware list (what
// api/src/app.ts builds) and with a "router step" (a replaced Koa `compose`
// that sends a request straight to the router whose route takes it). A
// parked reader (api/src/live/held.ts) has left the chain and pays neither;
// MCP's wait_for_event does not park and is held by the last router.
//
// A synthetic app: 5 plain middleware, then 12 routers of 12 routes each, a
// routes() + allowedMethods() pair per router as in app.ts. Requests are fed
// to app.callback() without sockets. Heap after a full GC, before and after
// holding `--held` requests; CPU per answered request, the lowest of 3 rounds
// of `--requests` (after one to warm up), the two chains interleaved.
//
//   node --expose-gc scripts/bench/router-chain.mjs [--held 5000] [--requests 10000]
import { IncomingMessage, ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import { parseArgs } from 'node:util';
import Router from '@koa/router';
import Koa from 'koa';

const { values: opts } = parseArgs({ options: { held: { type: 'string', default: '5000' }, requests: { type: 'string', default: '10000' } } });
const HELD = Number(opts.held);
const REQUESTS = Number(opts.requests);
if (typeof globalThis.gc !== 'function') throw new Error('run with node --expose-gc');
const gc = globalThis.gc;
const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function buildApp(step) {
  const app = new Koa();
  const waiting = [];
  const routers = [];
  for (let r = 0; r < 12; r++) {
    const router = new Router({ prefix: `/api/v1/r${r}` });
    for (let k = 0; k < 6; k++) {
      router.get(`/get${k}/:id`, (ctx) => {
        ctx.body = 'ok';
      });
      router.post(`/answer${k}`, (ctx) => {
        ctx.body = 'ok';
      });
      router.post(`/hold${k}`, () => new Promise((resolve) => waiting.push(resolve)));
    }
    routers.push(router);
  }
  for (let m = 0; m < 5; m++) app.use(async (_ctx, next) => next());
  const pairs = new Map();
  for (const router of routers) {
    const routes = router.routes();
    const allowed = router.allowedMethods();
    pairs.set(routes, { router, allowed });
    app.use(routes);
    app.use(allowed);
  }
  if (step) {
    const compose = app.compose; // Koa 3's `compose` option (koa-compose)
    app.compose = (stack) => {
      const out = [];
      let group = [];
      const flush = () => {
        if (group.length === 0) return;
        const steps = group;
        const all = compose(steps.map((s) => s.chain));
        out.push((ctx, next) => {
          for (const s of steps) if (s.router.match(ctx.path, ctx.method).route) return s.routes(ctx, next);
          return all(ctx, next);
        });
        group = [];
      };
      for (let i = 0; i < stack.length; ) {
        const pair = pairs.get(stack[i]);
        if (pair && stack[i + 1] === pair.allowed) {
          group.push({ router: pair.router, routes: stack[i], chain: compose([stack[i], pair.allowed]) });
          i += 2;
        } else {
          flush();
          out.push(stack[i++]);
        }
      }
      flush();
      return compose(out);
    };
  }
  return { handler: app.callback(), waiting };
}

function send(handler, path, keep) {
  const req = new IncomingMessage(new Socket());
  req.method = 'POST';
  req.url = path;
  req.headers = {};
  const res = new ServerResponse(req);
  keep?.push(req, res);
  return handler(req, res);
}

async function heldBytes(step, router) {
  const { handler, waiting } = buildApp(step);
  const keep = [];
  const path = `/api/v1/r${router}/hold0`;
  for (let i = 0; i < 500; i++) send(handler, path, keep); // warm-up, released below
  await pause(50);
  waiting.splice(0).forEach((resolve) => resolve());
  keep.length = 0;
  await pause(50);
  gc();
  gc();
  const before = process.memoryUsage().heapUsed;
  for (let i = 0; i < HELD; i++) send(handler, path, keep);
  await pause(100);
  gc();
  gc();
  const bytes = (process.memoryUsage().heapUsed - before) / HELD;
  waiting.splice(0).forEach((resolve) => resolve());
  return bytes;
}

/** CPU per answered request, the lowest of 3 rounds per chain, the two chains interleaved (JIT warm-up and load hit both alike). */
async function cpuPerRequest(router) {
  const apps = [buildApp(false).handler, buildApp(true).handler];
  const path = `/api/v1/r${router}/answer0`;
  const best = [Infinity, Infinity];
  for (let round = 0; round < 4; round++) {
    for (const [i, handler] of apps.entries()) {
      const t0 = process.cpuUsage();
      for (let n = 0; n < REQUESTS; n++) await send(handler, path);
      const used = process.cpuUsage(t0);
      if (round > 0) best[i] = Math.min(best[i], (used.user + used.system) / REQUESTS); // round 0 warms up
    }
  }
  return best;
}

console.log('router (of 12) | chain          | heap per held request | CPU per answered request');
for (const router of [0, 6, 11]) {
  const cpu = await cpuPerRequest(router);
  for (const step of [false, true]) {
    const bytes = await heldBytes(step, router);
    console.log(`${String(router + 1).padStart(14)} | ${(step ? 'router step' : 'plain (Koa)').padEnd(14)} | ${bytes.toFixed(0).padStart(19)} B | ${cpu[step ? 1 : 0].toFixed(1).padStart(21)} µs`);
  }
}

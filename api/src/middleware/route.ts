/**
 * Every route is registered through `route()` with the guard that protects it,
 * so authorization belongs to the router entry, never to a spelling of its path.
 * The stack of a route is always [guard, body parser?, ...handlers]: the guard
 * runs before a byte of the body is read, and no path, case, trailing slash or
 * encoding the router accepts can reach a handler without passing it.
 *
 * Routers are case-sensitive (`/INTERNAL/v1/events` is not a route: 404) and
 * tolerate one trailing slash (`/api/v1/webhooks/` is `/api/v1/webhooks`).
 */
import Router from '@koa/router';
import type { Context, Middleware, Next } from 'koa';
import { jsonParser } from './body.js';

/** What a guard checks, by name; `public` routes check nothing (and say so in their table entry). */
export type Access = 'public' | 'account' | 'ingest_token' | 'metrics_token' | 'stream_token' | 'mcp_tool_key';

const ACCESS = Symbol('route access');

export type Guard = Middleware & { readonly [ACCESS]: Access };

/**
 * Wraps a check as the guard of a route. `public` guards let everything
 * through. Every other route answers with `Cache-Control: no-store` (set
 * before the check, so its 401s and 429s carry it too; a handler may still
 * choose otherwise): what a credential unlocks never sits in a shared cache.
 */
export function guard(access: Access, check: (ctx: Context) => void | Promise<void>): Guard {
  const fn = async (ctx: Context, next: Next): Promise<void> => {
    if (access !== 'public') ctx.set('Cache-Control', 'no-store');
    await check(ctx);
    await next();
  };
  return Object.assign(fn, { [ACCESS]: access }) as Guard;
}

/** For routes anyone may call (health, docs, signup, login) and routes that check inside their protocol (MCP). */
export function publicRoute(access: 'public' | 'mcp_tool_key' = 'public'): Guard {
  return guard(access, () => undefined);
}

/** The access a route's first middleware declares; undefined when the route has no guard (a defect). */
export function accessOf(fn: unknown): Access | undefined {
  return (fn as Partial<Guard> | null)?.[ACCESS];
}

export type Method = 'get' | 'post' | 'put' | 'patch' | 'delete' | 'options' | 'all';

/**
 * `json` (the default for POST/PUT/PATCH): a JSON body up to HTTP_BODY_LIMIT; `ingest`: the producer
 * batch limit; `own`: the handler reads the body itself (MCP answers a bad body in JSON-RPC); `none`.
 */
export type BodyKind = 'json' | 'ingest' | 'own' | 'none';

export interface RouteSpec {
  method: Method;
  path: string;
  guard: Guard;
  body?: BodyKind;
}

export interface BodyLimits {
  bodyLimit: string;
  ingestBodyLimit: string;
}

export function newRouter(prefix?: string): Router {
  return new Router({ ...(prefix ? { prefix } : {}), sensitive: true, strict: false });
}

/** Registers a route as [guard, body parser, ...handlers]; a route cannot be added without its guard. */
export function route(router: Router, limits: BodyLimits, spec: RouteSpec, ...handlers: Middleware[]): void {
  if (accessOf(spec.guard) === undefined) throw new Error(`route ${spec.method.toUpperCase()} ${spec.path} has no guard`);
  const takesBody = spec.method === 'post' || spec.method === 'put' || spec.method === 'patch';
  const kind = spec.body ?? (takesBody ? 'json' : 'none');
  const parser = kind === 'json' ? jsonParser(limits.bodyLimit) : kind === 'ingest' ? jsonParser(limits.ingestBodyLimit) : null;
  const stack: Middleware[] = [spec.guard, ...(parser ? [parser] : []), ...handlers];
  (router[spec.method] as (path: string, ...mw: Middleware[]) => Router).call(router, spec.path, ...stack);
}

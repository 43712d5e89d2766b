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
import type { TObject, TSchema } from '../shapes.js';
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

/** A response of a route's document entry: a shape, or a reference to a shared error response. */
export type RouteResponse =
  | { $ref: string }
  | {
      description: string;
      /** The body's shape; none for an empty response. */
      schema?: TSchema;
      /** Media type of the body (application/json by default). */
      type?: string;
      /** Response headers besides X-Request-Id (and the rate-limit headers of account routes), as OpenAPI header objects. */
      headers?: Record<string, unknown>;
      /** More fields of the media type object (an example, …). */
      media?: Record<string, unknown>;
    };

/**
 * What the OpenAPI document says about a route: registered with the route,
 * so the document is generated from the router (features/openapi/generate.ts).
 * `params`, `query` and `body` are the shapes the route validates with.
 */
export interface RouteDoc {
  operationId: string;
  tags: string[];
  summary: string;
  description?: string;
  /** Who may call it; by default what the guard's access implies. */
  security?: Record<string, string[]>[];
  params?: TObject;
  query?: TObject;
  /** Header parameters, as OpenAPI parameter objects. */
  headers?: Record<string, unknown>[];
  body?: TSchema;
  /** False when the body may be left out (default true when there is a body). */
  bodyRequired?: boolean;
  responses: Record<string, RouteResponse>;
  /** For a route registered for every method (`all`): the method it is listed under. */
  documentAs?: Exclude<Method, 'all'>;
  /** Shapes listed under components.schemas though no schema of the operation refers to them. */
  components?: TSchema[];
  /** Further fields of the operation object (externalDocs, …). */
  extra?: Record<string, unknown>;
}

export interface RouteSpec {
  method: Method;
  path: string;
  guard: Guard;
  body?: BodyKind;
  /** The route's entry in the OpenAPI document. */
  doc?: RouteDoc;
}

/** A route as the registry holds it: the full path in OpenAPI form (`/api/v1/webhooks/{id}`). */
export interface RegisteredRoute {
  method: Method;
  path: string;
  access: Access;
  doc?: RouteDoc;
}

const ROUTES = Symbol('registered routes');

/** The routes registered on a router through `route()`, with their documents. */
export function routesOf(router: Router): RegisteredRoute[] {
  return (router as unknown as { [ROUTES]?: RegisteredRoute[] })[ROUTES] ?? [];
}

function register(router: Router, spec: RouteSpec, access: Access): void {
  const holder = router as unknown as { [ROUTES]?: RegisteredRoute[] };
  const prefix = (router.opts as { prefix?: string }).prefix ?? '';
  // A router's '/' is its prefix itself (`/api/v1/webhooks`), as @koa/router registers it.
  const full = (prefix && spec.path === '/' ? prefix : prefix + spec.path).replace(/:([A-Za-z0-9_]+)/g, '{$1}');
  (holder[ROUTES] ??= []).push({ method: spec.method, path: full, access, ...(spec.doc ? { doc: spec.doc } : {}) });
}

interface BodyLimits {
  bodyLimit: string;
  ingestBodyLimit: string;
}

export function newRouter(prefix?: string): Router {
  return new Router({ ...(prefix ? { prefix } : {}), sensitive: true, strict: false });
}

/** Registers a route as [guard, body parser, ...handlers]; a route cannot be added without its guard. */
export function route(router: Router, limits: BodyLimits, spec: RouteSpec, ...handlers: Middleware[]): void {
  const access = accessOf(spec.guard);
  if (access === undefined) throw new Error(`route ${spec.method.toUpperCase()} ${spec.path} has no guard`);
  register(router, spec, access);
  const takesBody = spec.method === 'post' || spec.method === 'put' || spec.method === 'patch';
  const kind = spec.body ?? (takesBody ? 'json' : 'none');
  const parser = kind === 'json' ? jsonParser(limits.bodyLimit) : kind === 'ingest' ? jsonParser(limits.ingestBodyLimit) : null;
  const stack: Middleware[] = [spec.guard, ...(parser ? [parser] : []), ...handlers];
  (router[spec.method] as (path: string, ...mw: Middleware[]) => Router).call(router, spec.path, ...stack);
}

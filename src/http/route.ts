import type { Request, Response, Router } from 'express';
import type pg from 'pg';
import { z, type ZodType } from 'zod';
import type { AuthCache } from '../auth/cache.js';
import { bearerToken, hashToken } from '../auth/tokens.js';
import { callFn, callJsonText, callPageText, type PageText } from '../db/pools.js';
import { callIdempotent, fingerprint, idempotencyKeyOf, REPLAYED_HEADER } from '../idempotency/key.js';
import { readJsonBody, storableProblem } from './body.js';
import { ApiError, fromZod, isUndecodablePath } from './errors.js';
import { queryInt, uuid } from './schemas.js';
import type { RateLimiter } from './rate-limit.js';
import type { RuleId } from './rules.js';

export type Method = 'get' | 'post' | 'put' | 'patch' | 'delete';

export interface Ctx<P, Q, B> {
  /** SHA-256 hex of the bearer token (the token itself never leaves this module). */
  token: string;
  params: P;
  query: Q;
  body: B;
  req: Request;
  res: Response;
  /**
   * Calls one SQL function with these arguments and returns its JSON as text, unparsed (a page
   * for list routes), for the response to carry as is.
   */
  call: (fn: string, ...args: unknown[]) => Promise<unknown>;
  /**
   * Token, location and scope, checked now (401, 404, 403), for a handler that must do work of its
   * own before its one call: nothing is done for a request that would be refused. Outside `call`,
   * so an Idempotency-Key's once-only call stays the handler's one.
   */
  authorize: () => Promise<void>;
  /** The process's cache of `GET /me` answers (src/auth/cache.ts), when it runs one. */
  authCache?: AuthCache;
}

/**
 * One documented endpoint: its zod schemas validate the request, type the handler and feed the
 * OpenAPI document, so the three cannot drift apart.
 */
export interface RouteSpec<P = any, Q = any, B = any> {
  method: Method;
  /**
   * The SDK method name: lowerCamelCase verb + resource (`listCalls`, `getCall`, `createLead`,
   * `updateLead`, `deleteFaq`, `retryWebhookDelivery`). Stable: changing it is a breaking change
   * (docs/api-contract.md "Compatibility and deprecation"); test/rest/openapi.test.ts fails on a
   * route without one.
   */
  operationId?: string;
  /** Express path relative to the API root, e.g. `/locations/:locationId/leads`. */
  path: string;
  summary: string;
  tag: string;
  /** Scope the operation requires (enforced in SQL by app.authorize; documented here). */
  scope: string | null;
  /** false for unauthenticated routes. */
  auth?: boolean;
  params?: ZodType<P>;
  query?: ZodType<Q>;
  body?: ZodType<B>;
  response?: ZodType;
  /** Success status (200 by default; 201 for creations). */
  status?: number;
  /** Rules of the body that JSON Schema cannot state (src/http/rules.ts); listed in the document. */
  rules?: RuleId[];
  /**
   * Error statuses the operation answers beyond those its shape implies (400; 401 and 429 with a
   * token; 403 with a scope; 404 with a named path; 409 and 422 on a token POST; 413 and 415 with a
   * body): e.g. 422 `provider_rejected` from a provider that refuses credentials. Listed in the
   * document's `x-error-statuses`.
   */
  errors?: number[];
  /** The operation can answer 409 (a status move not allowed, a unique value taken, a record in the wrong state). */
  conflict?: boolean;
  /** Its answer holds a caller's data: a replay of its Idempotency-Key after an erasure answers 410. */
  callerData?: boolean;
  /** The SQL result is `{ data, next_cursor }`: data is sent, the cursor becomes a Link header. */
  list?: boolean;
  /**
   * Deprecated operation: answers carry `Deprecation` (RFC 9745) and `Sunset` (RFC 8594) headers
   * and the document marks it `deprecated: true`. Dates are ISO 8601 (YYYY-MM-DD, UTC midnight).
   */
  deprecated?: { since: string; sunset: string };
  handler: (ctx: Ctx<P, Q, B>) => Promise<unknown>;
}

/**
 * The headers a deprecated operation answers with: `Deprecation: @<unix seconds>` (RFC 9745, a
 * structured-field Date) and `Sunset: <HTTP-date>` (RFC 8594).
 */
export function deprecationHeaders(d: { since: string; sunset: string }): Record<string, string> {
  const at = (iso: string) => {
    const t = Date.parse(`${iso}T00:00:00Z`);
    if (Number.isNaN(t)) throw new Error(`Not a YYYY-MM-DD date: ${iso}`);
    return t;
  };
  return { Deprecation: `@${at(d.since) / 1000}`, Sunset: new Date(at(d.sunset)).toUTCString() };
}

export function defineRoute<P, Q, B>(spec: RouteSpec<P, Q, B>): RouteSpec<P, Q, B> {
  return spec;
}

/**
 * What a route module (a file of src/http/routes/) contributes to the API: its routes, the tags
 * they use with their descriptions (the OpenAPI document's `tags`), and its place in the
 * documentation order. src/http/routes/index.ts registers every module that exports one as
 * `area`, so adding a resource adds a file and edits no list.
 */
export interface ApiArea {
  /** Place in documentation order (paths and tags), ascending; unique. Leave gaps (10, 20, …). */
  order: number;
  /** Every tag the routes use, each with its description, in documentation order. */
  tags: Record<string, string>;
  routes: RouteSpec[];
}

export function defineArea(area: ApiArea): ApiArea {
  return area;
}

/** The bearer token's hash, or 401 without touching the database when it is absent or malformed. */
export function tokenHashOf(req: Request): string {
  const token = bearerToken(req.headers.authorization);
  if (!token) throw new ApiError(401, 'unauthorized', 'Missing, malformed, unknown or revoked bearer token');
  return hashToken(token);
}

/**
 * The next page as a relative link: the request's own path and query with `cursor` replaced. Built
 * without the Host header (a client may send any bytes there; `new URL` would throw on them).
 */
export function nextLink(originalUrl: string, cursor: string): string {
  const q = originalUrl.indexOf('?');
  const path = (q < 0 ? originalUrl : originalUrl.slice(0, q)).replace(/[^\x21-\x7e]/g, encodeURIComponent);
  const params = new URLSearchParams(q < 0 ? '' : originalUrl.slice(q + 1));
  params.set('cursor', cursor);
  return `<${path}?${params}>; rel="next"`;
}

/** A JSON value already serialised (by SQL): sent inside the envelope without parsing. */
export class JsonText {
  constructor(readonly text: string) {}
}

/** `{ "data": … }`, splicing JSON text from SQL in as it came. */
function sendData(res: Response, status: number, data: unknown): void {
  const body = data instanceof JsonText ? `{"data":${data.text}}` : JSON.stringify({ data });
  res.status(status).setHeader('content-type', 'application/json; charset=utf-8');
  res.send(body);
}

export function mountRoutes(router: Router, routes: RouteSpec[], pool: pg.Pool, limiter: RateLimiter, authCache?: AuthCache): void {
  const byPath = new Map<string, Set<string>>();
  for (const spec of routes) {
    const methods = byPath.get(spec.path) ?? new Set<string>();
    methods.add(spec.method.toUpperCase());
    byPath.set(spec.path, methods);
    const deprecation = spec.deprecated ? Object.entries(deprecationHeaders(spec.deprecated)) : [];
    router[spec.method](spec.path, async (req: Request, res: Response) => {
      for (const [name, value] of deprecation) res.setHeader(name, value);
      const token = spec.auth === false ? '' : tokenHashOf(req);
      if (token) await limiter.consume(token, res, req.socket.remoteAddress ?? '');
      // The body is read only now, after the token and the limiter; what is wrong with it (415, 413,
      // 400) is answered after app.authorize below, like any other malformed part of the request.
      const bodyError = await readJsonBody(req, res, spec.body !== undefined).then(() => undefined, (e: unknown) => e ?? new Error('body'));
      const params = spec.params ? spec.params.safeParse(req.params) : { success: true as const, data: req.params };
      const query = spec.query ? spec.query.safeParse(req.query) : { success: true as const, data: req.query };
      // A query value PostgreSQL's text cannot hold (a NUL: `?cursor=%00…`) is a 400 naming its
      // parameter, as in a body, rather than the database's refusal at path "".
      const queryText = storableProblem(req.query);
      // An operation without a body has refused any but `{}` in readJsonBody. No body at all reads
      // as `{}`; a JSON `null` sent as the body is checked as the value it is.
      const body = bodyError || !spec.body ? { success: true as const, data: undefined } : spec.body.safeParse(req.body === undefined ? {} : req.body);
      // Idempotency-Key on every token-API POST (docs/rest-api.md "Idempotency-Key").
      let idemKey: string | undefined;
      let idemError: unknown;
      if (token && spec.method === 'post') {
        try {
          idemKey = idempotencyKeyOf(req);
        } catch (e) {
          idemError = e;
        }
      }
      if (bodyError || queryText || !params.success || !query.success || !body.success || idemError) {
        // Token, location and scope outrank the request's shape (401, 404, 403 before 400):
        // authorize raises those itself; only a request it accepts learns what is malformed.
        if (token) {
          // A location reference that cannot name one (a NUL, a space) is only a 404: the token is
          // still checked first, but the reference never reaches SQL (whose text refuses a NUL).
          const ref = typeof req.params.locationId === 'string' ? req.params.locationId : null;
          const named = ref === null || locationParam.safeParse(ref).success;
          await callFn(pool, 'app.authorize', named ? [token, ref, spec.scope] : [token, null, null]);
        }
        // A malformed id names nothing: 404, not 400.
        if (!params.success) throw new ApiError(404, 'not_found', 'Resource not found');
        if (bodyError) throw bodyError;
        if (queryText) throw queryText;
        if (!query.success) throw fromZod(query.error);
        if (!body.success) throw fromZod(body.error);
        throw idemError;
      }
      let status = spec.status ?? 200;
      const result = await spec.handler({
        token,
        params: params.data as never,
        query: query.data as never,
        body: body.data as never,
        req,
        res,
        authCache,
        authorize: async () => {
          await callFn(pool, 'app.authorize', [token, (params.data as { locationId?: string }).locationId ?? null, spec.scope]);
        },
        call: idemKey !== undefined
          ? onlyOnce(async (fn, ...args) => {
              const answer = await callIdempotent(pool, {
                tokenHash: token, locationRef: (params.data as { locationId?: string }).locationId ?? null, scope: spec.scope,
                key: idemKey!, fingerprint: fingerprint(spec.method, spec.path, params.data as Record<string, unknown>, body.data), status,
              }, fn, args);
              if (answer.replayed) res.setHeader(REPLAYED_HEADER, 'true');
              status = answer.status;
              return new JsonText(answer.body);
            })
          : spec.list
          ? async (fn, ...args) => callPageText(pool, fn, args)
          : async (fn, ...args) => {
              const text = await callJsonText(pool, fn, args);
              return text === null ? null : new JsonText(text);
            },
      });
      if (result === null || result === undefined) throw new ApiError(404, 'not_found', 'Resource not found');
      if (spec.list) {
        const page = result as PageText;
        if (page.next_cursor) res.setHeader('Link', nextLink(req.originalUrl, page.next_cursor));
        sendData(res, status, new JsonText(page.data));
        return;
      }
      sendData(res, status, result);
    });
  }
  // Known path, wrong method: 405 with Allow.
  for (const [path, methods] of byPath) {
    const allow = [...methods, ...(methods.has('GET') ? ['HEAD'] : [])].join(', ');
    router.all(path, () => {
      throw new ApiError(405, 'method_not_allowed', `Method not allowed; use ${allow}`, { allow: allow.split(', ') }, { allow });
    });
  }
  // A path segment that is not valid percent-encoding fails in the router, before any handler:
  // its 404 is still a token-API answer, counted against the key and carrying its RateLimit
  // headers (a key over its budget gets 429 here too).
  // Without a token it is the 401 any token-API path answers first.
  router.use(async (err: unknown, req: Request, res: Response, next: (err?: unknown) => void) => {
    if (!isUndecodablePath(err)) {
      next(err);
      return;
    }
    try {
      await limiter.consume(tokenHashOf(req), res, req.socket.remoteAddress ?? '');
    } catch (refused) {
      next(refused);
      return;
    }
    next(err);
  });
}

/** A known path that answers GET (and HEAD) only: any other method is 405 with Allow, as on the API's routes. */
export function getOnly(router: Pick<Router, 'all'>, path: string, methods: readonly string[] = ['GET', 'HEAD']): void {
  router.all(path, () => {
    throw new ApiError(405, 'method_not_allowed', `Method not allowed; use ${methods.join(', ')}`, { allow: [...methods] }, { allow: methods.join(', ') });
  });
}

/** An operation under an Idempotency-Key is one SQL call: a second would run outside the key's transaction. */
function onlyOnce(call: (fn: string, ...args: unknown[]) => Promise<unknown>): (fn: string, ...args: unknown[]) => Promise<unknown> {
  let used = false;
  return async (fn, ...args) => {
    if (used) throw new Error(`${fn}: a handler under an Idempotency-Key may make one call`);
    used = true;
    return call(fn, ...args);
  };
}

/** Shared parameter and query pieces. */
export const locationParam = z.string().min(1).max(100).regex(/^[A-Za-z0-9-]+$/);
export const uuidParam = uuid;
export const LocationParams = z.object({ locationId: locationParam });
/** `{ locationId, <key>: uuid }` path parameters. */
export const locAnd = <K extends string>(key: K) =>
  z.object({ locationId: locationParam, [key]: uuidParam } as { locationId: typeof locationParam } & Record<K, typeof uuidParam>);
export const pageQuery = {
  limit: queryInt(1, 200).optional(),
  cursor: z.string().min(1).max(200).optional(),
};
export const page = (q: { limit?: number; cursor?: string }) => ({ limit: q.limit, cursor: q.cursor });

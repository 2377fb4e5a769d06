/**
 * The request-duration histogram of the API (switchboard_http_request_duration_seconds), kept off
 * the hot path's allocations: the route template is Express's matched route (`req.route.path`),
 * the histogram child of each (method, route, status
 * class) is looked up in nested maps made once, and nothing else is built per request.
 */
import type { NextFunction, Request, Response } from 'express';
import { httpRequestDuration } from './registry.js';
import { recordVoiceEvent, type VoiceMark } from './record.js';

type Child = ReturnType<typeof httpRequestDuration.labels>;
const CLASSES = ['1xx', '2xx', '3xx', '4xx', '5xx'] as const;
const UNMATCHED = 'unmatched';

/** method → route template → children per status class. */
const children = new Map<string, Map<string, Child[]>>();

function childFor(method: string, route: string, status: number): Child {
  let byRoute = children.get(method);
  if (!byRoute) children.set(method, (byRoute = new Map()));
  let byClass = byRoute.get(route);
  if (!byClass) byRoute.set(route, (byClass = []));
  const k = Math.min(4, Math.max(0, Math.floor(status / 100) - 1));
  return (byClass[k] ??= httpRequestDuration.labels(method, route, CLASSES[k]));
}

const kStart = Symbol('metrics start');
const kVoice = Symbol('voice mark');
type Timed = Response & { [kStart]?: number; [kVoice]?: VoiceMark };

/** Methods as Express reports them; anything else is counted as OTHER (a client may send any token). */
const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);
const VOICE_ROUTES = new Set(['/voice/inbound', '/voice/post-call']);

/**
 * The route template: Express's matched route as declared in its router, which stays on the
 * request after the handler (the mount path does not: Express restores `req.baseUrl` when an
 * error leaves the router, so it is left out). REST routes are served under /api/v1 and / alike
 * and are labelled once (`/locations/:locationId/calls`); platform routes keep their names
 * (`/voice/post-call`), which no REST route shares.
 */
function routeOf(req: Request): string {
  const path = req.route?.path as unknown;
  return typeof path === 'string' ? path : path === undefined ? UNMATCHED : String(path);
}

function onFinish(this: Timed): void {
  const req = this.req as Request;
  const route = routeOf(req);
  childFor(METHODS.has(req.method) ? req.method : 'OTHER', route, this.statusCode).observe((performance.now() - this[kStart]!) / 1000);
  if (VOICE_ROUTES.has(route) && req.method === 'POST') recordVoiceEvent(this[kVoice], this.statusCode);
}

/** Mounted first: starts the clock, and observes the histogram once the response has been sent. */
export function requestMetrics() {
  return (_req: Request, res: Response, next: NextFunction): void => {
    (res as Timed)[kStart] = performance.now();
    res.once('finish', onFinish);
    next();
  };
}

/** A voice route's note of what it received (type, ignored), for switchboard_voice_events_total. */
export function markVoice(res: Response, mark: VoiceMark): void {
  (res as Timed)[kVoice] = mark;
}

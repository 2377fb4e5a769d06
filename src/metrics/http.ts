/**
 * The request-duration histogram of the API (switchboard_http_request_duration_seconds), kept off
 * the hot path's allocations: the route template is Express's matched route (`req.route.path`),
 * the series of each (method, route, status class) is looked up in nested maps made once and
 * counted in a typed array, so nothing is built per request.
 */
import type { Request, Response } from 'express';
import { httpRequestDuration, onCollect, REQUEST_BUCKETS } from './registry.js';
import { recordVoiceEvent, type VoiceMark } from './record.js';

const CLASSES = ['1xx', '2xx', '3xx', '4xx', '5xx'] as const;
const UNMATCHED = 'unmatched';

/**
 * One series of the histogram, counted here with no allocation per request (a typed array of
 * bucket counts, a sum, a count) and copied into prom-client's own entry when a scrape collects.
 * prom-client's observe() builds a label object and a hash string per call, which is what a
 * hot path of a millisecond a request cannot spend.
 */
interface Series {
  counts: Float64Array;
  sum: number;
  count: number;
  /** prom-client's entry for these labels (in the histogram's hashMap). */
  entry: { labels: Record<string, string>; bucketValues: Record<number, number>; sum: number; count: number };
}

const all: Series[] = [];
/** method → route template → series per status class. */
const children = new Map<string, Map<string, Series[]>>();
const internals = httpRequestDuration as unknown as { hashMap: Record<string, Series['entry']> };

function seriesFor(method: string, route: string, status: number): Series {
  let byRoute = children.get(method);
  if (!byRoute) children.set(method, (byRoute = new Map()));
  let byClass = byRoute.get(route);
  if (!byClass) byRoute.set(route, (byClass = []));
  const k = Math.min(4, Math.max(0, Math.floor(status / 100) - 1));
  let series = byClass[k];
  if (!series) {
    const labels = { method, route, status_class: CLASSES[k] };
    series = { counts: new Float64Array(REQUEST_BUCKETS.length), sum: 0, count: 0, entry: { labels, bucketValues: {}, sum: 0, count: 0 } };
    byClass[k] = series;
    all.push(series);
  }
  return series;
}

function observe(series: Series, seconds: number): void {
  let i = 0;
  while (i < REQUEST_BUCKETS.length && seconds > REQUEST_BUCKETS[i]) i++;
  if (i < REQUEST_BUCKETS.length) series.counts[i] += 1;
  series.sum += seconds;
  series.count += 1;
}

// At scrape time: each series' counts into prom-client's entries, which it then formats as usual.
onCollect(httpRequestDuration, () => {
  for (const s of all) {
    const { entry } = s;
    for (let i = 0; i < REQUEST_BUCKETS.length; i++) entry.bucketValues[REQUEST_BUCKETS[i]] = s.counts[i];
    entry.sum = s.sum;
    entry.count = s.count;
    internals.hashMap[`${entry.labels.method}|${entry.labels.route}|${entry.labels.status_class}`] = entry;
  }
});

const kVoice = Symbol('voice mark');
type Marked = Response & { [kVoice]?: VoiceMark };

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

/**
 * Observes one finished request (the access log's per-response hook, src/http/request-log.ts, so
 * metrics add no middleware and no listener of their own to a request).
 */
export function observeRequest(req: Request, res: Response, ms: number): void {
  const route = routeOf(req);
  observe(seriesFor(METHODS.has(req.method) ? req.method : 'OTHER', route, res.statusCode), ms / 1000);
  if (VOICE_ROUTES.has(route) && req.method === 'POST') recordVoiceEvent((res as Marked)[kVoice], res.statusCode);
}

/** A voice route's note of what it received (type, ignored), for switchboard_voice_events_total. */
export function markVoice(res: Response, mark: VoiceMark): void {
  (res as Marked)[kVoice] = mark;
}

import { randomUUID } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import type { Logger } from '../log.js';

declare module 'node:http' {
  interface IncomingMessage {
    /** The request id (x-request-id), echoed on the response. */
    id: string;
    /** A logger bound to this request (made on first use). */
    log: Logger;
  }
}

const REQUEST_ID = /^[\w.-]{1,100}$/;
const PARAM_NAME = /^[a-z_][\w.[\]-]{0,39}$/i;
/**
 * A path segment shown as it is: a UUID, or a route word or slug (lower case, fewer than five
 * digits: a phone has seven or more). Anything else, such as a phone or an e-mail sent where an id
 * belongs (`/leads/+15125550143`), is `[redacted]`. The common case, a path of such segments only,
 * is one regular-expression test.
 */
const UUID = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';
const SEGMENT = `(?:${UUID}|(?!(?:[^/\\d]*\\d){5})[a-z0-9][a-z0-9_.-]{0,62})`;
const SHOWN_SEGMENT = new RegExp(`^${SEGMENT}$`);
const SHOWN_PATH = new RegExp(`^(?:/${SEGMENT}?)*$`);

/** `name=[redacted]` for each parameter of a query or matrix part, names only. */
function namesOnly(params: string, sep: string): string[] {
  // Names that are not plain identifiers (`?+15125550143`) are left out as well.
  const names = [...new Set(new URLSearchParams(params.replaceAll(sep, '&')).keys())].filter((n) => PARAM_NAME.test(n));
  return names.map((n) => `${n}=[redacted]`);
}

/**
 * The URL as logged: the path, and only the names of query parameters. Their values can be a
 * caller's phone or e-mail (`caller-data?phone=…`), so no value reaches a log line. Matrix-style
 * parameters after a `;` in a path segment (`/caller-data;phone=…`) are treated the same way.
 */
export function loggedUrl(url: string): string {
  const q = url.indexOf('?');
  let path = q < 0 ? url : url.slice(0, q);
  // A path of shown segments only (no `;` either) is the common case: one test.
  if (!SHOWN_PATH.test(path)) {
    path = path.split('/').map((seg) => {
      const i = seg.indexOf(';');
      const head = i < 0 ? seg : seg.slice(0, i);
      const shownHead = head === '' || SHOWN_SEGMENT.test(head) ? head : '[redacted]';
      if (i < 0) return shownHead;
      const shown = namesOnly(seg.slice(i + 1), ';');
      return shown.length ? `${shownHead};${shown.join(';')}` : shownHead;
    }).join('/');
  }
  if (q < 0) return path;
  const shown = namesOnly(url.slice(q + 1), '&');
  return shown.length ? `${path}?${shown.join('&')}` : path;
}
const kLog = Symbol('request logger');
const kUrl = Symbol('request url');

type LoggedRequest = Request & { [kLog]?: Logger; [kUrl]?: string };

/**
 * Request id and one access-log line per response (`request completed`, or `request aborted`
 * when the client went away first), with method, URL (query values left out: loggedUrl), status
 * and time; error level for 5xx.
 * The per-request child logger exists only when a handler logs something (errors), so a request
 * costs one log call and nothing more.
 */
/** Called once per response with its duration (ms) from the same clock as the access line. */
export type RequestObserver = (req: Request, res: Response, ms: number) => void;

export function requestLog(log: Logger, observe?: RequestObserver) {
  // The access line holds only id, method, URL, status and time: nothing to redact, so it skips
  // the redaction pass every other log line goes through.
  const access = log.child({}, { redact: [] });
  const patched = new WeakSet<object>();
  return (req: Request, res: Response, next: NextFunction): void => {
    const start = performance.now();
    const incoming = req.headers['x-request-id'];
    const id = typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : randomUUID();
    const { method } = req;
    const url = loggedUrl(req.url);
    res.setHeader('x-request-id', id);
    req.id = id;
    (req as LoggedRequest)[kUrl] = url;
    // req.log: a getter on the app's request prototype (defined once), so a request pays for its
    // child logger only when something logs through it.
    const proto = Object.getPrototypeOf(req) as object;
    if (!patched.has(proto)) {
      patched.add(proto);
      Object.defineProperty(proto, 'log', {
        configurable: true,
        get(this: LoggedRequest) {
          return (this[kLog] ??= log.child({ req: { id: this.id, method: this.method, url: this[kUrl] } }));
        },
      });
    }
    res.once('close', () => {
      const statusCode = res.statusCode;
      const ms = performance.now() - start;
      // Request metrics ride on this listener (one per request, not two): src/metrics/http.ts.
      observe?.(req, res, ms);
      // An error the mapper chose to summarise (a 503 during an outage: code and cause, no stack).
      const err = (res as unknown as { err?: unknown }).err;
      const line = { req: { id, method, url }, res: { statusCode }, responseTime: Math.round(ms), ...(err ? { err } : {}) };
      if (!res.writableFinished) access.warn(line, 'request aborted');
      else if (statusCode >= 500) access.error(line, 'request completed');
      else access.info(line, 'request completed');
    });
    next();
  };
}

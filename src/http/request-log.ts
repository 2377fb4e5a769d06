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

/**
 * Request id and one access-log line per response (`request completed`, or `request aborted`
 * when the client went away first), with method, URL, status and time; error level for 5xx.
 * The per-request child logger exists only when a handler logs something (errors), so a request
 * costs one log call and nothing more.
 */
export function requestLog(log: Logger) {
  return (req: Request, res: Response, next: NextFunction): void => {
    const start = performance.now();
    const incoming = req.headers['x-request-id'];
    const id = typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : randomUUID();
    const { method, url } = req;
    res.setHeader('x-request-id', id);
    req.id = id;
    let child: Logger | undefined;
    Object.defineProperty(req, 'log', {
      configurable: true,
      get: () => (child ??= log.child({ req: { id, method, url } })),
    });
    res.once('close', () => {
      const statusCode = res.statusCode;
      const line = { req: { id, method, url }, res: { statusCode }, responseTime: Math.round(performance.now() - start) };
      if (!res.writableFinished) log.warn(line, 'request aborted');
      else if (statusCode >= 500) log.error(line, 'request completed');
      else log.info(line, 'request completed');
    });
    next();
  };
}

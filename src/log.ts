import { pino, type Logger } from 'pino';
import { safeErr } from './privacy/log-safe.js';

/**
 * Paths that may carry secrets. Tokens, webhook secrets and provider credentials never reach a log
 * line; request logging additionally drops bodies altogether.
 */
export const redactPaths = [
  'req.headers.authorization',
  'req.headers["x-retell-signature"]',
  'req.headers["stripe-signature"]',
  'req.headers.cookie',
  'headers.authorization',
  'authorization',
  'token',
  'secret',
  '*.token',
  '*.secret',
  '*.password',
  'password',
];

/**
 * Server logs go to stdout; the CLI passes fd 2 so stdout stays pure JSON. Server lines are
 * written in batches (up to 4 KiB, at least every 200 ms; flushed on exit): one write per line
 * cost more than the rest of a small request's Node-side work.
 */
export function createLogger(level: string = process.env.LOG_LEVEL ?? 'info', fd: 1 | 2 = 1): Logger {
  return pino(
    {
      level,
      base: { service: 'switchboard' },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: { paths: redactPaths, censor: '[redacted]' },
      // A database error's row and quoted values are caller data (src/privacy/log-safe.ts).
      serializers: { err: safeErr },
    },
    fd === 2 ? pino.destination({ fd, sync: true }) : pino.destination({ fd, sync: false, minLength: 4096, periodicFlush: 200 }),
  );
}

export type { Logger };

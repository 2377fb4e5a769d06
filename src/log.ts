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

/**
 * Repeated failures logged at most once per interval (a database outage: the API's 503s in
 * src/http/errors.ts, the worker's lanes in src/worker/outage.ts). `take()` tells whether this
 * failure gets a line, and how many unlogged failures that line stands for.
 */
export class LogThrottle {
  private lastAt = -Infinity;
  private suppressed = 0;

  constructor(
    readonly intervalMs = 15_000,
    private readonly now: () => number = Date.now,
  ) {}

  /** The failures not logged since the last line when this one is to be logged; null (and counted) otherwise. */
  take(): number | null {
    const t = this.now();
    if (t - this.lastAt < this.intervalMs) {
      this.suppressed += 1;
      return null;
    }
    const n = this.suppressed;
    this.lastAt = t;
    this.suppressed = 0;
    return n;
  }

  /** Starts afresh (it works again); returns the failures that were not logged. */
  reset(): number {
    const n = this.suppressed;
    this.lastAt = -Infinity;
    this.suppressed = 0;
    return n;
  }
}

/** What a failure was, in a few words: its code (SQLSTATE, errno), else the first line of its message. */
export function failureCause(err: unknown): string {
  const e = err as { code?: unknown; message?: unknown };
  if (typeof e?.code === 'string' && e.code) return e.code;
  return String(e?.message ?? err).split('\n')[0].slice(0, 120);
}

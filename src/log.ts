import { pino, type Logger } from 'pino';

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

/** Server logs go to stdout; the CLI passes fd 2 so stdout stays pure JSON. */
export function createLogger(level: string = process.env.LOG_LEVEL ?? 'info', fd: 1 | 2 = 1): Logger {
  return pino(
    {
      level,
      base: { service: 'switchboard' },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: { paths: redactPaths, censor: '[redacted]' },
    },
    pino.destination({ fd, sync: fd === 2 }),
  );
}

export type { Logger };

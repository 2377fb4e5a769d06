/**
 * How the operator scripts (`npm run cli`, `npm run db`) end on an error: one line on stdout, the
 * API's error envelope `{ "error": { code, message, details } }`, and exit status 1.
 */
import { writeSync } from 'node:fs';
import { ConfigError, loadConfig, type Config } from '../config.js';
import { CONNECT_TIMEOUT_MS, PG_TIMEOUT_MESSAGES } from '../db/pools.js';
import { ApiError, toApiError } from '../http/errors.js';

/** `scheme://user:password@`: a connection string's password never reaches the output. */
const CREDENTIALS = /(\/\/[^\s:/@]*:)[^\s@]*@/g;

/** node-postgres's time-outs, said plainly (src/db/pools.ts sets them). */
const TIMEOUTS: Record<string, string> = {
  [PG_TIMEOUT_MESSAGES.connect]: `no answer within ${CONNECT_TIMEOUT_MS / 1000} s of connecting`,
  'Connection terminated due to connection timeout': `no answer within ${CONNECT_TIMEOUT_MS / 1000} s of connecting`,
  [PG_TIMEOUT_MESSAGES.answer]: 'no answer to a statement within its bound',
};

/** A setting the start-up check refused is the operator's to fix: a validation error naming it. */
const mapError = (err: unknown): ApiError =>
  err instanceof ConfigError ? new ApiError(400, 'validation_error', err.message, {}) : toApiError(err);

/** The envelope printed for `err`: an operator gets the cause an API client is not shown. */
export function cliError(err: unknown, mapped: ApiError = mapError(err)): { code: string; message: string; details: Record<string, unknown> } {
  const first = err instanceof Error ? err.message.split('\n')[0] : '';
  const cause = TIMEOUTS[first] ?? first;
  const message = mapped.status === 500 && cause ? cause
    : mapped.status === 503 && mapped.code === 'unavailable' && cause && cause !== mapped.message ? `${mapped.message} (${cause})`
      : mapped.message;
  return { code: mapped.code, message: message.replace(CREDENTIALS, '$1***@'), details: mapped.details };
}

/** Prints the error line and exits 1. */
export function exitWithError(err: unknown, mapped?: ApiError): never {
  // Synchronous: process.exit() must not cut a piped stdout short.
  writeSync(1, `${JSON.stringify({ error: cliError(err, mapped) })}\n`);
  process.exit(1);
}

/** The settings of a script that runs before anything else: a refused one ends it with the error line. */
export function loadConfigOrExit(): Config {
  try {
    return loadConfig();
  } catch (err) {
    exitWithError(err);
  }
}

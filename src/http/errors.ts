import type { NextFunction, Request, Response } from 'express';
import { z, ZodError } from 'zod';
import { failureCause, LogThrottle, type Logger } from '../log.js';

/** An error that leaves the API as `{ error: { code, message, details } }` with `status`. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: Record<string, unknown> = {},
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

/** Other keys allowed, said by leaving `additionalProperties` out (zod would write the equivalent `{}`). */
const OPEN = { additionalProperties: undefined } as const;

/** The error envelope every 4xx/5xx answer carries (the OpenAPI component `Error`). */
export const ErrorEnvelope = z.strictObject({
  error: z.strictObject({
    code: z.string().meta({ examples: ['validation_error', 'forbidden', 'not_found'] }),
    message: z.string(),
    details: z.looseObject({
      issues: z.array(z.looseObject({ path: z.string(), message: z.string() }).meta({ id: 'ValidationIssue', ...OPEN })).optional(),
      required_scope: z.string().optional(),
    }).meta(OPEN).describe('{} when empty; validation: { issues: [{ path, message }] }; forbidden: { required_scope }; invalid_transition: { from, to, allowed }; slot_unavailable: { window_start, reason, alternatives: [{ start, end }] }'),
  }),
}).meta({ id: 'Error', description: 'The error envelope of every 4xx and 5xx answer' });

export const notFound = (what = 'Resource') => new ApiError(404, 'not_found', `${what} not found`);

/** Our SQLSTATEs (see migrations: app.raise) and the standard ones a client's input can cause. */
const SQLSTATES: Record<string, [number, string]> = {
  SB400: [400, 'validation_error'],
  SB401: [401, 'unauthorized'],
  SB403: [403, 'forbidden'],
  SB404: [404, 'not_found'],
  SB409: [409, 'conflict'],
  SBTR9: [409, 'invalid_transition'],
  SBSL9: [409, 'slot_unavailable'],
  SBOA0: [400, 'oauth_required'],
  SB503: [503, 'not_configured'],
  SBIK9: [409, 'idempotency_key_in_use'],
  SBIK2: [422, 'idempotency_key_reused'],
  SBIK7: [410, 'idempotency_answer_erased'],
  '23505': [409, 'conflict'],
  '23514': [400, 'validation_error'],
  '23502': [400, 'validation_error'],
  '23503': [400, 'validation_error'],
  '22P02': [400, 'validation_error'],
  '22007': [400, 'validation_error'],
  '22008': [400, 'validation_error'],
  '22003': [400, 'validation_error'],
  '22001': [400, 'validation_error'],
  '22P05': [400, 'validation_error'], // untranslatable character: \u0000 in JSON
  '22021': [400, 'validation_error'], // NUL byte in text
};

/**
 * The database answered, but could not finish the statement now: cancelled at its
 * statement_timeout (57014), or chosen as a deadlock's or a serialisation's victim (40P01, 40001).
 * The transaction was rolled back whole, so the client may send the request again.
 */
const TRANSIENT = new Set(['57014', '40P01', '40001']);

/** Connection-level failures: the database is down or going away. */
const UNAVAILABLE = new Set(['57P01', '57P02', '57P03', '53300', '08000', '08003', '08006', '08001', '08004']);
const NET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EHOSTUNREACH']);

interface PgLikeError {
  code?: string;
  message?: string;
  detail?: string;
  constraint?: string;
  column?: string;
  table?: string;
}

function parseDetails(detail: string | undefined): Record<string, unknown> {
  if (!detail) return {};
  try {
    const v = JSON.parse(detail);
    return v && typeof v === 'object' && !Array.isArray(v) ? v : {};
  } catch {
    return {};
  }
}

/** Human message for constraint failures, naming the field but never echoing SQL. */
function constraintMessage(e: PgLikeError): [string, Record<string, unknown>] {
  // `<table>_<columns>_<check|key|fkey>`, PostgreSQL's default name; the tenant column every
  // unique key starts with (migrations/CONVENTIONS.md) is not the field the client got wrong.
  const name = e.table && e.constraint?.startsWith(`${e.table}_`) ? e.constraint.slice(e.table.length + 1)
    : e.constraint?.replace(/^[a-z_]+?_(?=[a-z_]+_(check|key|fkey)$)/, '');
  const field = e.column ?? name?.replace(/_(check|key|fkey)$/, '').replace(/^location_id_(?=[a-z])/, '');
  switch (e.code) {
    case '23505':
      return ['A record with the same unique value already exists', field ? { field } : {}];
    case '23503':
      return ['A referenced record does not exist', { issues: [{ path: field ?? '', message: 'Unknown reference' }] }];
    default:
      return ['The request contains an invalid value', { issues: [{ path: field ?? '', message: 'Invalid value' }] }];
  }
}

/** The router's failure to decode a path parameter (not valid percent-encoding): answered 404. */
export const isUndecodablePath = (err: unknown): boolean =>
  (err as { status?: unknown } | undefined)?.status === 400 && /^Failed to decode param/.test((err as Error).message ?? '');

export function toApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  if (err instanceof ZodError) return fromZod(err);
  const e = err as PgLikeError & { type?: string; status?: number; errno?: string; expose?: boolean };
  if (e?.type === 'entity.parse.failed') return new ApiError(400, 'invalid_json', 'Request body is not valid JSON');
  if (e?.type === 'encoding.invalid') return new ApiError(400, 'invalid_json', 'Request body is not valid JSON: its bytes are not UTF-8');
  if (e?.type === 'entity.too.large') return new ApiError(413, 'payload_too_large', 'Request body exceeds 64 KiB');
  if (e?.type === 'encoding.unsupported' || e?.type === 'charset.unsupported')
    return new ApiError(415, 'unsupported_media_type', 'Unsupported body encoding');
  // The body reader's other client errors (src/http/app.ts, platform/raw.ts): bytes that do not
  // decode with their Content-Encoding (zlib/brotli/zstd errors), a length that does not match.
  if (e?.expose === true && typeof e.status === 'number' && e.status >= 400 && e.status < 500 && !(e.code && SQLSTATES[e.code])) {
    if (/^(Z_|ERR__|ERR_BROTLI|ERR_ZSTD|ZSTD_)/.test(e.code ?? '')) {
      return new ApiError(400, 'invalid_body', 'Request body does not decode with its Content-Encoding');
    }
    if (e.type === 'request.size.invalid' || e.type === 'request.aborted') {
      return new ApiError(400, 'invalid_body', 'Request body does not match its Content-Length');
    }
  }
  // The router's own: a path segment that is not valid percent-encoding names nothing.
  if (isUndecodablePath(err)) return new ApiError(404, 'not_found', 'Resource not found');
  if (e?.code && SQLSTATES[e.code]) {
    const [status, code] = SQLSTATES[e.code];
    if (e.code.startsWith('SB')) return new ApiError(status, code, e.message ?? code, parseDetails(e.detail));
    const [message, details] = constraintMessage(e);
    return new ApiError(status, code, message, details);
  }
  if (e?.code && TRANSIENT.has(e.code)) {
    return new ApiError(503, 'unavailable', 'The database could not finish the request in time; try again shortly', {}, { 'retry-after': '5' });
  }
  // node-postgres's own: the connection dropped, no connection within connectionTimeoutMillis (a
  // pool's message, a client's), or no answer within the pool's query_timeout (src/db/pools.ts).
  if ((e?.code && (UNAVAILABLE.has(e.code) || NET_CODES.has(e.code))) || /Connection terminated|timeout exceeded when trying to connect|^timeout expired$|is not queryable|^Query read timeout$/i.test(e?.message ?? '')) {
    return new ApiError(503, 'unavailable', 'The database is unavailable; try again shortly', {}, { 'retry-after': '5' });
  }
  return new ApiError(500, 'internal_error', 'Internal server error');
}

export function fromZod(err: ZodError): ApiError {
  // A schema may name a more specific error code on a custom issue (e.g. oauth_required).
  const special = err.issues.find((i) => i.code === 'custom' && typeof i.params?.code === 'string');
  if (special?.code === 'custom') {
    return new ApiError(400, String(special.params!.code), special.message, { issues: [{ path: special.path.join('.'), message: special.message }] });
  }
  return new ApiError(400, 'validation_error', 'Request validation failed', {
    issues: err.issues.map((i) => ({ path: i.path.join('.'), message: i.message })),
  });
}

export function sendError(res: Response, err: ApiError): void {
  // A 503 is an expected state (database down, feature not configured): the access-log line for it
  // names the code instead of a made-up error with a stack trace.
  const logged = res as unknown as { err?: unknown };
  if (err.status === 503) logged.err ??= { code: err.code };
  for (const [k, v] of Object.entries(err.headers)) res.setHeader(k, v);
  res.status(err.status).json({ error: { code: err.code, message: err.message, details: err.details } });
}

/**
 * During a database outage every request fails the same way: each gets one short access-log line
 * (src/http/request-log.ts, with the cause and no stack), and the outage itself one warning at most
 * every `intervalMs`, counting the failures it did not repeat.
 */
export class OutageLog {
  private readonly throttle: LogThrottle;

  constructor(intervalMs = 15_000, now: () => number = Date.now) {
    this.throttle = new LogThrottle(intervalMs, now);
  }

  failed(log: Logger | undefined, cause: string): void {
    const suppressed = this.throttle.take();
    if (suppressed === null) return;
    log?.warn({ cause, suppressed, interval_s: this.throttle.intervalMs / 1000 },
      'database unavailable: requests answer 503 until it is back');
  }
}

/** The one error mapper: everything thrown in a handler ends here. */
export function errorHandler(err: unknown, req: Request, res: Response, _next: NextFunction): void {
  const apiErr = toApiError(err);
  const sqlstate = (err as { code?: unknown } | undefined)?.code;
  if (typeof sqlstate === 'string' && TRANSIENT.has(sqlstate)) {
    // Not an outage: this one statement was cancelled or chosen as a victim; the rest are served.
    (res as unknown as { err?: unknown }).err = { code: apiErr.code, cause: sqlstate };
    req.log?.warn({ cause: sqlstate }, 'the database rolled the request back (statement timeout, deadlock or serialisation)');
  } else if (apiErr.status === 503 && apiErr.code === 'unavailable') {
    const cause = failureCause(err);
    // The access-log line (src/http/request-log.ts) carries `res.err`: the code and cause, no stack.
    (res as unknown as { err?: unknown }).err = { code: apiErr.code, cause };
    const outage: OutageLog = (req.app.locals.outageLog ??= new OutageLog());
    outage.failed(req.log, cause);
  } else if (apiErr.status >= 500) {
    req.log?.error({ err }, 'request failed');
  }
  if (res.headersSent) return;
  sendError(res, apiErr);
}

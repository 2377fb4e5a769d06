/**
 * `Idempotency-Key` on token-API POSTs (docs/rest-api.md "Idempotency-Key"): the header's value,
 * the request's fingerprint, and the one SQL call that runs the operation under the key
 * (app.idempotency_begin, the operation, app.idempotency_finish: one statement, one transaction).
 */
import { createHash } from 'node:crypto';
import type { Request } from 'express';
import type pg from 'pg';
import { AS_TEXT, callText, toParam } from '../db/pools.js';
import { ApiError } from '../http/errors.js';

export const IDEMPOTENCY_HEADER = 'idempotency-key';
export const REPLAYED_HEADER = 'Idempotent-Replayed';
export const MAX_KEY_LENGTH = 255;

/** Visible ASCII and inner spaces: what a client can send back unchanged on a retry. */
const KEY_CHARS = /^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/;

/**
 * The key the request carries: undefined without the header, else its value (a structured-field
 * string `"…"` is unquoted, a bare token taken as is). Throws 400 invalid_idempotency_key for an
 * empty, over-long, repeated or non-ASCII value.
 */
export function idempotencyKeyOf(req: Request): string | undefined {
  const values = req.headersDistinct[IDEMPOTENCY_HEADER];
  if (values === undefined) return undefined;
  if (values.length !== 1) throw invalidKey('Send one Idempotency-Key header');
  let key = values[0].trim();
  const quoted = /^"((?:[^"\\]|\\["\\])*)"$/.exec(key);
  if (quoted) key = quoted[1].replace(/\\(["\\])/g, '$1');
  if (key.length === 0) throw invalidKey('Idempotency-Key is empty');
  if (key.length > MAX_KEY_LENGTH) throw invalidKey(`Idempotency-Key is longer than ${MAX_KEY_LENGTH} characters`);
  if (!KEY_CHARS.test(key)) throw invalidKey('Idempotency-Key must be printable ASCII');
  return key;
}

function invalidKey(message: string): ApiError {
  return new ApiError(400, 'invalid_idempotency_key', message, { header: 'Idempotency-Key', max_length: MAX_KEY_LENGTH });
}

/** JSON with object keys sorted at every level: equal values, equal text. */
export function canonicalJson(v: unknown): string {
  if (v === undefined || v === null) return 'null';
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  if (typeof v === 'object' && !(v instanceof Date)) {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o).filter((k) => o[k] !== undefined).sort().map((k) => `${JSON.stringify(k)}:${canonicalJson(o[k])}`).join(',')}}`;
  }
  return JSON.stringify(v);
}

/**
 * What "the same request" means: method, the operation's path without its location part (the key
 * is already scoped to the location; `/webhook-endpoints/{id}/test` and its
 * `/locations/{loc}/…` twin are one operation), the other path parameters, and the validated body.
 */
export function fingerprint(method: string, path: string, params: Record<string, unknown>, body: unknown): string {
  const operation = path.replace(/^\/locations\/:locationId(?=\/|$)/, '');
  const { locationId: _scope, ...rest } = params as { locationId?: unknown };
  return createHash('sha256')
    .update(`${method.toUpperCase()} ${operation}\n${canonicalJson(rest)}\n${canonicalJson(body)}`)
    .digest('hex');
}

export interface IdempotentAnswer {
  replayed: boolean;
  status: number;
  /** The operation's JSON answer as text, byte for byte what the first request sent. */
  body: string;
}

export interface IdempotentCall {
  tokenHash: string;
  locationRef: string | null;
  scope: string | null;
  key: string;
  fingerprint: string;
  status: number;
}

/**
 * Runs `fn(...args)` under the key in one statement, so one transaction (migrations: the comment
 * above app.idempotency_begin): begin authorizes, takes the key and finds a stored answer; only
 * when there is none does the operation run, and finish stores its answer. A named statement per
 * operation: each connection plans it once, and the operation's arguments are typed by its
 * signature as in an ordinary call.
 */
export async function callIdempotent(pool: pg.Pool, c: IdempotentCall, fn: string, args: unknown[]): Promise<IdempotentAnswer> {
  if (!fn.startsWith('api.')) throw new Error(`bad function name ${fn}`);
  const params = callText(fn, args, 7);
  const { rows } = await pool.query<string[]>({
    name: `sb:idem:${fn}/${args.length}`,
    text: `with b as materialized (select * from app.idempotency_begin($1, $2, $3, $4, $5))
           select b.replayed_status is not null, coalesce(b.replayed_status, $6::int),
                  case when b.replayed_status is not null then b.replayed_body
                       else app.idempotency_finish($4, $5, $6::int, (${fn}(${params}))::text) end
             from b`,
    values: [c.tokenHash, c.locationRef, c.scope, c.key, c.fingerprint, c.status, ...args.map(toParam)],
    rowMode: 'array', types: AS_TEXT,
  });
  const [replayed, status, body] = rows[0];
  return { replayed: replayed === 't', status: Number(status), body };
}

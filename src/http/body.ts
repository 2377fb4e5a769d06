/**
 * Limits on what a parsed JSON body may look like before anything walks it recursively.
 * JSON.parse copes with any depth, but JSON.stringify (which sends a body to SQL as jsonb), zod
 * and PostgreSQL's jsonb parser recurse once per level: ~4,500 levels fit in 30 KB and overflow
 * the stack. No body of this API nests anywhere near 32 levels (the deepest documented ones have
 * four; Stripe events about ten), so deeper bodies are refused as 400 invalid_json.
 */
import { isUtf8 } from 'node:buffer';
import express, { type Request, type Response } from 'express';
import { UNSTORABLE } from '../db/storable-text.js';
import { ApiError, toApiError } from './errors.js';

export const MAX_JSON_DEPTH = 32;

/** Nesting depth of a parsed JSON value (a scalar is 0, `[]` and `{}` are 1), without recursion. */
export function jsonDepth(value: unknown, stopAfter = Infinity): number {
  let max = 0;
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [v, d] = stack.pop()!;
    if (v === null || typeof v !== 'object') continue;
    const depth = d + 1;
    if (depth > max) max = depth;
    if (max > stopAfter) return max;
    for (const child of Array.isArray(v) ? v : Object.values(v)) {
      if (child !== null && typeof child === 'object') stack.push([child, depth]);
    }
  }
  return max;
}

/** 400 invalid_json when `value` nests deeper than MAX_JSON_DEPTH. */
export function assertJsonDepth(value: unknown): void {
  if (jsonDepth(value, MAX_JSON_DEPTH) > MAX_JSON_DEPTH) {
    throw new ApiError(400, 'invalid_json', `Request body nests deeper than ${MAX_JSON_DEPTH} levels`, { max_depth: MAX_JSON_DEPTH });
  }
}


/**
 * 400 validation_error naming the first field (keys included) whose text PostgreSQL cannot store,
 * before a route validates or sends it (docs/rest-api.md, the general rules): a database refusal
 * would name no field. Run after assertJsonDepth, so the walk is bounded.
 */
export function assertStorableText(value: unknown): void {
  const problem = storableProblem(value);
  if (problem) throw problem;
}

/** assertStorableText's refusal, returned rather than thrown (a query string's, kept until after app.authorize). */
export function storableProblem(value: unknown): ApiError | undefined {
  const stack: [unknown, string[]][] = [[value, []]];
  while (stack.length > 0) {
    const [v, path] = stack.pop()!;
    if (typeof v === 'string') {
      if (UNSTORABLE.test(v)) return unstorable(path);
      continue;
    }
    if (v === null || typeof v !== 'object') continue;
    for (const [k, child] of Array.isArray(v) ? v.map((c, i) => [String(i), c] as const) : Object.entries(v)) {
      if (UNSTORABLE.test(k)) return unstorable([...path, k]);
      stack.push([child, [...path, k]]);
    }
  }
  return undefined;
}

function unstorable(path: string[]): ApiError {
  const message = 'Contains a NUL (U+0000) or an unpaired surrogate, which cannot be stored';
  return new ApiError(400, 'validation_error', 'Request validation failed', { issues: [{ path: path.join('.'), message }] });
}

/** application/json and any `+json` type. */
const JSON_TYPE = /^application\/([a-z0-9.+-]*\+)?json\s*(;|$)/i;
/** A body on an operation that takes one: 64 KiB at most, after decoding. */
const BODY_LIMIT = '64kb';
/** What an operation that takes no body reads at most: room for `{}` and some whitespace. */
const NO_BODY_LIMIT = 256;

/**
 * Node frames a body sent with `Transfer-Encoding: gzip, chunked` by its last coding and hands
 * over the rest still coded: the gzip bytes would be read as the body. Only `chunked` is a
 * transfer coding this API takes (compression is Content-Encoding); another one → 415.
 */
export function assertTransferCoding(req: Request): void {
  const codings = (req.headers['transfer-encoding'] ?? '').split(',').map((c) => c.trim().toLowerCase()).filter(Boolean);
  const other = codings.find((c) => c !== 'chunked');
  if (other !== undefined) {
    throw new ApiError(415, 'unsupported_media_type', `Transfer-Encoding ${other.slice(0, 40)} is not supported; send the body chunked or with a Content-Length, compressed with Content-Encoding`);
  }
}

function hasBody(req: Request): boolean {
  return req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
}

// Content-Encoding gzip, deflate, br (and zstd where Node has it) is decoded by the parser; the
// limit applies to the decoded bytes. Bytes that do not decode → 400 invalid_body, another
// encoding → 415 (src/http/errors.ts).
// Not `strict`: a top-level `null`, number, string or boolean is valid JSON, so it parses, and the
// route's schema answers it `validation_error` (expected an object), as it would any other value of
// the wrong type; `invalid_json` stays for bytes that are not JSON (docs/rest-api.md).
const parsers = {
  body: express.json({ limit: BODY_LIMIT, strict: false, type: () => true, verify: utf8Only }),
  none: express.json({ limit: NO_BODY_LIMIT, strict: false, type: () => true, verify: utf8Only }),
};

/**
 * JSON text is UTF-8 (RFC 8259): a UTF-8 body (the default charset) whose bytes are not was read
 * with each bad byte as U+FFFD and stored changed. It is refused instead (400 invalid_json), as a
 * NUL or an unpaired surrogate is. Checked on the decoded bytes (after Content-Encoding); a body
 * declared in another charset the parser accepts (UTF-16) is decoded by it.
 */
function utf8Only(_req: unknown, _res: unknown, buf: Buffer, encoding: string): void {
  if (/^utf-?8$/i.test(encoding) && !isUtf8(buf)) {
    throw Object.assign(new Error('Request body is not valid UTF-8'), { status: 400, type: 'encoding.invalid' });
  }
}

function parse(parser: express.RequestHandler, req: Request, res: Response): Promise<void> {
  return new Promise((resolve, reject) => parser(req, res, (err?: unknown) => (err ? reject(err) : resolve())));
}

/**
 * Reads and checks the request's JSON body into `req.body`, throwing what is wrong with it (415 not
 * JSON, 400 invalid_json, 413 over 64 KiB, 400 nested too deep or holding text PostgreSQL cannot
 * store). src/http/route.ts calls it only after the token and the rate limit, and raises what it
 * throws only after app.authorize has accepted the token, location and scope (docs/api-contract.md
 * §5, "Precedence"). At most 64 KiB is ever held: past the limit the parser reads the rest and
 * discards it, within Node's request time-out.
 *
 * An operation that takes no body (`takesBody` false) reads at most 256 bytes: no body, or `{}`;
 * anything else (too long, not JSON, JSON other than `{}`) is the one 400 of a body it does not
 * take (docs/rest-api.md), so 413 and 415 are answered only where there is a body.
 */
export async function readJsonBody(req: Request, res: Response, takesBody: boolean): Promise<void> {
  if (!hasBody(req)) return;
  const json = JSON_TYPE.test(req.headers['content-type'] ?? '');
  try {
    assertTransferCoding(req);
    if (!json) throw new ApiError(415, 'unsupported_media_type', 'Request bodies must be application/json');
    await parse(takesBody ? parsers.body : parsers.none, req, res);
  } catch (err) {
    const e = toApiError(err);
    if (!takesBody && (e.status === 413 || e.status === 415)) throw noBodyTaken();
    throw e;
  }
  if (!takesBody && !isEmptyObject(req.body)) throw noBodyTaken();
  assertJsonDepth(req.body);
  assertStorableText(req.body);
}

const isEmptyObject = (v: unknown) => v !== null && typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length === 0;

/** The 400 of a body sent to an operation that takes none, whatever the body is. */
function noBodyTaken(): ApiError {
  return new ApiError(400, 'validation_error', 'Request validation failed', { issues: [{ path: '', message: 'This operation takes no body' }] });
}

import express, { type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import type { z } from 'zod';
import { storableText } from '../../db/storable-text.js';
import { assertJsonDepth, assertTransferCoding } from '../body.js';
import { ApiError, fromZod } from '../errors.js';

/**
 * Reads the body as raw bytes whatever its content type: platform signatures cover the exact
 * bytes, so nothing may parse (or re-encode) the body before the signature has been checked.
 */
export function rawBody(limitBytes: number): RequestHandler {
  const parse = express.raw({ type: () => true, limit: limitBytes });
  return (req: Request, res: Response, next: NextFunction) => {
    try {
      assertTransferCoding(req);
    } catch (err) {
      next(err);
      return;
    }
    parse(req, res, (err?: unknown) => {
      if ((err as { type?: string } | undefined)?.type === 'entity.too.large') {
        next(new ApiError(413, 'payload_too_large', `Request body exceeds ${Math.round(limitBytes / 1024)} KiB`));
        return;
      }
      next(err as Error | undefined);
    });
  };
}

/** The raw body of a request that went through rawBody(); empty when there was none. */
export function bodyBytes(req: Request): Buffer {
  return Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
}

export const notConfigured = (what: string) =>
  new ApiError(503, 'not_configured', `${what} is not configured on this server`);

export const invalidSignature = (header: string) =>
  new ApiError(401, 'invalid_signature', `Missing, invalid or stale ${header} header`);

/** JSON.parse then zod, both failures as 4xx envelopes. Only called after the signature passed. */
export function parseSigned<S extends z.ZodType>(schema: S, text: string): z.output<S> {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new ApiError(400, 'invalid_json', 'Request body is not valid JSON');
  }
  // Before anything recursive (the reviver below, zod, JSON.stringify to SQL) walks it.
  assertJsonDepth(json);
  // PostgreSQL text cannot hold NUL, nor jsonb a lone surrogate (\ud800 without its pair); a
  // platform payload must still be stored (a 400 would only make the platform retry the same
  // bytes), so NULs are dropped and lone surrogates become U+FFFD, in values and keys alike.
  if (text.includes('\\u0000') || /\\u[dD][89a-fA-F]/.test(text)) {
    json = JSON.parse(text, (_key, value) => (typeof value === 'string' ? storableText(value) : storableKeys(value)));
  }
  return validate(schema, json);
}

/**
 * An object whose keys PostgreSQL can store (storableText); other values as they are. Two keys
 * that clean to the same text keep the later one's value, as JSON.parse does with duplicates.
 */
function storableKeys(value: unknown): unknown {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return value;
  const keys = Object.keys(value);
  if (keys.every((k) => storableText(k) === k)) return value;
  return Object.fromEntries(keys.map((k) => [storableText(k), (value as Record<string, unknown>)[k]]));
}

/** zod validation as a 400 validation_error envelope. */
export function validate<S extends z.ZodType>(schema: S, value: unknown): z.output<S> {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw fromZod(parsed.error);
  return parsed.data;
}

/** Answers 405 with Allow for any other method on a platform path. */
export function onlyPost(): RequestHandler {
  return (_req, res) => {
    res.setHeader('allow', 'POST');
    throw new ApiError(405, 'method_not_allowed', 'Method not allowed; use POST');
  };
}

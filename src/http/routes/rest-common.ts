/** Field pieces and checks shared by the resource routes. */
import type { Request } from 'express';
import { z } from 'zod';
import type { Config } from '../../config.js';
import { assertTarget, SsrfError } from '../../net/ssrf.js';
import { ApiError } from '../errors.js';
import { text, timestamp, uuid } from '../schemas.js';

export { text };
const HHMM = '([01][0-9]|2[0-3]):[0-5][0-9]';
export const hhmm = z.string().regex(new RegExp(`^${HHMM}$`), 'Expected HH:MM (24 h)');
/** A closing time: HH:MM, or 24:00 for midnight at the end of the day (business hours). */
export const closingTime = z.string().regex(new RegExp(`^(${HHMM}|24:00)$`), 'Expected HH:MM (24 h), or 24:00 for midnight');
export const urgency = z.number().int().min(0).max(5);
export const money = z.number().min(0).max(100_000_000);
export { uuid };
export const ts = timestamp;
export const tsNull = timestamp.nullable();

/**
 * Registration-time SSRF check of a URL a tenant gives us to call (webhook endpoint `url`,
 * integration `webhook_url`): the shared assertion of src/net/ssrf.ts, resolving the host now, and
 * a refusal becomes 400 validation_error naming the field. Sending checks again (src/net/post.ts).
 * Token, location and scope are checked first (`authorize`): the check resolves host names, and
 * only a caller allowed to register one may learn how it resolves (401, 404, 403 before 400).
 */
export async function assertTargetField(req: Request, authorize: () => Promise<void>, field: string, url: string | undefined): Promise<void> {
  if (url === undefined) return;
  await authorize();
  const cfg = req.app.locals.cfg as Config;
  try {
    await assertTarget(url, { allowPrivate: cfg.WEBHOOK_ALLOW_PRIVATE_TARGETS });
  } catch (err) {
    if (!(err instanceof SsrfError)) throw err;
    throw new ApiError(400, 'validation_error', 'Request validation failed', { issues: [{ path: field, message: err.message }] });
  }
}

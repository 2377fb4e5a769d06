/** One webhook attempt: what a claim holds, the request's headers and the signed POST. */
import type { Config } from '../config.js';
import type { ExtraCa } from '../net/ca.js';
import { guardedPost, type PostResult } from '../net/post.js';
import { retryAfterSeconds } from './retry-after.js';
import { deliveryHeaders } from './sign.js';

export { USER_AGENT } from './sign.js';

/** One leased attempt, as app.webhook_claim_batch returns it. */
export interface Claim {
  delivery_id: string;
  event_id: string;
  event: string;
  attempt: number;
  endpoint_id: string;
  location_id: string;
  url: string;
  /** The event's frozen body text: sent and signed byte for byte. */
  body: string;
  /** Current secret first, then the previous one during the 24 h after a rotation. */
  secrets: string[];
  /** The endpoint's last attempt failed (failure_count > 0): it gets the degraded share of slots. */
  degraded: boolean;
  /** A test send (webhook.test event): svc-test: true. */
  test?: boolean;
}

/** Every header of one attempt (src/webhooks/sign.ts builds them). */
export function attemptHeaders(claim: Claim, now = Date.now()): Record<string, string> {
  return deliveryHeaders({
    event: claim.event, eventId: claim.event_id, deliveryId: claim.delivery_id,
    timestamp: Math.floor(now / 1000), body: claim.body, secrets: claim.secrets, test: claim.test,
  });
}

export interface SendOptions {
  ca?: ExtraCa;
  signal?: AbortSignal;
}

/** One attempt's outcome, as app.webhook_record takes it. */
export interface AttemptResult extends PostResult {
  /**
   * The answer's Retry-After header in seconds from when it arrived (src/webhooks/retry-after.ts),
   * or null (absent, unparseable, not in the future). app.webhook_record applies it on 429/503.
   */
  retry_after_seconds: number | null;
}

/** POSTs one claimed attempt; resolves with its outcome (never rejects). */
export async function sendAttempt(claim: Claim, cfg: Pick<Config, 'WEBHOOK_TIMEOUT_MS' | 'WEBHOOK_ALLOW_PRIVATE_TARGETS'>, opts: SendOptions = {}): Promise<AttemptResult> {
  const result = await guardedPost({
    url: claim.url,
    body: claim.body,
    headers: attemptHeaders(claim),
    timeoutMs: cfg.WEBHOOK_TIMEOUT_MS,
    allowPrivate: cfg.WEBHOOK_ALLOW_PRIVATE_TARGETS,
    ca: opts.ca,
    signal: opts.signal,
  });
  return { ...result, retry_after_seconds: retryAfterSeconds(result.response_headers['retry-after']) };
}

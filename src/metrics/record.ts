/**
 * What the engines and the voice routes call to count their work: each turns an outcome into the
 * bounded label values of src/metrics/registry.ts, so call sites stay one line.
 */
import type { PostResult } from '../net/post.js';
import { notificationAttempts, voiceEvents, webhookAttempts, webhookDeliveryLatency } from './registry.js';

/** The few counters of one label set are looked up once, not on every increment. */
const attemptCounters = new Map<string, ReturnType<typeof webhookAttempts.labels>>();

/** 2xx, 3xx, 4xx, 5xx (a complete answer), timeout, refused (connection refused or target blocked), error. */
export function attemptOutcome(r: Pick<PostResult, 'complete' | 'response_status' | 'blocked' | 'error_code' | 'duration_ms'>, timeoutMs: number): string {
  if (r.complete && r.response_status !== null) return `${Math.min(5, Math.max(1, Math.floor(r.response_status / 100)))}xx`;
  if (r.blocked || r.error_code === 'ECONNREFUSED') return 'refused';
  if (r.error_code === 'ETIMEDOUT' || r.duration_ms >= timeoutMs) return 'timeout';
  return 'error';
}

/**
 * One webhook attempt: its outcome, and on a 2xx the time from the event being written (the
 * top-level `created_at` of its body) to this receipt.
 */
export function recordWebhookAttempt(r: PostResult, body: string, timeoutMs: number): void {
  const outcome = attemptOutcome(r, timeoutMs);
  let counter = attemptCounters.get(outcome);
  if (!counter) attemptCounters.set(outcome, (counter = webhookAttempts.labels(outcome)));
  counter.inc();
  if (!r.ok) return;
  const createdAt = eventCreatedAt(body);
  if (createdAt !== null) webhookDeliveryLatency.observe(Math.max(0, (Date.parse(r.attempted_at) + r.duration_ms - createdAt) / 1000));
}

const CREATED_AT = '"created_at": "';

/**
 * The event's own `created_at` from its frozen body (app.tg_events__body): the body is jsonb text,
 * whose keys come shortest first, so the top-level `created_at` follows `data` and is the last
 * key of that name (a quote inside a string value is escaped, so only keys match).
 */
export function eventCreatedAt(body: string): number | null {
  const at = body.lastIndexOf(CREATED_AT);
  if (at < 0) return null;
  const start = at + CREATED_AT.length;
  const t = Date.parse(body.slice(start, body.indexOf('"', start)));
  return Number.isNaN(t) ? null : t;
}

/** One notification try. */
export function recordNotificationTry(channel: string, event: string, outcome: 'sent' | 'skipped' | 'failed'): void {
  notificationAttempts.labels(channel, event === 'call.emergency' ? 'emergency' : 'normal', outcome).inc();
}

const VOICE_TYPES = new Set(['inbound', 'call_started', 'call_ended', 'call_analyzed', 'transfer_started']);

/** What a voice route learned of the webhook it answers, for the counter when the response ends. */
export interface VoiceMark {
  type: string;
  ignored: boolean;
}

/** One voice webhook, counted as its response finishes: type from the handler's mark, outcome from the status. */
export function recordVoiceEvent(mark: VoiceMark | undefined, status: number): void {
  const type = mark ? (VOICE_TYPES.has(mark.type) ? mark.type : 'other') : 'unknown';
  const outcome = status >= 500 ? (status === 503 ? 'unavailable' : 'error') : status >= 400 ? 'rejected' : mark?.ignored ? 'ignored' : 'recorded';
  voiceEvents.labels(type, outcome).inc();
}

/**
 * Sending one notification on its channel (chat, automation, SMS, e-mail) with no database
 * connection held; the notification engine (src/notify/engine.ts) claims, calls `deliver` and
 * records. A channel the operator has not configured is `skipped`; a failure is a SendFailure
 * (`permanent` for a refused target); a send cut short by shutdown throws AbortedError.
 */
import { notificationChannels, notificationStatuses } from '../allowed-values.js';
import { storableText } from '../db/storable-text.js';
import type { TaskDeps } from '../worker/task.js';
import { emailContent, renderMessage, slackPayload, type EventBody } from './messages.js';
import type { Mailer } from './mailer.js';
import { AbortedError, BlockedTargetError, postOutbound, type OutboundResponse } from './outbound.js';

/** One claimed notification, as app.notification_claim_batch() returns it (app.notification_for_send()). */
export interface NotificationToSend {
  id: string;
  location_id: string;
  channel: (typeof notificationChannels)[number];
  provider: string;
  recipient: string | null;
  status: (typeof notificationStatuses)[number];
  attempts: number;
  target_url: string | null;
  integration_status: string | null;
  location: { name: string; timezone: string; service_phone: string | null };
  event: EventBody;
  callback_phone: string | null;
}

export interface Outcome {
  status: 'sent' | 'skipped';
  detail: string;
  response_status?: number | null;
}

/** A failed try: `permanent` ones (a refused target) are not retried. */
export class SendFailure extends Error {
  constructor(message: string, readonly responseStatus: number | null = null, readonly permanent = false) {
    super(message);
  }
}

/** The worker's deps; `ca` (extra trusted CA, tests) reaches every outbound HTTPS call. */
export type SenderDeps = TaskDeps;

/**
 * The first 300 characters of a provider's reply, whitespace folded, as PostgreSQL can store it: cut
 * by UTF-16 units, a pair split at the end would leave a lone surrogate its json refuses, the
 * outcome could never be recorded and the message would be sent again every time its lease lapsed.
 */
export const snippet = (s: string) => storableText(s.replace(/\s+/g, ' ').trim().slice(0, 300));

function httpOutcome(res: OutboundResponse, what: string): Outcome {
  if (res.status >= 200 && res.status < 300) {
    return { status: 'sent', detail: `${what}: HTTP ${res.status}${res.body ? ` ${snippet(res.body)}` : ''}`, response_status: res.status };
  }
  throw new SendFailure(`${what}: HTTP ${res.status}${res.body ? ` ${snippet(res.body)}` : ''}`, res.status);
}

async function post(deps: SenderDeps, url: string, headers: Record<string, string>, body: string, what: string, signal?: AbortSignal): Promise<Outcome> {
  let res: OutboundResponse;
  try {
    res = await postOutbound(url, { headers, body }, deps.cfg, { timeoutMs: deps.cfg.WEBHOOK_TIMEOUT_MS, ca: deps.ca, signal });
  } catch (err) {
    if (err instanceof AbortedError) throw err;
    if (err instanceof BlockedTargetError) throw new SendFailure(`${what}: refused target (${err.message})`, null, true);
    const e = err as NodeJS.ErrnoException;
    throw new SendFailure(`${what}: ${e.code ? `${e.code} ` : ''}${e.message}`);
  }
  return httpOutcome(res, what);
}

async function sendChat(deps: SenderDeps, n: NotificationToSend, signal?: AbortSignal): Promise<Outcome> {
  if (!n.target_url) return { status: 'skipped', detail: `${n.provider} integration is no longer connected` };
  const msg = renderMessage({ event: n.event, business: n.location.name, callbackPhone: n.callback_phone });
  return post(deps, n.target_url, { 'content-type': 'application/json' }, JSON.stringify(slackPayload(msg)), 'slack', signal);
}

async function sendAutomation(deps: SenderDeps, n: NotificationToSend, signal?: AbortSignal): Promise<Outcome> {
  if (!n.target_url) return { status: 'skipped', detail: `${n.provider} integration is no longer connected` };
  const { event, location_id, created_at, data } = n.event;
  return post(deps, n.target_url, { 'content-type': 'application/json', 'x-switchboard-event': event },
    JSON.stringify({ event, location_id, created_at, data }), n.provider, signal);
}

async function sendSms(deps: SenderDeps, n: NotificationToSend, signal?: AbortSignal): Promise<Outcome> {
  const { SMS_API_URL, SMS_ACCOUNT_SID, SMS_AUTH_TOKEN, SMS_FROM } = deps.cfg;
  const missing = Object.entries({ SMS_API_URL, SMS_ACCOUNT_SID, SMS_AUTH_TOKEN, SMS_FROM }).filter(([, v]) => !v).map(([k]) => k);
  if (missing.length) return { status: 'skipped', detail: `SMS not configured: ${missing.join(', ')} unset` };
  const msg = renderMessage({ event: n.event, business: n.location.name, callbackPhone: n.callback_phone });
  const form = new URLSearchParams({ To: n.recipient ?? '', From: SMS_FROM!, Body: msg.sms });
  const auth = Buffer.from(`${SMS_ACCOUNT_SID}:${SMS_AUTH_TOKEN}`).toString('base64');
  return post(deps, SMS_API_URL!, {
    'content-type': 'application/x-www-form-urlencoded',
    accept: 'application/json',
    authorization: `Basic ${auth}`,
  }, form.toString(), 'sms', signal);
}

async function sendEmail(deps: SenderDeps, n: NotificationToSend, mailer: Mailer, signal?: AbortSignal): Promise<Outcome> {
  const { SMTP_URL, MAIL_FROM } = deps.cfg;
  const missing = Object.entries({ SMTP_URL, MAIL_FROM }).filter(([, v]) => !v).map(([k]) => k);
  if (missing.length) return { status: 'skipped', detail: `e-mail not configured: ${missing.join(', ')} unset` };
  const msg = renderMessage({ event: n.event, business: n.location.name, callbackPhone: n.callback_phone });
  try {
    // One deadline for the whole exchange, like an HTTP try (src/notify/mailer.ts).
    const info = await mailer.send({ from: MAIL_FROM, to: n.recipient ?? '', ...emailContent(msg) }, signal);
    const code = Number(/^(\d{3})/.exec(info.response)?.[1]) || null;
    return { status: 'sent', detail: `smtp: ${snippet(info.response)}`, response_status: code };
  } catch (err) {
    if (err instanceof AbortedError) throw err;
    const e = err as Error & { responseCode?: number; code?: string; response?: string };
    throw new SendFailure(`smtp: ${e.code ? `${e.code} ` : ''}${snippet(e.response ?? e.message)}`, e.responseCode ?? null);
  }
}

/**
 * Sends one notification on its channel: an outcome, or a SendFailure / AbortedError thrown.
 * E-mail goes through the engine's pooled `mailer`.
 */
export function deliver(deps: SenderDeps, n: NotificationToSend, mailer: Mailer, signal?: AbortSignal): Promise<Outcome> {
  switch (n.channel) {
    case 'chat': return sendChat(deps, n, signal);
    case 'automation': return sendAutomation(deps, n, signal);
    case 'sms': return sendSms(deps, n, signal);
    case 'email': return sendEmail(deps, n, mailer, signal);
  }
}

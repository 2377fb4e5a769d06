/**
 * Sending one notification: read it (SQL), deliver it on its channel, record the try (SQL).
 * A failure is logged as a `failed` try and rethrown so graphile-worker retries with its backoff;
 * on the job's last attempt the notification becomes `failed` and the job completes (the log,
 * not the jobs table, is the record). A channel the operator has not configured is `skipped`.
 */
import type { JobHelpers, Task } from 'graphile-worker';
import nodemailer from 'nodemailer';
import { callFn } from '../db/pools.js';
import type { TaskDeps } from '../worker/index.js';
import { emailContent, renderMessage, slackPayload, type EventBody } from './messages.js';
import { BlockedTargetError, postOutbound, type OutboundResponse } from './outbound.js';

export interface NotificationPayload {
  notification_id: string;
  location_id: string;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function assertNotificationPayload(p: unknown): asserts p is NotificationPayload {
  const o = p as Record<string, unknown> | null;
  if (!o || typeof o !== 'object' || typeof o.notification_id !== 'string' || !UUID.test(o.notification_id)
      || typeof o.location_id !== 'string' || !UUID.test(o.location_id)) {
    throw new Error('send_notification payload must be { notification_id, location_id } (UUIDs)');
  }
}

/** What app.notification_for_send() returns. */
export interface NotificationToSend {
  id: string;
  location_id: string;
  channel: 'sms' | 'email' | 'chat' | 'automation';
  provider: string;
  recipient: string | null;
  status: 'pending' | 'sent' | 'failed' | 'skipped';
  attempts: number;
  target_url: string | null;
  integration_status: string | null;
  location: { name: string; timezone: string; service_phone: string | null };
  event: EventBody;
  callback_phone: string | null;
}

interface Outcome {
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

/** The worker's task deps; `ca` (extra trusted CA, tests) reaches every outbound HTTPS call. */
export type SenderDeps = TaskDeps;

const snippet = (s: string) => s.replace(/\s+/g, ' ').trim().slice(0, 300);

function httpOutcome(res: OutboundResponse, what: string): Outcome {
  if (res.status >= 200 && res.status < 300) {
    return { status: 'sent', detail: `${what}: HTTP ${res.status}${res.body ? ` ${snippet(res.body)}` : ''}`, response_status: res.status };
  }
  throw new SendFailure(`${what}: HTTP ${res.status}${res.body ? ` ${snippet(res.body)}` : ''}`, res.status);
}

async function post(deps: SenderDeps, url: string, headers: Record<string, string>, body: string, what: string): Promise<Outcome> {
  let res: OutboundResponse;
  try {
    res = await postOutbound(url, { headers, body }, deps.cfg, { timeoutMs: deps.cfg.WEBHOOK_TIMEOUT_MS, ca: deps.ca });
  } catch (err) {
    if (err instanceof BlockedTargetError) throw new SendFailure(`${what}: refused target (${err.message})`, null, true);
    const e = err as NodeJS.ErrnoException;
    throw new SendFailure(`${what}: ${e.code ? `${e.code} ` : ''}${e.message}`);
  }
  return httpOutcome(res, what);
}

async function sendChat(deps: SenderDeps, n: NotificationToSend): Promise<Outcome> {
  if (!n.target_url) return { status: 'skipped', detail: `${n.provider} integration is no longer connected` };
  const msg = renderMessage({ event: n.event, business: n.location.name, callbackPhone: n.callback_phone });
  return post(deps, n.target_url, { 'content-type': 'application/json' }, JSON.stringify(slackPayload(msg)), 'slack');
}

async function sendAutomation(deps: SenderDeps, n: NotificationToSend): Promise<Outcome> {
  if (!n.target_url) return { status: 'skipped', detail: `${n.provider} integration is no longer connected` };
  const { event, location_id, created_at, data } = n.event;
  return post(deps, n.target_url, { 'content-type': 'application/json', 'x-switchboard-event': event },
    JSON.stringify({ event, location_id, created_at, data }), n.provider);
}

async function sendSms(deps: SenderDeps, n: NotificationToSend): Promise<Outcome> {
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
  }, form.toString(), 'sms');
}

async function sendEmail(deps: SenderDeps, n: NotificationToSend): Promise<Outcome> {
  const { SMTP_URL, MAIL_FROM } = deps.cfg;
  const missing = Object.entries({ SMTP_URL, MAIL_FROM }).filter(([, v]) => !v).map(([k]) => k);
  if (missing.length) return { status: 'skipped', detail: `e-mail not configured: ${missing.join(', ')} unset` };
  const msg = renderMessage({ event: n.event, business: n.location.name, callbackPhone: n.callback_phone });
  const content = emailContent(msg);
  const transport = nodemailer.createTransport(SMTP_URL, {
    connectionTimeout: deps.cfg.WEBHOOK_TIMEOUT_MS,
    greetingTimeout: deps.cfg.WEBHOOK_TIMEOUT_MS,
    socketTimeout: deps.cfg.WEBHOOK_TIMEOUT_MS,
  } as never);
  try {
    const info = await transport.sendMail({ from: MAIL_FROM, to: n.recipient ?? '', ...content });
    const code = Number(/^(\d{3})/.exec(info.response ?? '')?.[1]) || null;
    return { status: 'sent', detail: `smtp: ${snippet(info.response ?? 'accepted')}`, response_status: code };
  } catch (err) {
    const e = err as Error & { responseCode?: number; code?: string; response?: string };
    throw new SendFailure(`smtp: ${e.code ? `${e.code} ` : ''}${snippet(e.response ?? e.message)}`, e.responseCode ?? null);
  } finally {
    transport.close();
  }
}

function deliver(deps: SenderDeps, n: NotificationToSend): Promise<Outcome> {
  switch (n.channel) {
    case 'chat': return sendChat(deps, n);
    case 'automation': return sendAutomation(deps, n);
    case 'sms': return sendSms(deps, n);
    case 'email': return sendEmail(deps, n);
  }
}

/** The send_notification task with its dependencies bound; outbound HTTPS trusts `deps.ca` too (tests). */
export function makeSendNotification(deps: SenderDeps): Task {
  return async (payload: unknown, helpers: JobHelpers) => {
    assertNotificationPayload(payload);
    const n = await callFn<NotificationToSend | null>(deps.pool, 'app.notification_for_send', [payload.notification_id]);
    // Gone, foreign to the payload's location, or already settled: a replayed job does nothing.
    if (!n || n.location_id !== payload.location_id || n.status !== 'pending') return;
    const final = helpers.job.attempts >= helpers.job.max_attempts;
    const record = (status: string, detail: string, responseStatus: number | null, last: boolean) =>
      callFn(deps.pool, 'app.notification_record', [n.id, status, detail, responseStatus, last]);
    let outcome: Outcome;
    try {
      outcome = await deliver(deps, n);
    } catch (err) {
      const f = err instanceof SendFailure ? err : new SendFailure((err as Error).message);
      const last = final || f.permanent;
      await record('failed', f.message, f.responseStatus, last);
      deps.log.warn({ notification_id: n.id, channel: n.channel, attempt: helpers.job.attempts, last }, 'notification try failed');
      if (last) return;
      throw f;
    }
    await record(outcome.status, outcome.detail, outcome.response_status ?? null, true);
  };
}

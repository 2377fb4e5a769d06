/**
 * Shapes of the voice platform's webhooks (Retell format, docs/api-contract.md §6). The platform's own
 * fields are validated strictly (a malformed call object is a 400); the fields an LLM extracted
 * into `custom_analysis_data` are normalised leniently: a value we cannot use is dropped rather
 * than failing the whole webhook, because the platform would only retry the same bytes.
 */
import { parsePhoneNumberFromString } from 'libphonenumber-js';
import { z } from 'zod';
import { callDirections, callOutcomes } from '../../allowed-values.js';

/** E.164 if the value is a valid phone number, else null (anonymous caller, web call). */
export function looseE164(v: string | null | undefined): string | null {
  if (!v) return null;
  const p = parsePhoneNumberFromString(v.trim(), 'US');
  return p && p.isValid() ? (p.number as string) : null;
}

/** A field that never fails validation: unusable values become undefined (absent). */
const lenient = <T>(fn: (v: unknown) => T | undefined) => z.unknown().transform(fn).optional();

const phone = z.string().max(40).nullish().transform(looseE164);

const text = (max: number) =>
  lenient((v): string | undefined => {
    if (typeof v === 'number' && Number.isFinite(v)) return String(v);
    if (typeof v !== 'string') return undefined;
    const t = v.trim();
    return t ? t.slice(0, max) : undefined;
  });

const flag = lenient((v): boolean | undefined => {
  if (typeof v === 'boolean') return v;
  if (typeof v === 'string' && /^(true|yes|1)$/i.test(v.trim())) return true;
  if (typeof v === 'string' && /^(false|no|0)$/i.test(v.trim())) return false;
  return undefined;
});

const urgency = lenient((v): number | undefined => {
  const n = typeof v === 'number' ? v : typeof v === 'string' && v.trim() ? Number(v) : NaN;
  return Number.isFinite(n) ? Math.min(5, Math.max(0, Math.round(n))) : undefined;
});

const money = lenient((v): number | undefined => {
  const n = typeof v === 'number' ? v : typeof v === 'string' ? Number(v.replace(/[$,\s]|usd/gi, '')) : NaN;
  return Number.isFinite(n) && n >= 0 && n < 1e12 ? n : undefined;
});

const isoDate = lenient((v): string | undefined => {
  if (typeof v !== 'string') return undefined;
  const m = /^(\d{4})-(\d{2})-(\d{2})(?:$|[T ])/.exec(v.trim());
  if (!m) return undefined;
  const d = new Date(Date.UTC(+m[1], +m[2] - 1, +m[3]));
  return d.getUTCFullYear() === +m[1] && d.getUTCMonth() === +m[2] - 1 && d.getUTCDate() === +m[3]
    ? `${m[1]}-${m[2]}-${m[3]}`
    : undefined;
});

/** "14:30", "9:05", "2:30 PM", "2pm" → "HH:MM" (24 h). */
const hhmm = lenient((v): string | undefined => {
  if (typeof v !== 'string') return undefined;
  const m = /^(\d{1,2})(?::(\d{2}))?(?::\d{2})?\s*([ap]\.?m\.?)?$/i.exec(v.trim());
  if (!m || (!m[2] && !m[3])) return undefined;
  let h = Number(m[1]);
  const min = Number(m[2] ?? '0');
  if (m[3]) {
    if (h < 1 || h > 12) return undefined;
    h = (h % 12) + (/^p/i.test(m[3]) ? 12 : 0);
  }
  if (h > 23 || min > 59) return undefined;
  return `${String(h).padStart(2, '0')}:${String(min).padStart(2, '0')}`;
});

const email = lenient((v): string | undefined =>
  typeof v === 'string' && /^[^@\s]+@[^@\s]+\.[^@\s]+$/.test(v.trim()) && v.trim().length <= 320 ? v.trim() : undefined);

const outcome = lenient((v) => {
  const o = typeof v === 'string' ? v.trim().toLowerCase() : undefined;
  return (callOutcomes as readonly string[]).includes(o ?? '') ? (o as (typeof callOutcomes)[number]) : undefined;
});

export const CustomAnalysisData = z.object({
  outcome,
  urgency_level: urgency,
  is_emergency: flag,
  service_type: text(200),
  issue_summary: text(10000),
  detected_intent: text(200),
  estimated_value: money,
  caller_name: text(200),
  caller_address: text(500),
  caller_email: email,
  appointment_date: isoDate,
  appointment_time: hhmm,
}).meta({ id: 'VoiceCustomAnalysisData', description: 'What the agent extracted; a value that cannot be used is dropped, not refused' });

export const CallAnalysis = z.object({
  call_summary: text(20000),
  in_voicemail: flag,
  user_sentiment: text(50),
  call_successful: flag,
  custom_analysis_data: lenient((v) => {
    const r = CustomAnalysisData.safeParse(v && typeof v === 'object' && !Array.isArray(v) ? v : {});
    return r.success ? r.data : undefined;
  }).meta({ $ref: '#/$defs/VoiceCustomAnalysisData', description: 'Fields of VoiceCustomAnalysisData; a value that cannot be used is dropped' }),
}).meta({ id: 'VoiceCallAnalysis' });

const ms = z.number().int().nonnegative().nullish();

/** Platform times before this (Unix ms) are not times of a real call: 2000-01-01T00:00:00Z. */
export const EARLIEST_CALL_MS = Date.UTC(2000, 0, 1);
/** How far ahead of our clock a platform time may be (clock skew, time zones gone wrong): 1 day. */
export const MAX_AHEAD_MS = 24 * 60 * 60 * 1000;
/** The longest plausible call: 1 day. */
export const MAX_DURATION_MS = 24 * 60 * 60 * 1000;

interface CallTimes {
  start_timestamp?: number | null;
  end_timestamp?: number | null;
  duration_ms?: number | null;
}

/** A platform time (Unix ms) neither before 2000 nor more than a day ahead of `nowMs`. */
export const plausibleMs = (v: number, nowMs: number): boolean => v >= EARLIEST_CALL_MS && v <= nowMs + MAX_AHEAD_MS;

/**
 * Drops implausible call times (docs/voice.md "Implausible timestamps"), keeping the rest of the
 * webhook: a time before 2000 or more than a day ahead of `nowMs`, an end before the start (the
 * end is dropped, the start kept) and a duration over a day become absent, so the row keeps what
 * it had (null on a new call). Dropped rather than refused: a 400 would only make the platform
 * retry the same bytes and lose the call's transcript and analysis with them. A JSON number that
 * is not an integer ≥ 0 stays a 400 (a malformed platform field).
 */

export function plausibleTimes<T extends CallTimes>(call: T, nowMs: number): T {
  const out = { ...call };
  if (typeof out.start_timestamp === 'number' && !plausibleMs(out.start_timestamp, nowMs)) delete out.start_timestamp;
  if (typeof out.end_timestamp === 'number' && !plausibleMs(out.end_timestamp, nowMs)) delete out.end_timestamp;
  if (typeof out.start_timestamp === 'number' && typeof out.end_timestamp === 'number' && out.end_timestamp < out.start_timestamp) {
    delete out.end_timestamp;
  }
  if (typeof out.duration_ms === 'number' && out.duration_ms > MAX_DURATION_MS) delete out.duration_ms;
  return out;
}

/** The roles a call's transcript turns have (docs/api-contract.md §5, call detail). */
export const TURN_ROLES = ['agent', 'user', 'assistant'] as const;

type Turn = z.output<typeof TranscriptTurn>;

/**
 * The platform's transcript_object in the shape the call detail promises (docs/voice.md,
 * decision 20): turns of other roles (tool calls, transfer targets) are left out, a turn
 * without words gets [], and a word without both times is left out. Kept rather than refused, as
 * for implausible times: a 400 would make the platform retry the same bytes and lose the call.
 */
export function specTurns<T extends { transcript_object?: Turn[] | null }>(call: T): T {
  if (!Array.isArray(call.transcript_object)) return call;
  const roles: readonly string[] = TURN_ROLES;
  const turns = call.transcript_object
    .filter((t) => roles.includes(t.role))
    .map((t) => ({ ...t, words: (t.words ?? []).filter((w) => typeof w.start === 'number' && typeof w.end === 'number') }));
  return { ...call, transcript_object: turns };
}

export const TranscriptTurn = z.object({
  role: z.string().max(50),
  content: z.string().max(100000),
  words: z.array(z.object({ word: z.string(), start: z.number().optional(), end: z.number().optional() })).optional(),
}).meta({ id: 'VoiceTranscriptTurn' });

export const VoiceCall = z.object({
  call_id: z.string().min(1).max(200),
  call_type: z.string().max(50).nullish(),
  agent_id: z.string().max(200).nullish(),
  direction: z.enum(callDirections).nullish(),
  from_number: phone,
  to_number: phone,
  call_status: z.string().max(50).nullish(),
  start_timestamp: ms,
  end_timestamp: ms,
  duration_ms: ms,
  disconnection_reason: z.string().max(100).nullish(),
  transcript: z.string().max(1_000_000).nullish(),
  transcript_object: z.array(TranscriptTurn).nullish(),
  recording_url: z.string().max(4096).nullish(),
  public_log_url: z.string().max(4096).nullish(),
  metadata: z.record(z.string(), z.unknown()).nullish(),
  call_analysis: CallAnalysis.nullish(),
}).transform((call) => specTurns(plausibleTimes(call, Date.now()))).meta({ id: 'VoiceCall', description: 'The voice platform\'s call object (Retell format)' });

export const TRANSFER_EVENTS = ['transfer_started', 'transfer_bridged', 'transfer_cancelled', 'transfer_ended'] as const;
export const POST_CALL_EVENTS = ['call_started', 'call_ended', 'call_analyzed', ...TRANSFER_EVENTS] as const;

/** Where a transfer went: a number or SIP URI as given, or the number/URI field of an object. */
const transferDestination = lenient((v): string | undefined => {
  const o = v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  const d = typeof v === 'string' ? v : [o?.number, o?.phone_number, o?.sip_uri, o?.destination].find((x) => typeof x === 'string');
  return typeof d === 'string' && d.trim() ? d.trim().slice(0, 500) : undefined;
});

const transferOption = lenient((v): { type: string } | undefined => {
  const t = v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>).type : undefined;
  return typeof t === 'string' && t.trim() ? { type: t.trim().slice(0, 100) } : undefined;
});

export const PostCallWebhook = z.object({
  event: z.string().min(1).max(100),
  call: VoiceCall,
  /** The event's time (Unix ms), when the platform sends one: transfer events are deduplicated on it. */
  timestamp: z.number().int().nonnegative().optional(),
  transfer_destination: transferDestination,
  transfer_option: transferOption,
}).transform((w) => {
  // An implausible event time is dropped like the call's own times: the transfer is recorded at
  // our clock's time instead (docs/voice.md, decision 18).
  if (w.timestamp === undefined || plausibleMs(w.timestamp, Date.now())) return w;
  const { timestamp: _dropped, ...rest } = w;
  return rest;
}).meta({ id: 'VoicePostCallWebhook' });
export type PostCallWebhook = z.infer<typeof PostCallWebhook>;

export const InboundWebhook = z.object({
  event: z.literal('call_inbound'),
  call_inbound: z.object({
    agent_id: z.string().max(200).nullish(),
    agent_version: z.number().int().nullish(),
    from_number: phone,
    to_number: z.string().max(40).transform((v, ctx) => {
      const p = looseE164(v);
      if (!p) {
        ctx.addIssue({ code: 'custom', message: 'Not a valid phone number' });
        return z.NEVER;
      }
      return p;
    }),
  }),
}).meta({ id: 'VoiceInboundWebhook' });
export type InboundWebhook = z.infer<typeof InboundWebhook>;

/** The answer to an inbound call: the agent's dynamic variables (all strings) and the metadata copied into later webhooks. */
export const VoiceInboundResponse = z.strictObject({
  call_inbound: z.strictObject({
    dynamic_variables: z.record(z.string(), z.string()).describe(
      'business_name, timezone, is_open_now, business_hours, service_areas, faqs, pricebook, transfer_number, emergency_keywords, caller_name, '
      + 'is_returning_customer; only reject_call = "true" for a blocked caller'),
    metadata: z.looseObject({ location_id: z.string().uuid(), call_row_id: z.string().uuid().optional() }),
  }),
}).meta({ id: 'VoiceInboundResponse' });

/** The answer to a post-call webhook: what was recorded, or `ignored` for another event type. */
export const VoicePostCallResponse = z.strictObject({
  data: z.union([
    z.strictObject({ status: z.literal('ignored'), event: z.string().optional() }),
    z.strictObject({
      call_id: z.string().uuid(), platform_call_id: z.string(), platform_status: z.string().nullable(),
      outcome: z.string().nullable(), finalized: z.boolean(),
    }),
  ]),
}).meta({ id: 'VoicePostCallResponse' });

/** The voice platform's routes as the OpenAPI document lists them (under /api, signed, not token-authenticated). */
export const voiceOperations = [
  {
    path: '/voice/inbound', operationId: 'receiveInboundCall', summary: 'Pre-call: the platform asks how to answer an inbound call',
    description: 'The location is the one whose service_phone is to_number (unknown number: 404). A blocked caller gets reject_call = "true".',
    body: InboundWebhook, response: VoiceInboundResponse, errors: [400, 401, 404, 413, 415, 503], parts: [],
  },
  {
    path: '/voice/post-call', operationId: 'receivePostCallEvent', summary: 'Post-call: call_started, call_ended, call_analyzed and the transfer events',
    description: 'Idempotent on call.call_id (the platform retries); transfer_started, transfer_bridged, transfer_cancelled and transfer_ended are recorded once per event, call and timestamp. Other event types are acknowledged as ignored. A to_number that is no location\'s service_phone: 404.',
    body: PostCallWebhook, response: VoicePostCallResponse, errors: [400, 401, 404, 413, 415, 503],
    // custom_analysis_data is read leniently (any value), so its schema is referred to by name.
    parts: [CustomAnalysisData],
  },
] as const;

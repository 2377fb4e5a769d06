/**
 * The records that both a REST response and an event's data carry: the call summary, the lead and
 * the booking. SQL builds each once (app.call_summary_js, app.lead_js, app.booking_js) for the API
 * and for the events it writes, so each has one schema here, used by the REST routes and by the
 * event catalog (src/webhooks/events.ts). Tests validate every REST response against the
 * published document and every emitted event against the catalog, so neither copy can drift.
 */
import { z } from 'zod';
import { bookingSources, bookingStatuses, callDirections, callOutcomes, leadStatuses } from '../../allowed-values.js';
import { E164_PATTERN, isoDate } from '../schemas.js';
import { hhmm, ts, tsNull, uuid } from './rest-common.js';

const maskedPhone = z.string().regex(/^\*\*\*-\*\*\*-[0-9]{4}$/).describe('Masked: ***-***-NNNN');
const e164 = z.string().regex(new RegExp(E164_PATTERN));
const urgency = z.number().int().min(0).max(5);
const money = z.number().min(0);

/** The call summary: no transcript, recording or cost; the caller's phone masked. */
export const CallSummary = z.strictObject({
  id: uuid,
  location_id: uuid,
  customer_id: uuid.nullable(),
  direction: z.enum(callDirections),
  caller_phone: maskedPhone.nullable(),
  caller_name: z.string().nullable(),
  caller_address: z.string().nullable(),
  outcome: z.enum(callOutcomes),
  urgency_level: urgency,
  is_emergency: z.boolean(),
  is_returning_customer: z.boolean(),
  started_at: tsNull,
  ended_at: tsNull,
  duration_sec: z.number().int().min(0).nullable(),
  service_type: z.string().nullable(),
  issue_summary: z.string().nullable(),
  detected_intent: z.string().nullable(),
  estimated_value: money.nullable(),
  appointment_date: isoDate.nullable().describe('YYYY-MM-DD'),
  appointment_time: z.string().nullable().describe('As the voice agent captured it, e.g. 10:00'),
  disconnection_reason: z.string().nullable(),
  created_at: ts,
}).meta({ id: 'CallSummary', description: 'A call without transcript, recording or cost; the caller\'s phone masked' });

export const Lead = z.strictObject({
  id: uuid,
  location_id: uuid,
  call_id: uuid.nullable().describe('null for a lead created through the API'),
  customer_id: uuid.nullable(),
  name: z.string().max(200).nullable(),
  phone: e164.nullable().describe('E.164 (not masked)'),
  email: z.string().max(320).nullable(),
  address: z.string().max(500).nullable(),
  service_type: z.string().max(200).nullable(),
  urgency_level: urgency,
  estimated_value: money.nullable(),
  status: z.enum(leadStatuses),
  status_changed_at: ts,
  assigned_to: uuid.nullable(),
  notes: z.string().max(10000).nullable(),
  created_at: ts,
  updated_at: ts,
}).meta({ id: 'Lead' });

export const Booking = z.strictObject({
  id: uuid,
  location_id: uuid,
  call_id: uuid.nullable(),
  lead_id: uuid.nullable(),
  customer_id: uuid.nullable(),
  status: z.enum(bookingStatuses),
  scheduled_date: isoDate.describe('YYYY-MM-DD, location time'),
  scheduled_time: hhmm.nullable().describe('HH:MM, location time'),
  service_type: z.string().nullable(),
  address: z.string().nullable(),
  notes: z.string().max(10000).nullable(),
  created_at: ts,
  updated_at: ts,
  window_start: tsNull.describe('Start of the arrival window the booking holds; null for a booking without a window'),
  window_end: tsNull.describe('End of the arrival window'),
  source: z.enum(bookingSources).describe('call: from the post-call analysis; agent_tool: booked by the agent during the call; api: through this API'),
}).meta({ id: 'Booking' });

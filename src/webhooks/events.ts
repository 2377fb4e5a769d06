/**
 * The event catalog: one zod schema per webhook event type describing the whole delivery body
 * `{ event, location_id, created_at, data }`, a description and a realistic example. This (with the
 * test send's webhook.test) is the one source of `GET /event-types`, of the OpenAPI document's
 * `webhooks` section (both publish the same open schemas) and of the
 * examples `POST webhook-endpoints/{id}/test { event_type }` sends. Call, lead and booking data
 * are the REST records themselves (src/http/routes/records.ts, one schema each, built in SQL by
 * app.call_summary_json, app.lead_json, app.booking_json); test/webhooks/catalog.test.ts validates
 * every body the system emits against the catalog, the REST tests every response against the
 * OpenAPI document. The lists of event types are derived from it (below).
 */
import { z } from 'zod';
import { bookingStatuses, leadStatuses, operationalNotificationTypes } from '../allowed-values.js';
import { Booking, CallSummary, Lead } from '../http/routes/records.js';
import { open, toPublishedJsonSchema } from '../http/openapi-components.js';
import { timestamp, uuid } from '../http/schemas.js';

const ts = timestamp;
const date = z.iso.date().describe('YYYY-MM-DD');
const hhmm = z.string().regex(/^([01][0-9]|2[0-3]):[0-5][0-9]$/).describe('HH:MM, location time');
const maskedPhone = z.string().regex(/^\*\*\*-\*\*\*-[0-9]{4}$/).describe('Masked: ***-***-NNNN');

const EmergencyData = CallSummary.extend({
  reason: z.enum(['urgency', 'warm_transfer']).describe('urgency: urgency level 5; warm_transfer: the agent transferred the caller'),
  lead_id: uuid.nullable().describe('The lead created from the call; null when fired at transfer time, before analysis'),
}).meta({ id: 'CallEmergencyData' });
const LeadUpdatedData = Lead.extend({ previous_status: z.enum(leadStatuses) }).meta({ id: 'LeadUpdatedData' });
const BookingUpdatedData = Booking.extend({
  previous: z.strictObject({
    status: z.enum(bookingStatuses), scheduled_date: date, scheduled_time: hhmm.nullable(),
    window_start: ts.nullable(), window_end: ts.nullable(),
  })
    .describe('The values before the change'),
}).meta({ id: 'BookingUpdatedData' });
const ids = z.array(uuid);
const CustomerErasedData = z.strictObject({
  erasure_id: uuid.describe('The erasure record (GET erasures/{id})'),
  customer_ids: ids.describe('Customers whose personal data was cleared'),
  call_ids: ids,
  lead_ids: ids,
  booking_ids: ids,
}).meta({ id: 'CustomerErasedData', description: 'Ids only: never the identifier or any personal data (docs/privacy.md "Erasure")' });
const SpamBlockedData = z.strictObject({
  call_id: uuid,
  caller_phone: maskedPhone.nullable(),
  reason: z.enum(['blocklisted']),
  blocked_at: ts,
}).meta({ id: 'SpamBlockedData' });

const WebhookTestData = z.strictObject({
  endpoint_id: uuid.describe('The endpoint the test was sent to'),
  message: z.string(),
}).meta({ id: 'WebhookTestData' });

/** `lead.created` → `LeadCreatedEvent`: the component name of an event's delivery body. */
export const eventSchemaName = (type: string) => `${type.split(/[._]/).map((w) => w[0].toUpperCase() + w.slice(1)).join('')}Event`;

/** The delivery body of one event type. */
function bodyOf<T extends string, D extends z.ZodType>(type: T, data: D) {
  return z.strictObject({
    event: z.literal(type),
    location_id: uuid,
    created_at: ts.describe('When the event occurred'),
    data,
  }).meta({ id: eventSchemaName(type) });
}

// Realistic example values (one fictional HVAC company and call).
const LOC = '3f1c9a52-6b7e-4d1a-9c3e-5a8b2d7e4f10';
const CALL = '8e2d4b6a-1c3f-4e5d-8a7b-9c0d1e2f3a4b';
const CUSTOMER = '5b7c9d1e-2f3a-4b5c-9d6e-7f8a9b0c1d2e';
const LEAD = 'c4d5e6f7-a8b9-4c0d-8e1f-2a3b4c5d6e7f';
const BOOKING = 'e1f2a3b4-c5d6-4e7f-a8b9-c0d1e2f3a4b5';
const AT = '2026-11-21T15:04:05.123Z';

const exampleCall: z.infer<typeof CallSummary> = {
  id: CALL, location_id: LOC, customer_id: CUSTOMER, direction: 'inbound', caller_phone: '***-***-0142',
  caller_name: 'Maria Gonzalez', caller_address: '1842 Oak Ridge Dr, Austin, TX 78704', outcome: 'booked',
  urgency_level: 3, is_emergency: false, is_returning_customer: false,
  started_at: '2026-11-21T15:00:12.000Z', ended_at: '2026-11-21T15:03:58.000Z', duration_sec: 226,
  service_type: 'AC repair', issue_summary: 'Upstairs AC blowing warm air since this morning; unit is about 12 years old.',
  detected_intent: 'book_service', estimated_value: 450, appointment_date: '2026-11-22', appointment_time: '10:00',
  disconnection_reason: 'user_hangup', created_at: '2026-11-21T15:00:12.456Z',
};
const exampleLead: z.infer<typeof Lead> = {
  id: LEAD, location_id: LOC, call_id: CALL, customer_id: CUSTOMER, name: 'Maria Gonzalez', phone: '+15125550142',
  email: null, address: '1842 Oak Ridge Dr, Austin, TX 78704', service_type: 'AC repair', urgency_level: 3,
  estimated_value: 450, status: 'new', status_changed_at: AT, assigned_to: null,
  notes: 'Upstairs AC blowing warm air since this morning; unit is about 12 years old.', created_at: AT, updated_at: AT,
};
const exampleBooking: z.infer<typeof Booking> = {
  id: BOOKING, location_id: LOC, call_id: CALL, lead_id: LEAD, customer_id: CUSTOMER, status: 'scheduled',
  scheduled_date: '2026-11-22', scheduled_time: '10:00', service_type: 'AC repair',
  address: '1842 Oak Ridge Dr, Austin, TX 78704', notes: 'Gate code 4411; dog in the back yard.', created_at: AT, updated_at: AT,
  window_start: '2026-11-22T16:00:00.000Z', window_end: '2026-11-22T18:00:00.000Z', source: 'agent_tool',
};

const body = (event: string, data: Record<string, unknown>) => ({ event, location_id: LOC, created_at: AT, data });

export interface EventTypeEntry {
  type: string;
  description: string;
  schema: z.ZodType;
  example: { event: string; location_id: string; created_at: string; data: Record<string, unknown> };
}

/** The event types, in documentation order. */
export const eventCatalog: EventTypeEntry[] = [
  {
    type: 'call.ended',
    description: 'A call was finalised (after the voice platform\'s analysis, or from its disconnection reason when none came). Data: the call summary.',
    schema: bodyOf('call.ended', CallSummary),
    example: body('call.ended', exampleCall),
  },
  {
    type: 'call.emergency',
    description: 'A call needs attention now: urgency level 5, or the agent warm-transferred the caller. Fired once per call. Data: the call summary, reason and the lead created from it.',
    schema: bodyOf('call.emergency', EmergencyData),
    example: body('call.emergency', {
      ...exampleCall, outcome: 'transferred', urgency_level: 5, is_emergency: true, service_type: 'Gas leak',
      issue_summary: 'Caller smells gas near the furnace; transferred to the on-call technician.',
      detected_intent: 'emergency', estimated_value: null, appointment_date: null, appointment_time: null,
      disconnection_reason: 'call_transfer', reason: 'warm_transfer', lead_id: LEAD,
    }),
  },
  {
    type: 'lead.created',
    description: 'A lead was captured from a call, or created through the API (call_id null). Data: the lead.',
    schema: bodyOf('lead.created', Lead),
    example: body('lead.created', exampleLead),
  },
  {
    type: 'lead.updated',
    description: 'A lead\'s status moved. Data: the lead and its previous_status.',
    schema: bodyOf('lead.updated', LeadUpdatedData),
    example: body('lead.updated', { ...exampleLead, status: 'contacted', status_changed_at: '2026-11-21T16:20:00.000Z', updated_at: '2026-11-21T16:20:00.000Z', previous_status: 'new' }),
  },
  {
    type: 'booking.created',
    description: 'An appointment was booked, by the voice agent or through the API. Data: the booking.',
    schema: bodyOf('booking.created', Booking),
    example: body('booking.created', exampleBooking),
  },
  {
    type: 'booking.updated',
    description: 'A booking\'s status, date, time or window changed. Data: the booking and the previous values.',
    schema: bodyOf('booking.updated', BookingUpdatedData),
    example: body('booking.updated', {
      ...exampleBooking, status: 'confirmed', scheduled_time: '12:00', window_start: '2026-11-22T18:00:00.000Z', window_end: '2026-11-22T20:00:00.000Z', updated_at: '2026-11-21T17:45:10.000Z',
      previous: { status: 'scheduled', scheduled_date: '2026-11-22', scheduled_time: '10:00', window_start: '2026-11-22T16:00:00.000Z', window_end: '2026-11-22T18:00:00.000Z' },
    }),
  },
  {
    type: 'spam.blocked',
    description: 'A call from a blocklisted number was rejected before the agent answered. Data: the call id, masked caller phone and reason.',
    schema: bodyOf('spam.blocked', SpamBlockedData),
    example: body('spam.blocked', { call_id: CALL, caller_phone: '***-***-0666', reason: 'blocklisted', blocked_at: AT }),
  },
  {
    type: 'customer.erased',
    description: 'A caller\'s personal data was erased in this location (POST erasures, or staff). Data: ids only, so a receiver can erase its own copies of these customers, calls, leads and bookings.',
    schema: bodyOf('customer.erased', CustomerErasedData),
    example: body('customer.erased', {
      erasure_id: '7a9b1c3d-5e6f-4a8b-9c0d-1e2f3a4b5c6d', customer_ids: [CUSTOMER], call_ids: [CALL], lead_ids: [LEAD], booking_ids: [BOOKING],
    }),
  },
];

/**
 * `app.event_types()`: the webhook event types, in documentation order. Derived from the catalog,
 * so a new event is one catalog entry here (and its type in SQL); test/db/allowed-values.test.ts
 * fails while the two lists differ.
 */
export const eventTypes = eventCatalog.map((e) => e.type) as [string, ...string[]];
export type EventType = string;
if (new Set(eventTypes).size !== eventTypes.length) throw new Error('the event catalog names a type twice');

/** The type of a test send (POST …/test without event_type); never subscribable. */
export const TEST_EVENT_TYPE = 'webhook.test';
/** The test send's body: in the published catalog (a receiver gets it), not among the subscribable types. */
const testEvent: EventTypeEntry = {
  type: TEST_EVENT_TYPE,
  description: 'A test send (POST webhook-endpoints/{id}/test without event_type), to that endpoint only and with svc-test: true; not subscribable. Data: the endpoint id and a message.',
  schema: bodyOf(TEST_EVENT_TYPE, WebhookTestData),
  example: body(TEST_EVENT_TYPE, { endpoint_id: '2b4d6f8a-0c1e-4a3b-8d5f-7a9c1e3b5d7f', message: 'This is a test event sent from the API.' }),
};
/**
 * Every body a receiver can get, in documentation order: the subscribable types, then webhook.test.
 * GET /event-types and the OpenAPI document's `webhooks` publish exactly these.
 */
export const publishedEvents: EventTypeEntry[] = [...eventCatalog, testEvent];
/** `app.events.type` CHECK: what an event row (and so a delivery attempt) may carry. */
export const deliveryEventTypes = [...eventTypes, TEST_EVENT_TYPE] as [string, ...string[]];
/** `app.notification_types()`: every type notification settings route. */
export const notificationTypes = [...eventTypes, ...operationalNotificationTypes] as [string, ...string[]];

const byType = new Map<string, EventTypeEntry>(eventCatalog.map((e) => [e.type, e]));
export const catalogEntry = (type: string): EventTypeEntry | undefined => byType.get(type);

/**
 * The closed JSON Schema (2020-12) of one event type's delivery body: no field beyond the
 * documented ones (what tests hold emitted bodies to); `$schema` kept unless `bare`.
 */
export function closedEventJsonSchema(entry: EventTypeEntry, bare = false): Record<string, unknown> {
  const js = toPublishedJsonSchema(entry.schema, 'output') as Record<string, any>;
  // The body schema is named (a component of the OpenAPI document), so zod answers `$ref` to its
  // `$defs` entry: the published schema is that entry itself, the shared records staying in `$defs`.
  const { [eventSchemaName(entry.type)]: root, ...defs } = (js.$defs ?? {}) as Record<string, Record<string, unknown>>;
  const schema: Record<string, unknown> = root ? { ...(bare ? {} : { $schema: js.$schema }), ...root, $defs: defs } : js;
  if (bare) delete schema.$schema;
  return schema;
}

/**
 * The published JSON Schema of one event type's delivery body: open, as the OpenAPI document
 * publishes event bodies (a receiver must accept a field added later, docs/api-contract.md
 * "Compatibility and deprecation"); the service sends the documented ones only
 * (test/webhooks/catalog.test.ts checks emitted bodies against the closed schemas).
 */
export function eventJsonSchema(entry: EventTypeEntry, bare = false): Record<string, unknown> {
  return open({ ...closedEventJsonSchema(entry, bare), title: entry.type, description: entry.description });
}

/** What GET /event-types answers (built once). */
let published: Array<{ type: string; description: string; schema: Record<string, unknown>; example: EventTypeEntry['example'] }> | undefined;
export function publishedCatalog() {
  published ??= publishedEvents.map((e) => ({ type: e.type, description: e.description, schema: eventJsonSchema(e), example: e.example }));
  return published;
}

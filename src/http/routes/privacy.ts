/**
 * Caller-data lifecycle endpoints (docs/privacy.md): the retention settings, erasures of one
 * caller's personal data, and the export of everything held about a caller. Each is one call of
 * its `api.*` SQL function; the identifiers are normalised here (phones to E.164 with
 * libphonenumber, as everywhere else) and never logged.
 */
import { z } from 'zod';
import { erasureSources, erasureStatuses, platformDeletionStatuses } from '../../allowed-values.js';
import type { Config } from '../../config.js';
import { defineArea, defineRoute, locAnd, LocationParams, page, pageQuery, type RouteSpec } from '../route.js';
import { e164, patchOf } from '../schemas.js';
import { CallDetail } from './calls.js';
import { Booking, Lead } from './records.js';
import { Notification } from './notifications.js';
import { ts, tsNull, uuid } from './rest-common.js';

const days = z.number().int().min(1).max(36500);

export const DataRetention = z.object({
  location_id: uuid,
  redact_sensitive_data: z.boolean().describe('Card numbers, security codes, expiry dates and SSNs are replaced at ingestion'),
  content_retention_days: days.nullable().describe('Days after which a call\'s transcript, turns, recording and log URLs are cleared; null keeps them'),
  personal_data_retention_days: days.nullable().describe('Days after which caller personal data (names, phones, e-mails, addresses, notes, summaries) is anonymised; null keeps it'),
  updated_at: ts,
}).meta({ id: 'DataRetention' });
export const DataRetentionPatch = patchOf({
  redact_sensitive_data: z.boolean(),
  content_retention_days: days.nullable(),
  personal_data_retention_days: days.nullable(),
}).meta({ id: 'DataRetentionUpdate' });

const email = z.email().max(320);
const identifiers = {
  phone: e164.optional(),
  email: email.optional(),
  customer_id: uuid.optional(),
};
const oneIdentifier = (o: { phone?: string; email?: string; customer_id?: string }) =>
  o.phone !== undefined || o.email !== undefined || o.customer_id !== undefined;
const ONE_IDENTIFIER = { message: 'Give a phone, an email or a customer_id', path: ['phone'] };

export const ErasureCreate = z
  .strictObject(identifiers)
  .refine(oneIdentifier, ONE_IDENTIFIER)
  .meta({ id: 'ErasureCreate', minProperties: 1, description: 'The caller to erase: a phone and/or an e-mail, or a customer id (any combination erases the union)' });

const count = z.number().int().min(0);
const Matched = z.strictObject({
  customers: count, calls: count, leads: count, bookings: count, notifications: count, webhook_attempts: count, events: count,
  idempotency_answers: count.describe('Stored Idempotency-Key answers that held the caller\'s data, cleared (a replay answers 410)'),
  integration_syncs: count.describe('Field-service syncs of the caller\'s leads and bookings whose last_error (a provider\'s refusal, which may quote the record) was cleared'),
}).meta({ id: 'ErasureMatches', description: 'Rows cleared per kind' });
const PlatformCall = z.strictObject({
  call_id: uuid.nullable(),
  platform_call_id: z.string(),
  status: z.enum(platformDeletionStatuses),
  attempts: count,
  response_status: z.number().int().nullable(),
  last_error: z.string().nullable(),
  updated_at: ts,
}).meta({ id: 'PlatformCallDeletion' });
const erasureFields = {
  id: uuid,
  location_id: uuid,
  status: z.enum(erasureStatuses)
    .describe('processing while voice-platform deletions are pending; our own data is cleared before the response'),
  identifier_kinds: z.array(z.enum(['phone', 'email', 'customer_id'])).describe('Which identifiers were given (never their values)'),
  source: z.enum(erasureSources),
  matched: Matched,
  event_id: uuid.nullable().describe('The customer.erased event; null when nothing matched'),
  platform_deletions: z.strictObject({ pending: count, deleted: count, failed: count }),
  created_at: ts,
  completed_at: tsNull,
};
export const ErasureSummary = z.strictObject(erasureFields).meta({ id: 'ErasureSummary' });
export const Erasure = z.strictObject({ ...erasureFields, platform_calls: z.array(PlatformCall).describe('Each matched call\'s deletion at the voice platform (empty when no VOICE_API_KEY)') })
  .meta({ id: 'Erasure' });

const CallerDataQuery = z
  .object(identifiers)
  .refine(oneIdentifier, ONE_IDENTIFIER);

const Customer = z.strictObject({
  id: uuid,
  phone: z.string().nullable(),
  name: z.string().nullable(),
  email: z.string().nullable(),
  address: z.string().nullable(),
  first_call_at: tsNull,
  last_call_at: tsNull,
  call_count: count,
  created_at: ts,
  updated_at: ts,
  anonymised_at: tsNull,
}).meta({ id: 'Customer' });
export const CallerData = z.strictObject({
  location_id: uuid,
  generated_at: ts,
  customers: z.array(Customer),
  calls: z.array(CallDetail).describe('Call detail; transcripts need transcripts:read, recordings recordings:read'),
  leads: z.array(Lead),
  bookings: z.array(Booking),
  events: z.array(z.strictObject({ id: uuid, type: z.string(), created_at: ts, data: z.record(z.string(), z.unknown()) }).meta({ id: 'CallerEvent' })),
  notifications: z.array(Notification),
}).meta({ id: 'CallerData' });

/** Whether erasures also delete calls at the voice platform (a key is configured). */
const platformOn = (cfg: Config) => cfg.VOICE_API_KEY !== undefined;

export const privacyRoutes: RouteSpec[] = [
  defineRoute({
    operationId: 'getDataRetention', method: 'get', path: '/locations/:locationId/data-retention', tag: 'Privacy', scope: 'settings:read',
    summary: 'Redaction switch and retention windows', params: LocationParams, response: DataRetention,
    handler: ({ call, token, params }) => call('api.data_retention_get', token, params.locationId),
  }),
  defineRoute({
    operationId: 'updateDataRetention', method: 'patch', path: '/locations/:locationId/data-retention', tag: 'Privacy', scope: 'settings:write',
    summary: 'Change redaction and retention (null keeps data until erased)', params: LocationParams, body: DataRetentionPatch, response: DataRetention,
    handler: ({ call, token, params, body }) => call('api.data_retention_patch', token, params.locationId, body),
  }),
  defineRoute({
    operationId: 'createErasure', method: 'post', path: '/locations/:locationId/erasures', tag: 'Privacy', scope: 'privacy:write', status: 202,
    summary: 'Erase one caller\'s personal data in this location', params: LocationParams, body: ErasureCreate,
    rules: ['phone_valid'], response: Erasure,
    handler: ({ call, token, params, body, req }) =>
      call('api.erasure_create', token, params.locationId, body, platformOn(req.app.locals.cfg as Config)),
  }),
  defineRoute({
    operationId: 'listErasures', method: 'get', path: '/locations/:locationId/erasures', tag: 'Privacy', scope: 'privacy:read', list: true,
    summary: 'Erasures, newest first', params: LocationParams, query: z.object(pageQuery), response: z.array(ErasureSummary),
    handler: ({ call, token, params, query }) => call('api.erasures_list', token, params.locationId, page(query)),
  }),
  defineRoute({
    operationId: 'getErasure', method: 'get', path: '/locations/:locationId/erasures/:erasureId', tag: 'Privacy', scope: 'privacy:read',
    summary: 'One erasure: matches per kind and each voice-platform deletion', params: locAnd('erasureId'), response: Erasure,
    handler: ({ call, token, params }) => call('api.erasure_get', token, params.locationId, params.erasureId),
  }),
  defineRoute({
    operationId: 'getCallerData', method: 'get', path: '/locations/:locationId/caller-data', tag: 'Privacy', scope: 'privacy:read',
    summary: 'Everything held about one caller in this location (right to know)', params: LocationParams,
    query: CallerDataQuery, response: CallerData,
    handler: ({ call, token, params, query }) =>
      call('api.caller_data_get', token, params.locationId, query.phone ?? null, query.email ?? null, query.customer_id ?? null),
  }),
];

export const area = defineArea({
  order: 130,
  tags: {
    Privacy: 'Retention settings, erasure of a caller\'s personal data and the export of what is held about a caller.',
  },
  routes: privacyRoutes,
});

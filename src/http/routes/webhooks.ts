/**
 * Webhook endpoints, delivery attempts, recovery and the event catalog (docs/webhooks.md). Each
 * handler is one SQL call; the only work done here is the SSRF check of a registered URL, which
 * needs DNS, and picking a catalog example for a test send.
 */
import { z } from 'zod';
import type { Config } from '../../config.js';
import { deliveryStatuses } from '../../allowed-values.js';
import { catalogEntry, deliveryEventTypes, eventTypes, publishedCatalog } from '../../webhooks/events.js';
import { defineArea, defineRoute, locAnd, LocationParams, page, pageQuery, type RouteSpec, uuidParam } from '../route.js';
import { httpsUrl, isoInstant, patchOf, timestamp, uuid } from '../schemas.js';
import { assertTargetField } from './rest-common.js';

/**
 * Most events one recover call queues (oldest first); `has_more` says when to call again. A new
 * attempt is only a row (the delivery engine's queue) plus one wake-up for the whole call, and the
 * check for what the endpoint already has is one hash anti join: measured with
 * bench/recover-plan.ts, 10,000 events take 0.3–0.7 s in one call, with or without 10,000
 * delivered attempts beside them (docs/webhooks.md), far inside the 15 s statement time-out.
 */
export const RECOVER_MAX_EVENTS = 10_000;

export const WebhookEndpoint = z.object({
  id: uuid,
  location_id: uuid,
  label: z.string().nullable(),
  url: z.string(),
  events: z.array(z.enum(eventTypes)),
  active: z.boolean().describe('false: paused by you or disabled automatically (see disabled_at); pending attempts are held'),
  failure_count: z.number().int().describe('Consecutive failed attempts; any 2xx resets it'),
  failing_since: timestamp.nullable().describe('When the current run of consecutive failures began; null while failure_count is 0'),
  last_success_at: timestamp.nullable(),
  last_failure_at: timestamp.nullable(),
  disabled_at: timestamp.nullable().describe('When it was disabled automatically (too many failures for too long, or a 410 Gone answer); null while enabled. PATCH active=true clears it'),
  disabled_reason: z.string().nullable().describe('Why it was disabled; null while enabled'),
  created_at: timestamp,
  updated_at: timestamp,
}).meta({ id: 'WebhookEndpoint' });
export const WebhookEndpointWithSecret = WebhookEndpoint.extend({
  secret: z.string().describe('whsec_ + 32 random bytes in standard base64 (the Standard Webhooks form). Shown only here.'),
}).meta({ id: 'WebhookEndpointWithSecret', description: 'A webhook endpoint and its signing secret (only in the answers that create or rotate it)' });

export const WebhookDelivery = z.object({
  id: uuid.describe('The svc-delivery-id header of this attempt'),
  event_id: uuid.describe('The svc-event-id header; the same for every attempt'),
  endpoint_id: uuid.nullable(),
  event: z.enum(deliveryEventTypes),
  attempt: z.number().int(),
  status: z.enum(deliveryStatuses),
  url: z.string(),
  response_status: z.number().int().nullable(),
  response_body: z.string().nullable(),
  error: z.string().nullable(),
  duration_ms: z.number().int().nullable(),
  created_at: timestamp,
  attempted_at: timestamp.nullable(),
  next_attempt_at: timestamp.nullable(),
}).meta({ id: 'WebhookDelivery', description: 'One delivery attempt of an event to an endpoint' });

const events = z.array(z.enum(eventTypes)).min(1).max(eventTypes.length * 2);
const label = z.string().trim().max(200).nullable();

const EndpointCreate = z.strictObject({
  label: label.optional(),
  url: httpsUrl,
  events,
  active: z.boolean().optional(),
}).meta({ id: 'WebhookEndpointCreate' });
const EndpointPatch = patchOf({ label, url: httpsUrl, events, active: z.boolean() }).meta({ id: 'WebhookEndpointUpdate' });

const EndpointParams = z.object({ id: uuidParam });
const LocEndpointParams = locAnd('id');
const DeliveryParams = locAnd('id');

const DeliveriesQuery = z.object({
  ...pageQuery,
  endpoint_id: uuid.optional(),
  event_id: uuid.optional(),
  event: z.enum(deliveryEventTypes).optional().describe('Event type'),
  status: z.enum(deliveryStatuses).optional(),
});

const TestBody = z.strictObject({
  event_type: z.enum(eventTypes).optional().describe('Send this type\'s catalog example instead of webhook.test'),
}).meta({ id: 'WebhookTestRequest' }).optional();

const RecoverBody = z.strictObject({
  since: isoInstant.describe('Re-send events created at or after this instant (within DELIVERY_RETENTION_DAYS, not in the future)'),
}).meta({ id: 'WebhookRecoverRequest' });
const RecoverResult = z.object({
  queued: z.number().int().min(0).describe('New first attempts queued'),
  has_more: z.boolean().describe(`More missed events remain (at most ${RECOVER_MAX_EVENTS} per call): call again with the same since`),
}).meta({ id: 'WebhookRecoverResult' });

export const EventTypeInfo = z.object({
  type: z.enum(deliveryEventTypes).describe('A subscribable type, or webhook.test (a test send: not subscribable); new types may be added'),
  description: z.string(),
  schema: z.record(z.string(), z.unknown()).describe('JSON Schema (2020-12) of the whole delivery body'),
  example: z.object({ event: z.string(), location_id: z.string(), created_at: z.string(), data: z.record(z.string(), z.unknown()) }),
}).meta({ id: 'EventType', description: 'One webhook event type of the catalog' });

/** The same operation under /webhook-endpoints/{id} (token's location) and /locations/{loc}/webhook-endpoints/{id}. */
/** The short form's operationId is the location form's plus `ForKey` (the API key's own location). */
function both<B>(
  spec: Omit<RouteSpec<{ locationId?: string; id: string }, unknown, B>, 'path' | 'params'> & { suffix?: string; operationId: string },
): RouteSpec[] {
  const { suffix = '', operationId, ...rest } = spec;
  return [
    { ...rest, operationId: `${operationId}ForKey`, path: `/webhook-endpoints/:id${suffix}`, params: EndpointParams } as RouteSpec,
    { ...rest, operationId, path: `/locations/:locationId/webhook-endpoints/:id${suffix}`, params: LocEndpointParams } as RouteSpec,
  ];
}

export const webhookRoutes: RouteSpec[] = [
  defineRoute({
    operationId: 'createWebhookEndpoint', method: 'post', path: '/locations/:locationId/webhook-endpoints', tag: 'Webhooks', scope: 'webhooks:write', status: 201,
    summary: 'Register a webhook endpoint (the response is the only one that shows its secret)',
    params: LocationParams, body: EndpointCreate, response: WebhookEndpointWithSecret, rules: ['ipv6_literal', 'public_target'],
    handler: async ({ call, authorize, token, params, body, req }) => {
      await assertTargetField(req, authorize, 'url', body.url);
      return call('api.webhook_endpoints_create', token, params.locationId, body);
    },
  }),
  defineRoute({
    operationId: 'listWebhookEndpoints', method: 'get', path: '/locations/:locationId/webhook-endpoints', tag: 'Webhooks', scope: 'webhooks:read', list: true,
    summary: 'Webhook endpoints of the location (never the secret)',
    params: LocationParams, query: z.object(pageQuery), response: z.array(WebhookEndpoint),
    handler: ({ call, token, params, query }) => call('api.webhook_endpoints_list', token, params.locationId, page(query)),
  }),
  ...both({
    operationId: 'getWebhookEndpoint', method: 'get', tag: 'Webhooks', scope: 'webhooks:read', summary: 'One webhook endpoint', response: WebhookEndpoint,
    handler: ({ call, token, params }) => call('api.webhook_endpoint_get', token, params.locationId ?? null, params.id),
  }),
  ...both({
    operationId: 'updateWebhookEndpoint', method: 'patch', tag: 'Webhooks', scope: 'webhooks:write',
    summary: 'Update an endpoint; active=false pauses it (pending retries held), active=true resumes or re-enables it (clears disabled_at, disabled_reason, failure_count)',
    body: EndpointPatch, response: WebhookEndpoint, rules: ['ipv6_literal', 'public_target'],
    handler: async ({ call, authorize, token, params, body, req }) => {
      await assertTargetField(req, authorize, 'url', (body as z.infer<typeof EndpointPatch>).url);
      return call('api.webhook_endpoint_patch', token, params.locationId ?? null, params.id, body);
    },
  }),
  ...both({
    operationId: 'deleteWebhookEndpoint', method: 'delete', tag: 'Webhooks', scope: 'webhooks:write',
    summary: 'Delete an endpoint; its pending deliveries are discarded', response: WebhookEndpoint,
    handler: ({ call, token, params }) => call('api.webhook_endpoint_delete', token, params.locationId ?? null, params.id),
  }),
  ...both({
    operationId: 'testWebhookEndpoint', method: 'post', suffix: '/test', tag: 'Webhooks', scope: 'webhooks:write', status: 202,
    summary: 'Send a signed test to this endpoint only (svc-test: true): webhook.test, or with event_type that type\'s catalog example; returns the queued attempt',
    body: TestBody, response: WebhookDelivery,
    handler: ({ call, token, params, body }) => {
      const type = (body as z.infer<typeof TestBody>)?.event_type;
      const sample = type ? { event: type, data: catalogEntry(type)!.example.data } : null;
      return call('api.webhook_endpoint_test', token, params.locationId ?? null, params.id, sample);
    },
  }),
  ...both({
    operationId: 'recoverWebhookEndpoint', method: 'post', suffix: '/recover', tag: 'Webhooks', scope: 'webhooks:write', status: 202,
    summary: 'Re-send every subscribed event since `since` that has no delivered or pending attempt to this endpoint (paused and disabled periods included)',
    body: RecoverBody, response: RecoverResult, conflict: true,
    handler: ({ call, token, params, body, req }) => {
      const cfg = req.app.locals.cfg as Config;
      const { since } = body as z.infer<typeof RecoverBody>;
      return call('api.webhook_endpoint_recover', token, params.locationId ?? null, params.id, since,
        cfg.DELIVERY_RETENTION_DAYS, RECOVER_MAX_EVENTS);
    },
  }),
  ...both({
    operationId: 'rotateWebhookEndpointSecret', method: 'post', suffix: '/rotate-secret', tag: 'Webhooks', scope: 'webhooks:write',
    summary: 'Replace the signing secret (shown once); the old one also signs for 24 h',
    response: WebhookEndpointWithSecret,
    handler: ({ call, token, params }) => call('api.webhook_endpoint_rotate_secret', token, params.locationId ?? null, params.id),
  }),
  defineRoute({
    operationId: 'listWebhookDeliveries', method: 'get', path: '/locations/:locationId/webhook-deliveries', tag: 'Webhooks', scope: 'webhooks:read', list: true,
    summary: 'Delivery attempts, most recent first (filters endpoint_id, event_id, event, status)',
    params: LocationParams, query: DeliveriesQuery, response: z.array(WebhookDelivery),
    handler: ({ call, token, params, query }) =>
      call('api.webhook_deliveries_list', token, params.locationId,
        { endpoint_id: query.endpoint_id, event_id: query.event_id, event: query.event, status: query.status }, page(query)),
  }),
  defineRoute({
    operationId: 'retryWebhookDelivery', method: 'post', path: '/locations/:locationId/webhook-deliveries/:id/retry', tag: 'Webhooks', scope: 'webhooks:write', status: 202,
    summary: 'Re-send a failed or dead delivery as a new attempt (new id, same event id)',
    params: DeliveryParams, response: WebhookDelivery, conflict: true,
    handler: ({ call, token, params }) => call('api.webhook_delivery_retry', token, params.locationId, params.id),
  }),
  defineRoute({
    operationId: 'listEventTypes', method: 'get', path: '/event-types', tag: 'Webhooks', scope: null,
    summary: 'The event catalog: each webhook event type with a description, the JSON Schema of its delivery body and an example',
    response: z.array(EventTypeInfo),
    handler: async ({ call, token }) => {
      await call('app.authorize', token, null, null);
      return publishedCatalog();
    },
  }),
];

export const area = defineArea({
  order: 110,
  tags: {
    Webhooks: 'Signed webhook endpoints, their delivery attempts, recovery and the event catalog.',
  },
  routes: webhookRoutes,
});

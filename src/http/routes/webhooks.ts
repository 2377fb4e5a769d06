/**
 * Webhook endpoints and delivery attempts (DESIGN.md §5, §8). Each handler is one SQL call; the
 * only work done here is the SSRF check of a registered URL, which needs DNS.
 */
import type { Request } from 'express';
import { z } from 'zod';
import type { Config } from '../../config.js';
import { checkTargetUrl } from '../../net/ssrf.js';
import { ApiError } from '../errors.js';
import { defineRoute, locAnd, LocationParams, page, pageQuery, type RouteSpec, uuidParam } from '../route.js';
import { httpsUrl, patchOf, timestamp } from '../schemas.js';

export const subscribableEvents = [
  'call.ended', 'call.emergency', 'lead.created', 'lead.updated', 'booking.created', 'booking.updated', 'spam.blocked',
] as const;

export const WebhookEndpoint = z.object({
  id: z.string().uuid(),
  location_id: z.string().uuid(),
  label: z.string().nullable(),
  url: z.string(),
  events: z.array(z.string()),
  active: z.boolean(),
  failure_count: z.number().int(),
  last_success_at: timestamp.nullable(),
  last_failure_at: timestamp.nullable(),
  created_at: timestamp,
  updated_at: timestamp,
});
export const WebhookEndpointWithSecret = WebhookEndpoint.extend({
  secret: z.string().describe('whsec_ + 32 random bytes (base64url). Shown only here.'),
});

export const WebhookDelivery = z.object({
  id: z.string().uuid().describe('The svc-delivery-id header of this attempt'),
  event_id: z.string().uuid().describe('The svc-event-id header; the same for every attempt'),
  endpoint_id: z.string().uuid().nullable(),
  event: z.string(),
  attempt: z.number().int(),
  status: z.enum(['pending', 'delivered', 'failed', 'dead']),
  url: z.string(),
  response_status: z.number().int().nullable(),
  response_body: z.string().nullable(),
  error: z.string().nullable(),
  duration_ms: z.number().int().nullable(),
  created_at: timestamp,
  attempted_at: timestamp.nullable(),
  next_attempt_at: timestamp.nullable(),
});

const events = z.array(z.enum(subscribableEvents)).min(1).max(subscribableEvents.length * 2);
const label = z.string().trim().max(200).nullable();

const EndpointCreate = z.strictObject({
  label: label.optional(),
  url: httpsUrl,
  events,
  active: z.boolean().optional(),
});
const EndpointPatch = patchOf({ label, url: httpsUrl, events, active: z.boolean() });

const EndpointParams = z.object({ id: uuidParam });
const LocEndpointParams = locAnd('id');
const DeliveryParams = locAnd('id');

const DeliveriesQuery = z.strictObject({
  ...pageQuery,
  endpoint_id: z.string().uuid().optional(),
  event_id: z.string().uuid().optional(),
  status: z.enum(['pending', 'delivered', 'failed', 'dead']).optional(),
});

/** 400 validation_error when the URL is not an allowed target (registration-time SSRF check). */
async function assertTarget(req: Request, url: string | undefined): Promise<void> {
  if (url === undefined) return;
  const cfg = req.app.locals.cfg as Config;
  const reason = await checkTargetUrl(url, cfg.WEBHOOK_ALLOW_PRIVATE_TARGETS);
  if (reason) {
    throw new ApiError(400, 'validation_error', 'Request validation failed', { issues: [{ path: 'url', message: reason }] });
  }
}

/** The same operation under /webhook-endpoints/{id} (token's location) and /locations/{loc}/webhook-endpoints/{id}. */
function both<B>(
  spec: Omit<RouteSpec<{ locationId?: string; id: string }, unknown, B>, 'path' | 'params'> & { suffix?: string },
): RouteSpec[] {
  const { suffix = '', ...rest } = spec;
  return [
    { ...rest, path: `/webhook-endpoints/:id${suffix}`, params: EndpointParams } as RouteSpec,
    { ...rest, path: `/locations/:locationId/webhook-endpoints/:id${suffix}`, params: LocEndpointParams } as RouteSpec,
  ];
}

export const webhookRoutes: RouteSpec[] = [
  defineRoute({
    method: 'post', path: '/locations/:locationId/webhook-endpoints', tag: 'Webhooks', scope: 'webhooks:write', status: 201,
    summary: 'Register a webhook endpoint (the response is the only one that shows its secret)',
    params: LocationParams, body: EndpointCreate, response: WebhookEndpointWithSecret, rules: ['ipv6_literal', 'public_target'],
    handler: async ({ call, token, params, body, req }) => {
      await assertTarget(req, body.url);
      return call('api.webhook_endpoints_create', token, params.locationId, body);
    },
  }),
  defineRoute({
    method: 'get', path: '/locations/:locationId/webhook-endpoints', tag: 'Webhooks', scope: 'webhooks:read', list: true,
    summary: 'Webhook endpoints of the location (never the secret)',
    params: LocationParams, query: z.object(pageQuery), response: z.array(WebhookEndpoint),
    handler: ({ call, token, params, query }) => call('api.webhook_endpoints_list', token, params.locationId, page(query)),
  }),
  ...both({
    method: 'get', tag: 'Webhooks', scope: 'webhooks:read', summary: 'One webhook endpoint', response: WebhookEndpoint,
    handler: ({ call, token, params }) => call('api.webhook_endpoint_get', token, params.locationId ?? null, params.id),
  }),
  ...both({
    method: 'patch', tag: 'Webhooks', scope: 'webhooks:write',
    summary: 'Update an endpoint; active=false pauses it (pending retries held), active=true resumes',
    body: EndpointPatch, response: WebhookEndpoint, rules: ['ipv6_literal', 'public_target'],
    handler: async ({ call, token, params, body, req }) => {
      await assertTarget(req, (body as z.infer<typeof EndpointPatch>).url);
      return call('api.webhook_endpoint_patch', token, params.locationId ?? null, params.id, body);
    },
  }),
  ...both({
    method: 'delete', tag: 'Webhooks', scope: 'webhooks:write',
    summary: 'Delete an endpoint; its pending deliveries are discarded', response: WebhookEndpoint,
    handler: ({ call, token, params }) => call('api.webhook_endpoint_delete', token, params.locationId ?? null, params.id),
  }),
  ...both({
    method: 'post', suffix: '/test', tag: 'Webhooks', scope: 'webhooks:write', status: 202,
    summary: 'Send a signed webhook.test event to this endpoint only; returns the queued attempt',
    response: WebhookDelivery,
    handler: ({ call, token, params }) => call('api.webhook_endpoint_test', token, params.locationId ?? null, params.id),
  }),
  ...both({
    method: 'post', suffix: '/rotate-secret', tag: 'Webhooks', scope: 'webhooks:write',
    summary: 'Replace the signing secret (shown once); the old one also signs for 24 h',
    response: WebhookEndpointWithSecret,
    handler: ({ call, token, params }) => call('api.webhook_endpoint_rotate_secret', token, params.locationId ?? null, params.id),
  }),
  defineRoute({
    method: 'get', path: '/locations/:locationId/webhook-deliveries', tag: 'Webhooks', scope: 'webhooks:read', list: true,
    summary: 'Delivery attempts, most recent first (filters endpoint_id, event_id, status)',
    params: LocationParams, query: DeliveriesQuery, response: z.array(WebhookDelivery),
    handler: ({ call, token, params, query }) =>
      call('api.webhook_deliveries_list', token, params.locationId,
        { endpoint_id: query.endpoint_id, event_id: query.event_id, status: query.status }, page(query)),
  }),
  defineRoute({
    method: 'post', path: '/locations/:locationId/webhook-deliveries/:id/retry', tag: 'Webhooks', scope: 'webhooks:write', status: 202,
    summary: 'Re-send a failed or dead delivery as a new attempt (new id, same event id)',
    params: DeliveryParams, response: WebhookDelivery,
    handler: ({ call, token, params }) => call('api.webhook_delivery_retry', token, params.locationId, params.id),
  }),
];

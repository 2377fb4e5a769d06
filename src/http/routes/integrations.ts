import { z } from 'zod';
import { integrationProviders, integrationStatuses, oauthProviders, webhookProviders } from '../../allowed-values.js';
import { defineRoute, locationParam, LocationParams, page, pageQuery, type RouteSpec } from '../route.js';
import { httpsUrl } from '../schemas.js';
import { assertTargetField, ts, tsNull, uuid } from './rest-common.js';

export const Integration = z.object({
  id: uuid,
  location_id: uuid,
  provider: z.enum(integrationProviders),
  status: z.enum(integrationStatuses),
  label: z.string().nullable(),
  external_id: z.string().nullable(),
  expires_at: tsNull,
  config: z.record(z.string(), z.unknown()),
  connected_at: tsNull,
  disconnected_at: tsNull,
  last_synced_at: tsNull,
  last_error: z.string().nullable(),
  created_at: ts,
  updated_at: ts,
}).meta({ id: 'Integration' });

/**
 * OAuth providers get their own error code (oauth_required), so the provider is checked by a
 * field-level refinement that runs even when other fields fail; errors.ts maps the issue's
 * params.code onto the envelope.
 */
const provider = z
  .string()
  .superRefine((v, ctx) => {
    if ((oauthProviders as readonly string[]).includes(v)) {
      ctx.addIssue({ code: 'custom', message: `${v} connects through its OAuth flow, not this endpoint`, params: { code: 'oauth_required' } });
    } else if (!(webhookProviders as readonly string[]).includes(v)) {
      ctx.addIssue({ code: 'custom', message: `Unknown provider; use one of ${webhookProviders.join(', ')}` });
    }
  })
  .meta({ enum: [...webhookProviders], description: `OAuth providers (${oauthProviders.join(', ')}) → 400 oauth_required` });

export const IntegrationCreate = z.strictObject({
  provider,
  webhook_url: httpsUrl,
  label: z.string().trim().max(200).optional(),
  config: z.record(z.string(), z.unknown()).optional(),
}).meta({ id: 'IntegrationCreate' });

export const integrationRoutes: RouteSpec[] = [
  defineRoute({
    operationId: 'listIntegrations', method: 'get', path: '/locations/:locationId/integrations', tag: 'Integrations', scope: 'integrations:read', list: true,
    summary: 'Integrations, newest first (tokens never returned)', params: LocationParams, query: z.object(pageQuery),
    response: z.array(Integration),
    handler: ({ call, token, params, query }) => call('api.integrations_list', token, params.locationId, page(query)),
  }),
  defineRoute({
    operationId: 'createIntegration', method: 'post', path: '/locations/:locationId/integrations', tag: 'Integrations', scope: 'integrations:write', status: 201,
    summary: 'Connect a webhook-style integration (slack, zapier, make, n8n, calcom)',
    params: LocationParams, body: IntegrationCreate, response: Integration, conflict: true, rules: ['ipv6_literal', 'public_target'],
    handler: async ({ call, token, params, body, req }) => {
      // The same registration-time SSRF check as webhook endpoints (send time checks again).
      await assertTargetField(req, 'webhook_url', body.webhook_url);
      return call('api.integration_create', token, params.locationId, body);
    },
  }),
  defineRoute({
    operationId: 'deleteIntegration', method: 'delete', path: '/locations/:locationId/integrations/:provider', tag: 'Integrations', scope: 'integrations:write',
    summary: 'Disconnect the provider (returns the disconnected record)',
    params: z.object({ locationId: locationParam, provider: z.enum(integrationProviders) }), response: Integration,
    handler: ({ call, token, params }) => call('api.integration_delete', token, params.locationId, params.provider),
  }),
];

import type { Request } from 'express';
import { z } from 'zod';
import type { IntegrationService } from '../../integrations/service.js';
import { integrationProviders, integrationStatuses, oauthProviders, syncActions, syncRecordTypes, syncStatuses, webhookProviders } from '../../allowed-values.js';
import { defineArea, defineRoute, JsonText, locationParam, LocationParams, page, pageQuery, uuidParam, type RouteSpec } from '../route.js';
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

const service = (req: Request) => req.app.locals.integrations as IntegrationService;

// An unknown provider names nothing: 404, as on the other provider routes.
const ProviderParams = z.object({ locationId: locationParam, provider: z.enum(integrationProviders) });

export const AuthorizeAnswer = z.object({
  authorize_url: z.string().url(),
  expires_at: ts,
}).meta({ id: 'IntegrationAuthorization', description: 'Where to send the contractor to connect the provider, and until when' });

export const ServiceTitanCredentials = z.strictObject({
  tenant_id: z.string().trim().regex(/^\d{1,20}$/, 'the numeric ServiceTitan tenant id'),
  client_id: z.string().trim().min(1).max(200),
  client_secret: z.string().min(1).max(500),
}).meta({ id: 'ServiceTitanCredentials' });

export const IntegrationSync = z.object({
  id: uuid,
  record_type: z.enum(syncRecordTypes),
  record_id: uuid,
  action: z.enum(syncActions),
  status: z.enum(syncStatuses),
  attempts: z.number().int(),
  external_id: z.string().nullable(),
  last_error: z.string().nullable(),
  next_attempt_at: tsNull.describe('When a pending sync is tried next; null otherwise'),
  created_at: ts,
  updated_at: ts,
}).meta({ id: 'IntegrationSync', description: 'One lead or booking written (or being written) into a field-service system' });

const FieldServiceParams = z.object({ locationId: locationParam, provider: z.enum(['jobber', 'housecall_pro', 'servicetitan']) });
const SyncParams = FieldServiceParams.extend({ syncId: uuidParam });

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
    handler: async ({ call, authorize, token, params, body, req }) => {
      // The same registration-time SSRF check as webhook endpoints (send time checks again).
      await assertTargetField(req, authorize, 'webhook_url', body.webhook_url);
      return call('api.integration_create', token, params.locationId, body);
    },
  }),
  defineRoute({
    operationId: 'authorizeIntegration', method: 'post', path: '/locations/:locationId/integrations/:provider/authorize', tag: 'Integrations', scope: 'integrations:write', status: 201,
    summary: 'Start connecting Jobber or Housecall Pro: the provider URL to open (single-use state, 10 minutes, PKCE)',
    params: ProviderParams, response: AuthorizeAnswer, conflict: true, errors: [503],
    handler: ({ call, token, params, req }) => {
      const a = service(req).prepareAuthorize(params.provider);
      return call('api.integration_authorize', token, params.locationId, params.provider, a.configured, a.stateSha256, a.verifierCiphertext, a.authorizeUrl);
    },
  }),
  defineRoute({
    operationId: 'connectServiceTitan', method: 'put', path: '/locations/:locationId/integrations/servicetitan/credentials', tag: 'Integrations', scope: 'integrations:write',
    summary: 'Connect ServiceTitan with the tenant\'s client credentials (checked by minting a token first)',
    params: LocationParams, body: ServiceTitanCredentials, response: Integration, errors: [422, 502, 503],
    handler: async ({ call, authorize, token, params, body, req }) => {
      // Token, location and scope first: nothing is sent to ServiceTitan for a request we would refuse.
      await authorize();
      const checked = await service(req).checkServiceTitan(body);
      return call('api.integration_credentials_put', token, params.locationId, 'servicetitan', body.tenant_id, checked.expiresAt, checked.ciphertext);
    },
  }),
  defineRoute({
    operationId: 'deleteIntegration', method: 'delete', path: '/locations/:locationId/integrations/:provider', tag: 'Integrations', scope: 'integrations:write',
    summary: 'Disconnect the provider: revokes at the provider where it can, erases the stored tokens (returns the disconnected record)',
    params: z.object({ locationId: locationParam, provider: z.enum(integrationProviders) }), response: Integration,
    handler: async ({ call, token, params, req }) => {
      const answer = await call('api.integration_disconnect', token, params.locationId, params.provider);
      if (!(answer instanceof JsonText)) return null;
      const { integration, secrets_ciphertext } = JSON.parse(answer.text) as { integration: unknown; secrets_ciphertext: string | null };
      await service(req).revoke(params.provider, secrets_ciphertext);
      return integration;
    },
  }),
  defineRoute({
    operationId: 'listIntegrationSyncs', method: 'get', path: '/locations/:locationId/integrations/:provider/syncs', tag: 'Integrations', scope: 'integrations:read', list: true,
    summary: 'Sync log of a field-service connection: each lead or booking written (or being written) there, newest first (filter status)',
    params: FieldServiceParams, query: z.object({ ...pageQuery, status: z.enum(syncStatuses).optional() }), response: z.array(IntegrationSync),
    handler: ({ call, token, params, query }) =>
      call('api.integration_syncs_list', token, params.locationId, params.provider, { status: query.status }, page(query)),
  }),
  defineRoute({
    operationId: 'retryIntegrationSync', method: 'post', path: '/locations/:locationId/integrations/:provider/syncs/:syncId/retry', tag: 'Integrations', scope: 'integrations:write', status: 202,
    summary: 'Try a failed sync again (fresh retry schedule; runs once the connection is connected)',
    params: SyncParams, response: IntegrationSync, conflict: true,
    handler: ({ call, token, params }) => call('api.integration_sync_retry', token, params.locationId, params.provider, params.syncId),
  }),
];

export const area = defineArea({
  order: 80,
  tags: {
    Integrations: 'Connections to other tools (webhook-style providers here; OAuth providers through their own flow).',
  },
  routes: integrationRoutes,
});

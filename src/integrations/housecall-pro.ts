/**
 * Housecall Pro's REST API (docs/integrations.md "Housecall Pro"): bearer token from OAuth, JSON
 * bodies; 401 for a bad token, 422 `{ errors: { field: [...] } }` for a validation refusal.
 */
import type { Config } from '../config.js';
import { providerReason, providerRequest, type NetOptions, type ProviderReply } from './http.js';
import { TokenRejected } from './jobber.js';
import { ProviderRefused, ProviderUnavailable } from './oauth.js';

export async function hcpCall(net: NetOptions, cfg: Config, accessToken: string, method: string, path: string, json?: unknown): Promise<ProviderReply> {
  const reply = await providerRequest(net, {
    method, url: `${cfg.HOUSECALLPRO_API_URL.replace(/\/+$/, '')}${path}`, json,
    headers: { authorization: `Bearer ${accessToken}` },
  });
  if (reply.status === 401) throw new TokenRejected(providerReason(reply));
  if (reply.status === null || reply.status === 429 || reply.status >= 500) throw new ProviderUnavailable(providerReason(reply), reply.retryAfter);
  if (reply.status < 200 || reply.status >= 300) throw new ProviderRefused(reply.status, providerReason(reply));
  return reply;
}

export async function hcpCompanyId(net: NetOptions, cfg: Config, accessToken: string): Promise<string> {
  const r = await hcpCall(net, cfg, accessToken, 'GET', '/company');
  const id = r.body?.id;
  if ((typeof id !== 'string' && typeof id !== 'number') || id === '') throw new ProviderRefused(200, 'Housecall Pro answered no company id');
  return String(id);
}

/**
 * ServiceTitan's REST API (docs/integrations.md "ServiceTitan"): the tenant id in the path, the
 * integrator's ST-App-Key and the tenant's client-credentials token on every call; validation
 * refusals are 400 ProblemDetails.
 */
import type { Config } from '../config.js';
import { listOf, requireId } from './answers.js';
import { providerReason, providerRequest, type NetOptions, type ProviderReply } from './http.js';
import { TokenRejected } from './jobber.js';
import { ProviderRefused, ProviderUnavailable } from './oauth.js';
import { stPriority } from './records.js';
import type { WriteContext } from './write-context.js';

export async function stCall(net: NetOptions, cfg: Config, accessToken: string, method: string, path: string, json?: unknown): Promise<ProviderReply> {
  const reply = await providerRequest(net, {
    method, url: `${cfg.SERVICETITAN_API_URL.replace(/\/+$/, '')}${path}`, json,
    headers: { authorization: `Bearer ${accessToken}`, 'st-app-key': cfg.SERVICETITAN_APP_KEY ?? '' },
  });
  if (reply.status === 401) throw new TokenRejected(providerReason(reply));
  if (reply.status === null || reply.status === 429 || reply.status >= 500) throw new ProviderUnavailable(providerReason(reply), reply.retryAfter);
  if (reply.status < 200 || reply.status >= 300) throw new ProviderRefused(reply.status, providerReason(reply));
  return reply;
}

export const bookingsPath = (cfg: Config, tenant: string) =>
  `/crm/v2/tenant/${encodeURIComponent(tenant)}/booking-provider/${encodeURIComponent(cfg.SERVICETITAN_BOOKING_PROVIDER_ID ?? '')}/bookings`;

/**
 * ServiceTitan: a booking in the booking provider's inbox, with externalId = our record's id. The
 * look-up by externalId before creating is what makes it exactly once; staff accept or dismiss it.
 */
export async function stWrite(ctx: WriteContext): Promise<{ external_id: string }> {
  const { net, cfg, accessToken: token, rec } = ctx;
  if (!ctx.externalId) throw new ProviderRefused(0, 'No ServiceTitan tenant id');
  if (!cfg.SERVICETITAN_BOOKING_PROVIDER_ID) throw new ProviderRefused(0, 'SERVICETITAN_BOOKING_PROVIDER_ID is not set');
  const path = bookingsPath(cfg, ctx.externalId);
  const found = await stCall(net, cfg, token, 'GET', `${path}?externalId=${encodeURIComponent(rec.id)}`);
  const existing = listOf(found.body?.data, 'ServiceTitan', 'its booking search').find((b) => b.externalId === rec.id);
  const existingId = existing && requireId(existing.id, 'ServiceTitan', 'a booking it found');
  const body = {
    source: 'Switchboard', name: rec.name ?? 'Caller', summary: `${rec.title}\n${rec.summary}`, isFirstTimeClient: false,
    externalId: rec.id, priority: stPriority(rec.urgency),
    contacts: [
      ...(rec.phone ? [{ type: 'Phone', value: rec.phone }] : []),
      ...(rec.email ? [{ type: 'Email', value: rec.email }] : []),
    ],
    ...(rec.address ? { address: { street: rec.address, country: 'USA' } } : {}),
    ...(rec.start ? { start: rec.start.toISOString() } : {}),
  };
  if (ctx.action === 'update') {
    if (!existingId) throw new ProviderRefused(0, 'No ServiceTitan booking was created for this booking');
    await stCall(net, cfg, token, 'PATCH', `${path}/${encodeURIComponent(existingId)}`, {
      summary: body.summary, ...(rec.start ? { start: body.start } : {}),
      ...(rec.status === 'cancelled' ? { status: 'Dismissed', dismissingReasonId: null } : {}),
    });
    return { external_id: existingId };
  }
  if (existingId) return { external_id: existingId };
  const created = await stCall(net, cfg, token, 'POST', path, body);
  return { external_id: requireId(created.body?.id, 'ServiceTitan', 'the booking it created') };
}

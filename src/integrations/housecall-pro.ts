/**
 * Housecall Pro's REST API (docs/integrations.md "Housecall Pro"): bearer token from OAuth, JSON
 * bodies; 401 for a bad token, 422 `{ errors: { field: [...] } }` for a validation refusal.
 */
import type { Config } from '../config.js';
import { idOf, listOf, requireId } from './answers.js';
import { providerReason, providerRequest, type NetOptions, type ProviderReply } from './http.js';
import { TokenRejected } from './jobber.js';
import { ProviderRefused, ProviderUnavailable } from './oauth.js';
import { digits, samePhone } from './records.js';
import type { WriteContext } from './write-context.js';

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

/**
 * A lead or job (as GET /leads, GET /jobs answer them) that carries our reference: as a tag (HCP's
 * Lead has no note in its answers, only tags), or in a Job's notes.
 */
function carriesRef(x: any, ref: string): boolean {
  if (Array.isArray(x?.tags) && x.tags.includes(ref)) return true;
  // A Job's notes are Note objects ({ id, content }).
  return Array.isArray(x?.notes) && x.notes.some((n: any) => typeof n?.content === 'string' && n.content.includes(ref));
}

/**
 * Housecall Pro: the customer found with GET /customers?q= (by phone), else created with the
 * address; a lead becomes POST /leads, a booking POST /jobs (at a service address of the customer,
 * which HCP requires: added with POST /customers/{id}/addresses when the customer has none) with
 * its window as the schedule, and a rescheduled booking PUT /jobs/{id}/schedule. No idempotency
 * key: the lead or job carries our reference as a tag (and a job in its notes), and a sync
 * attempted before looks for it among the customer's leads or jobs first.
 */
export async function hcpWrite(ctx: WriteContext): Promise<{ external_id: string }> {
  const { net, cfg, accessToken: token, rec } = ctx;
  if (ctx.action === 'update') {
    const jobId = ctx.createRemote?.job_id;
    if (rec.type !== 'booking' || !jobId) throw new ProviderRefused(0, 'No Housecall Pro job was created for this booking');
    if (rec.status === 'cancelled') throw new ProviderRefused(0, 'Housecall Pro offers no job cancellation through its API; cancel the job in Housecall Pro');
    if (!rec.start) throw new ProviderRefused(0, 'The booking has no time to reschedule to');
    await hcpCall(net, cfg, token, 'PUT', `/jobs/${encodeURIComponent(jobId)}/schedule`, {
      start_time: rec.start.toISOString(), end_time: rec.end?.toISOString(), arrival_window_in_minutes: 0,
    });
    return { external_id: jobId };
  }
  let customerId = ctx.remote.customer_id;
  let addressId: string | undefined = ctx.remote.address_id;
  const sameStreet = (a: any) => !!rec.address && typeof a?.street === 'string' && a.street.trim().toLowerCase() === rec.address.toLowerCase();
  if (!customerId && rec.phone) {
    const r = await hcpCall(net, cfg, token, 'GET', `/customers?q=${encodeURIComponent(digits(rec.phone).slice(-10))}`);
    const found = listOf(r.body?.customers, 'Housecall Pro', 'its customer search')
      .find((c) => [c.mobile_number, c.home_number, c.work_number].some((p) => samePhone(p, rec.phone)));
    if (found) {
      customerId = requireId(found.id, 'Housecall Pro', 'a customer it found');
      const addresses = found.addresses == null ? [] : listOf(found.addresses, 'Housecall Pro', "a customer's addresses");
      const a = addresses.find(sameStreet) ?? (rec.address ? undefined : addresses[0]);
      if (a) addressId = requireId(a.id, 'Housecall Pro', "an address of the customer's");
    }
  }
  if (!customerId) {
    const r = await hcpCall(net, cfg, token, 'POST', '/customers', {
      first_name: rec.firstName, last_name: rec.lastName || undefined, email: rec.email ?? undefined,
      mobile_number: rec.phone ?? undefined, lead_source: 'Switchboard',
      ...(rec.address ? { addresses: [{ street: rec.address }] } : {}),
    });
    customerId = requireId(r.body?.id, 'Housecall Pro', 'the customer it created');
    // The address sent with it, when the answer shows it readably (else it is added below).
    const a = Array.isArray(r.body?.addresses) ? idOf(r.body.addresses[0]?.id) : null;
    if (a) addressId = a;
  }
  if (!addressId && rec.address) {
    // A known customer without this address: HCP creates a job only at one of the customer's addresses.
    const r = await hcpCall(net, cfg, token, 'POST', `/customers/${encodeURIComponent(customerId)}/addresses`, { street: rec.address });
    addressId = requireId(r.body?.id, 'Housecall Pro', 'the address it added');
  }
  if (customerId !== ctx.remote.customer_id || addressId !== ctx.remote.address_id) {
    await ctx.progress({ customer_id: customerId, ...(addressId ? { address_id: addressId } : {}) });
  }
  const kind = rec.type === 'lead' ? 'leads' : 'jobs';
  if (ctx.triedBefore) {
    const r = await hcpCall(net, cfg, token, 'GET', `/${kind}?customer_id=${encodeURIComponent(customerId)}`);
    const found = listOf(r.body?.[kind], 'Housecall Pro', `the customer's ${kind}`).find((x) => carriesRef(x, rec.ref));
    if (found) {
      const id = requireId(found.id, 'Housecall Pro', `one of the customer's ${kind}`);
      if (rec.type === 'booking') await ctx.progress({ job_id: id });
      return { external_id: id };
    }
  }
  const tags = [rec.ref];
  let body: Record<string, unknown>;
  if (rec.type === 'lead') {
    body = { customer_id: customerId, ...(addressId ? { address_id: addressId } : {}), lead_source: 'Switchboard', note: `${rec.title}\n${rec.summary}`, tags };
  } else {
    if (!addressId) throw new ProviderRefused(0, 'Housecall Pro creates a job only at an address of the customer; the booking and the customer have none');
    body = {
      customer_id: customerId, address_id: addressId, lead_source: 'Switchboard', notes: `${rec.title}\n${rec.summary}`, tags,
      ...(rec.start ? { schedule: { scheduled_start: rec.start.toISOString(), scheduled_end: rec.end?.toISOString(), arrival_window: 0 } } : {}),
    };
  }
  const r = await hcpCall(net, cfg, token, 'POST', `/${kind}`, body);
  const id = requireId(r.body?.id, 'Housecall Pro', `the ${rec.type === 'lead' ? 'lead' : 'job'} it created`);
  if (rec.type === 'booking') await ctx.progress({ job_id: id });
  return { external_id: id };
}

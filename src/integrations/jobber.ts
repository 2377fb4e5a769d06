/**
 * Jobber's GraphQL API (docs/integrations.md "Jobber"): every call is a POST of JSON with the
 * bearer token and the X-JOBBER-GRAPHQL-VERSION header. Validation problems come back as
 * userErrors with HTTP 200, throttling as errors[].extensions.code THROTTLED, a bad token as 401.
 */
import type { Config } from '../config.js';
import { listOf, ProviderUnreadable, requireId } from './answers.js';
import { providerReason, providerRequest, type NetOptions, type ProviderReply } from './http.js';
import { ProviderRefused, ProviderUnavailable } from './oauth.js';
import { samePhone } from './records.js';
import type { WriteContext } from './write-context.js';

export class TokenRejected extends Error {}

export interface GraphqlResult {
  data: any;
  reply: ProviderReply;
}

/** One GraphQL call; a 401 → TokenRejected, 429/5xx/throttled/no answer → ProviderUnavailable. */
export async function jobberGraphql(net: NetOptions, cfg: Config, accessToken: string, query: string, variables: Record<string, unknown> = {}): Promise<GraphqlResult> {
  const reply = await providerRequest(net, {
    url: cfg.JOBBER_API_URL, json: { query, variables },
    headers: { authorization: `Bearer ${accessToken}`, 'x-jobber-graphql-version': cfg.JOBBER_GRAPHQL_VERSION },
  });
  if (reply.status === 401) throw new TokenRejected(providerReason(reply));
  if (reply.status === null || reply.status === 429 || reply.status >= 500) {
    throw new ProviderUnavailable(providerReason(reply), reply.retryAfter);
  }
  const errors: any[] = Array.isArray(reply.body?.errors) ? reply.body.errors : [];
  if (errors.some((e) => e?.extensions?.code === 'THROTTLED')) {
    throw new ProviderUnavailable('Jobber throttled the request', throttleWait(reply.body));
  }
  if (reply.status !== 200 || errors.length > 0) {
    throw new ProviderRefused(reply.status, errors.length ? errors.map((e) => String(e?.message ?? e)).join('; ').slice(0, 500) : providerReason(reply));
  }
  const data = reply.body?.data;
  if (data === null || typeof data !== 'object' || Array.isArray(data)) throw new ProviderUnreadable('Jobber', 'a query');
  return { data, reply };
}

/**
 * Seconds until the query-cost bucket holds what the query needs again, from
 * extensions.cost.throttleStatus (maximumAvailable, currentlyAvailable, restoreRate per second).
 */
export function throttleWait(body: any): number | null {
  const cost = body?.extensions?.cost;
  const t = cost?.throttleStatus;
  if (!t || typeof t.restoreRate !== 'number' || t.restoreRate <= 0) return null;
  const need = typeof cost.requestedQueryCost === 'number' ? cost.requestedQueryCost : t.maximumAvailable / 10;
  const missing = Math.max(0, need - (t.currentlyAvailable ?? 0));
  return Math.max(1, Math.ceil(missing / t.restoreRate));
}

export async function jobberAccountId(net: NetOptions, cfg: Config, accessToken: string): Promise<string> {
  const { data } = await jobberGraphql(net, cfg, accessToken, 'query { account { id name } }');
  const id = data?.account?.id;
  if (typeof id !== 'string' || !id) throw new ProviderRefused(200, 'Jobber answered no account id');
  return id;
}

/** Jobber's documented disconnect: the app leaves the account and its tokens die. */
export async function jobberDisconnect(net: NetOptions, cfg: Config, accessToken: string): Promise<void> {
  const { data } = await jobberGraphql(net, cfg, accessToken, 'mutation { appDisconnect { app { name } userErrors { message } } }');
  const errs = data?.appDisconnect?.userErrors;
  if (Array.isArray(errs) && errs.length) throw new ProviderRefused(200, errs.map((e: any) => e.message).join('; '));
}

const CLIENTS = 'query Clients($q: String!) { clients(searchTerm: $q, first: 10) { nodes { id phones { number } } } }';
const CLIENT_CREATE = `mutation ClientCreate($input: ClientCreateInput!) {
  clientCreate(input: $input) { client { id } userErrors { message path } } }`;
const CLIENT_REQUESTS = 'query ClientRequests($id: EncodedId!) { client(id: $id) { requests(first: 50) { nodes { id title } } } }';
const REQUEST_CREATE = `mutation RequestCreate($input: RequestCreateInput!) {
  requestCreate(input: $input) { request { id } userErrors { message path } } }`;

function userErrors(payload: any): void {
  const errs = payload?.userErrors;
  if (Array.isArray(errs) && errs.length) throw new ProviderRefused(200, errs.map((e: any) => String(e?.message ?? e)).join('; ').slice(0, 500));
}

/**
 * Jobber: the client found by phone, else created; then a request titled from the service type
 * and summary, a booking's window as its assessment. Jobber has no idempotency key: the request
 * title carries our reference, and a retry looks for it among the client's requests first.
 */
export async function jobberWrite(ctx: WriteContext): Promise<{ external_id: string }> {
  const { net, cfg, accessToken: token, rec } = ctx;
  if (ctx.action === 'update') throw new ProviderRefused(0, 'Jobber requests are not updated after creation');
  let clientId = ctx.remote.client_id;
  if (!clientId && rec.phone) {
    const { data } = await jobberGraphql(net, cfg, token, CLIENTS, { q: rec.phone.replace(/^\+1/, '') });
    const found = listOf(data.clients?.nodes, 'Jobber', 'its client search')
      .find((c) => Array.isArray(c.phones) && c.phones.some((p: any) => samePhone(p?.number, rec.phone)));
    if (found) clientId = requireId(found.id, 'Jobber', 'a client it found');
  }
  if (!clientId) {
    const input = {
      firstName: rec.firstName, lastName: rec.lastName,
      ...(rec.phone ? { phones: [{ number: rec.phone, primary: true }] } : {}),
      ...(rec.email ? { emails: [{ address: rec.email, primary: true }] } : {}),
      ...(rec.address ? { billingAddress: { street1: rec.address } } : {}),
    };
    const { data } = await jobberGraphql(net, cfg, token, CLIENT_CREATE, { input });
    userErrors(data.clientCreate);
    clientId = requireId(data.clientCreate?.client?.id, 'Jobber', 'the client it created');
  }
  if (clientId !== ctx.remote.client_id) await ctx.progress({ client_id: clientId });
  if (ctx.triedBefore) {
    const { data } = await jobberGraphql(net, cfg, token, CLIENT_REQUESTS, { id: clientId });
    // A client no longer there (null) has no requests: the create below is refused for it.
    const requests = data.client === null ? [] : listOf(data.client?.requests?.nodes, 'Jobber', "the client's requests");
    const found = requests.find((r) => typeof r.title === 'string' && r.title.includes(rec.ref));
    if (found) return { external_id: requireId(found.id, 'Jobber', 'a request it found') };
  }
  const input = {
    clientId, title: rec.title,
    ...(rec.start ? { assessment: { startAt: rec.start.toISOString(), endAt: rec.end?.toISOString() } } : {}),
  };
  const { data } = await jobberGraphql(net, cfg, token, REQUEST_CREATE, { input });
  userErrors(data.requestCreate);
  return { external_id: requireId(data.requestCreate?.request?.id, 'Jobber', 'the request it created') };
}

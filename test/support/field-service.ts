/**
 * Stand-ins of the three field-service systems, over real HTTPS with the test CA:
 *
 * - their authorization servers are oauth2-mock-server instances (authorization code with PKCE,
 *   refresh with rotation, client credentials), made stricter through its hooks the way the real
 *   providers are: a code is good once, a refresh token is good once (Jobber's rotation), a revoked
 *   refresh token answers invalid_grant, client secrets are checked;
 * - a consent page in front of /authorize (Allow / Deny), as a contractor sees one;
 * - their APIs in the documented shapes (docs/integrations.md): Jobber's GraphQL, Housecall Pro's
 *   REST, ServiceTitan's bookings, accepting only access tokens their authorization server issued.
 *
 * `fail(...)` queues misbehaviour for the next API calls: 401, 429 (with Retry-After), Jobber's
 * THROTTLED error, 500, a validation refusal, a 400 whose message echoes the request body (echo),
 * or silence (down); `reshape` changes what a success carries.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { OAuth2Server } from 'oauth2-mock-server';
import type { TestPki } from './https.js';

export interface ApiRequest {
  method: string;
  path: string;
  headers: IncomingMessage['headers'];
  body: any;
}

export type Failure = '401' | '429' | '429-long' | 'throttled' | '500' | 'invalid' | 'echo' | 'down' | 'pass';

export interface AuthServer {
  url: string;
  server: OAuth2Server;
  /** Access tokens issued and still good. */
  access: Set<string>;
  /** Refresh tokens issued and still good (each good once). */
  refresh: Set<string>;
  tokenRequests: Record<string, string>[];
  /** Answer every later refresh with invalid_grant (account disconnected or downgraded). */
  revokeAll(): void;
  close(): Promise<void>;
}

export async function startAuthServer(pki: TestPki, clientId: string, clientSecret: string, opts: { requirePkce?: boolean } = {}): Promise<AuthServer> {
  const server = new OAuth2Server(path.join(pki.dir, 'leaf.key'), path.join(pki.dir, 'leaf.pem'));
  await server.issuer.keys.generate('RS256');
  const access = new Set<string>();
  const refresh = new Set<string>();
  const codes = new Set<string>();
  const tokenRequests: Record<string, string>[] = [];
  let revoked = false;
  // Every token unique (the library's JWTs are otherwise equal within one second).
  server.service.on('beforeTokenSigning', (token: { payload: Record<string, unknown> }) => {
    token.payload.jti = randomUUID();
  });
  server.service.on('beforeAuthorizeRedirect', (r: { url: URL }) => {
    const code = r.url.searchParams.get('code');
    if (code) codes.add(code);
  });
  server.service.on('beforeResponse', (response: { body: any; statusCode: number }, req: { body: Record<string, string> }) => {
    const b = req.body;
    tokenRequests.push({ ...b });
    const refuse = (error: string, description: string) => {
      response.statusCode = 400;
      response.body = { error, error_description: description };
    };
    if (b.client_id !== clientId || b.client_secret !== clientSecret) return refuse('invalid_client', 'Client authentication failed');
    if (b.grant_type === 'authorization_code') {
      if (!codes.delete(b.code)) return refuse('invalid_grant', 'The authorization code is invalid or was already used');
      if (opts.requirePkce && !b.code_verifier) return refuse('invalid_request', 'code_verifier required');
    } else if (b.grant_type === 'refresh_token') {
      // Rotation: the old refresh token dies as the new one is issued.
      if (revoked || !refresh.delete(b.refresh_token)) return refuse('invalid_grant', 'The provided refresh token is not valid');
    }
    access.add(response.body.access_token);
    if (response.body.refresh_token) refresh.add(response.body.refresh_token);
  });
  await server.start(0, '127.0.0.1');
  return {
    url: server.issuer.url!.replace(/\/$/, ''), server, access, refresh, tokenRequests,
    revokeAll: () => {
      revoked = true;
      refresh.clear();
    },
    close: () => server.stop(),
  };
}

export interface StandIn {
  url: string;
  requests: ApiRequest[];
  fail(...f: Failure[]): void;
  /** Remote records by kind (clients, requests, customers, leads, jobs, bookings). */
  records: Record<string, any[]>;
  /** Hold every answer until released (a provider that is down or black-holed). */
  down: boolean;
  /** Hold the answers to the requests this picks (one account black-holed, the others answered). */
  hold?: (r: ApiRequest) => boolean;
  /** Replaces the body of a success (2xx) before it is sent: an answer in a shape nobody documents. */
  reshape?: (r: ApiRequest, body: unknown) => unknown;
  close(): Promise<void>;
}

type Handler = (r: ApiRequest, send: (status: number, body: unknown, headers?: Record<string, string>) => void) => void;

async function startStandIn(pki: TestPki, auth: AuthServer | null, route: (s: StandIn) => Handler, consent?: { path: string; authorizeUrl: () => string }): Promise<StandIn> {
  const failures: Failure[] = [];
  const held: ServerResponse[] = [];
  const s: StandIn = {
    url: '', requests: [], records: {}, down: false,
    fail: (...f) => failures.push(...f),
    close: async () => {
      for (const res of held) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((ok) => server.close(() => ok()));
    },
  };
  const handler = route(s);
  const server = createServer({ key: pki.key, cert: pki.cert }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'https://stand-in');
      if (consent && url.pathname === consent.path) {
        // The consent page: Allow goes on to the authorization server, Deny returns access_denied.
        const target = new URL(consent.authorizeUrl());
        url.searchParams.forEach((v, k) => target.searchParams.set(k, v));
        const deny = new URL(url.searchParams.get('redirect_uri') ?? 'https://invalid/');
        deny.searchParams.set('error', 'access_denied');
        deny.searchParams.set('state', url.searchParams.get('state') ?? '');
        res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
        res.end(`<!doctype html><title>Allow access</title><h1>Allow Switchboard to access your account?</h1>
<a id="allow" href="${target.href.replace(/"/g, '&quot;')}">Allow</a> <a id="deny" href="${deny.href.replace(/"/g, '&quot;')}">Deny</a>`);
        return;
      }
      const text = Buffer.concat(chunks).toString('utf8');
      let body: any = null;
      try {
        body = text ? JSON.parse(text) : null;
      } catch {
        body = text;
      }
      const r: ApiRequest = { method: req.method ?? '', path: req.url ?? '', headers: req.headers, body };
      s.requests.push(r);
      const send = (status: number, b: unknown, headers: Record<string, string> = {}) => {
        res.writeHead(status, { 'content-type': 'application/json', ...headers });
        res.end(JSON.stringify(s.reshape && status >= 200 && status < 300 ? s.reshape(r, b) : b));
      };
      if (s.down || s.hold?.(r)) {
        held.push(res);
        return;
      }
      const f = failures.shift();
      if (f === 'down') {
        held.push(res);
        return;
      }
      if (f === '500') return send(503, { message: 'Service unavailable' });
      if (f === 'echo') return send(400, { message: `Refused, the record already exists: ${text}` });
      if (f === '429') return send(429, { message: 'Too many requests' }, { 'retry-after': '1' });
      if (f === '429-long') return send(429, { message: 'Too many requests' }, { 'retry-after': '600' });
      const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
      if (f === '401' || (auth && (!token || !auth.access.has(token)))) {
        if (f === '401' && token) auth?.access.delete(token);
        return send(401, { message: 'Unauthorized' });
      }
      if (f === 'throttled') {
        return send(200, {
          errors: [{ message: 'Throttled', extensions: { code: 'THROTTLED' } }],
          extensions: { cost: { requestedQueryCost: 100, actualQueryCost: 0, throttleStatus: { maximumAvailable: 10000, currentlyAvailable: 0, restoreRate: 500 } } },
        });
      }
      if (f === 'invalid') (r as ApiRequest & { invalid: true }).invalid = true;
      handler(r, send);
    });
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  s.url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return s;
}

const add = (s: StandIn, kind: string, rec: any) => {
  (s.records[kind] ??= []).push(rec);
  return rec;
};
const isInvalid = (r: ApiRequest) => (r as ApiRequest & { invalid?: true }).invalid === true;

/** Jobber's GraphQL API at /api/graphql and its consent page at /api/oauth/authorize. */
export function startJobber(pki: TestPki, auth: AuthServer): Promise<StandIn> {
  return startStandIn(pki, auth, (s) => (r, send) => {
    if (r.path !== '/api/graphql' || r.method !== 'POST') return send(404, { message: 'Not found' });
    if (!/^\d{4}-\d{2}-\d{2}$/.test(String(r.headers['x-jobber-graphql-version'] ?? ''))) return send(400, { message: 'X-JOBBER-GRAPHQL-VERSION required' });
    const q = String(r.body?.query ?? '');
    const v = r.body?.variables ?? {};
    const userErrors = isInvalid(r) ? [{ message: 'Title can\'t be blank', path: ['title'] }] : [];
    if (/appDisconnect/.test(q)) {
      add(s, 'disconnects', {});
      auth.access.clear();
      auth.revokeAll();
      return send(200, { data: { appDisconnect: { app: { name: 'Switchboard' }, userErrors: [] } } });
    }
    if (/account\s*{/.test(q)) return send(200, { data: { account: { id: 'Z2lkOi8vSm9iYmVyL0FjY291bnQvMQ==', name: 'Acme Heating' } } });
    if (/clientCreate/.test(q)) {
      if (userErrors.length) return send(200, { data: { clientCreate: { client: null, userErrors } } });
      const c = add(s, 'clients', { id: `client-${randomUUID()}`, ...v.input });
      return send(200, { data: { clientCreate: { client: { id: c.id }, userErrors: [] } } });
    }
    if (/requestCreate/.test(q)) {
      if (userErrors.length) return send(200, { data: { requestCreate: { request: null, userErrors } } });
      const q2 = add(s, 'requests', { id: `request-${randomUUID()}`, ...v.input });
      return send(200, { data: { requestCreate: { request: { id: q2.id }, userErrors: [] } } });
    }
    if (/client\s*\(\s*id:/.test(q)) {
      const nodes = (s.records.requests ?? []).filter((x) => x.clientId === v.id).map((x) => ({ id: x.id, title: x.title }));
      return send(200, { data: { client: { requests: { nodes } } } });
    }
    if (/clients\s*\(/.test(q)) {
      const varName = /searchTerm:\s*\$(\w+)/.exec(q)?.[1];
      const term = String((varName ? v[varName] : /searchTerm:\s*"([^"]*)"/.exec(q)?.[1]) ?? '').replace(/\D/g, '');
      const nodes = (s.records.clients ?? []).filter((c) => term && (c.phones ?? []).some((p: any) => String(p.number).replace(/\D/g, '').endsWith(term.slice(-10))));
      return send(200, { data: { clients: { nodes: nodes.map((c) => ({ id: c.id, phones: c.phones })) } } });
    }
    return send(200, { errors: [{ message: 'Unknown query' }] });
  }, { path: '/api/oauth/authorize', authorizeUrl: () => `${auth.url}/authorize` });
}

/**
 * A stored lead or job (kept as it was posted, plus its id) as Housecall Pro's API answers it
 * (housecall.v1.yaml): a Lead has no note (its answer carries customer, address, lead_source,
 * tags, status); a Job's notes are Note objects, and the JobCreate's `notes` string becomes one.
 */
function hcpAnswer(s: StandIn, kind: 'leads' | 'jobs', x: any): any {
  const customer = (s.records.customers ?? []).find((c) => c.id === x.customer_id);
  const address = customer?.addresses?.find((a: any) => a.id === x.address_id) ?? null;
  const person = customer && { id: customer.id, first_name: customer.first_name ?? null, last_name: customer.last_name ?? null, mobile_number: customer.mobile_number ?? null };
  if (kind === 'leads') {
    return { id: x.id, number: x.number, status: x.status, customer: person, address, lead_source: x.lead_source ?? null, tags: x.tags ?? [] };
  }
  return {
    id: x.id, customer: person, address, work_status: 'scheduled', lead_source: x.lead_source ?? null, tags: x.tags ?? [],
    notes: x.notes ? [{ id: `nte_${x.id}`, content: x.notes }] : [], schedule: x.schedule ?? null,
  };
}

/** Housecall Pro's REST API and its consent page at /oauth/authorize. */
export function startHousecallPro(pki: TestPki, auth: AuthServer): Promise<StandIn> {
  return startStandIn(pki, auth, (s) => (r, send) => {
    const u = new URL(r.path, 'https://x');
    const invalid = (errors: Record<string, string[]> = { address: ['is invalid'] }) => send(422, { errors });
    if (r.method === 'GET' && u.pathname === '/company') return send(200, { id: 'company-9', name: 'Acme Plumbing', locations: [] });
    if (r.method === 'GET' && u.pathname === '/customers') {
      const term = (u.searchParams.get('q') ?? '').replace(/\D/g, '');
      const found = (s.records.customers ?? []).filter((c) => term && String(c.mobile_number ?? '').replace(/\D/g, '').endsWith(term.slice(-10)));
      return send(200, { customers: found, page: 1, total_items: found.length });
    }
    if (r.method === 'POST' && u.pathname === '/customers') {
      if (isInvalid(r)) return invalid();
      return send(201, add(s, 'customers', { id: `cus_${randomUUID()}`, ...r.body, addresses: (r.body.addresses ?? []).map((a: any) => ({ id: `adr_${randomUUID()}`, ...a })) }));
    }
    if (r.method === 'GET' && (u.pathname === '/leads' || u.pathname === '/jobs')) {
      const kind = u.pathname.slice(1) as 'leads' | 'jobs';
      const list = (s.records[kind] ?? []).filter((x) => x.customer_id === u.searchParams.get('customer_id'));
      return send(200, { [kind]: list.map((x) => hcpAnswer(s, kind, x)), page: 1, total_items: list.length });
    }
    const addresses = /^\/customers\/([^/]+)\/addresses$/.exec(u.pathname);
    if (r.method === 'POST' && addresses) {
      const customer = (s.records.customers ?? []).find((c) => c.id === decodeURIComponent(addresses[1]));
      if (!customer) return send(404, { message: 'Not found' });
      const a = { id: `adr_${randomUUID()}`, ...r.body };
      (customer.addresses ??= []).push(a);
      return send(201, a);
    }
    if (r.method === 'POST' && u.pathname === '/leads') {
      if (isInvalid(r)) return invalid();
      if (!r.body?.customer_id && !r.body?.customer) return invalid({ customer_id: ["can't be blank"] });
      const lead = add(s, 'leads', { id: `lea_${randomUUID()}`, number: (s.records.leads?.length ?? 0) + 1, status: 'open', ...r.body });
      return send(201, hcpAnswer(s, 'leads', lead));
    }
    if (r.method === 'POST' && u.pathname === '/jobs') {
      if (isInvalid(r)) return invalid();
      // JobCreate requires customer_id and address_id.
      if (!r.body?.customer_id) return invalid({ customer_id: ["can't be blank"] });
      if (!r.body?.address_id) return invalid({ address_id: ["can't be blank"] });
      return send(201, hcpAnswer(s, 'jobs', add(s, 'jobs', { id: `job_${randomUUID()}`, ...r.body })));
    }
    const sched = /^\/jobs\/([^/]+)\/schedule$/.exec(u.pathname);
    if (r.method === 'PUT' && sched) {
      const job = (s.records.jobs ?? []).find((j) => j.id === sched[1]);
      if (!job) return send(404, { message: 'Not found' });
      job.schedule = r.body;
      return send(200, hcpAnswer(s, 'jobs', job));
    }
    return send(404, { message: 'Not found' });
  }, { path: '/oauth/authorize', authorizeUrl: () => `${auth.url}/authorize` });
}

/** ServiceTitan's bookings API (tenant in the path, ST-App-Key on every call). */
export function startServiceTitan(pki: TestPki, auth: AuthServer, appKey: string): Promise<StandIn> {
  return startStandIn(pki, auth, (s) => (r, send) => {
    if (r.headers['st-app-key'] !== appKey) return send(401, { title: 'Invalid app key', status: 401 });
    const u = new URL(r.path, 'https://x');
    const m = /^\/crm\/v2\/tenant\/(\d+)\/booking-provider\/([^/]+)\/bookings(?:\/(\d+))?$/.exec(u.pathname);
    if (!m) return send(404, { title: 'Not Found', status: 404 });
    const list = (s.records.bookings ??= []);
    if (r.method === 'GET' && !m[3]) {
      const ext = u.searchParams.get('externalId');
      const data = list.filter((b) => b.tenant === m[1] && (!ext || b.externalId === ext));
      return send(200, { page: 1, pageSize: 50, hasMore: false, data });
    }
    if (r.method === 'POST' && !m[3]) {
      if (isInvalid(r) || !r.body?.name || !r.body?.externalId || !r.body?.source) {
        return send(400, { type: 'https://tools.ietf.org/html/rfc7231#section-6.5.1', title: 'One or more validation errors occurred.', status: 400, traceId: randomUUID(), errors: { Name: ['The Name field is required.'] } });
      }
      const b = add(s, 'bookings', { id: list.length + 1000, status: 'New', jobId: null, tenant: m[1], ...r.body });
      return send(200, b);
    }
    if (r.method === 'PATCH' && m[3]) {
      const b = list.find((x) => String(x.id) === m[3]);
      if (!b) return send(404, { title: 'Not Found', status: 404 });
      Object.assign(b, r.body);
      return send(200, b);
    }
    return send(405, { title: 'Method Not Allowed', status: 405 });
  });
}

export interface FieldServiceWorld {
  jobberAuth: AuthServer;
  hcpAuth: AuthServer;
  stAuth: AuthServer;
  jobber: StandIn;
  hcp: StandIn;
  st: StandIn;
  /** The configuration that points the service at the stand-ins. */
  env: Record<string, string>;
  close(): Promise<void>;
}

export const TEST_KEY = Buffer.alloc(32, 7).toString('base64');

export async function startFieldServiceWorld(pki: TestPki): Promise<FieldServiceWorld> {
  const jobberAuth = await startAuthServer(pki, 'jobber-client', 'jobber-secret', { requirePkce: true });
  const hcpAuth = await startAuthServer(pki, 'hcp-client', 'hcp-secret');
  const stAuth = await startAuthServer(pki, 'st-client', 'st-secret');
  const jobber = await startJobber(pki, jobberAuth);
  const hcp = await startHousecallPro(pki, hcpAuth);
  const st = await startServiceTitan(pki, stAuth, 'st-app-key');
  const env = {
    INTEGRATION_ENCRYPTION_KEY: TEST_KEY,
    JOBBER_CLIENT_ID: 'jobber-client', JOBBER_CLIENT_SECRET: 'jobber-secret',
    JOBBER_AUTHORIZE_URL: `${jobber.url}/api/oauth/authorize`, JOBBER_TOKEN_URL: `${jobberAuth.url}/token`,
    JOBBER_API_URL: `${jobber.url}/api/graphql`,
    HOUSECALLPRO_CLIENT_ID: 'hcp-client', HOUSECALLPRO_CLIENT_SECRET: 'hcp-secret',
    HOUSECALLPRO_AUTHORIZE_URL: `${hcp.url}/oauth/authorize`, HOUSECALLPRO_TOKEN_URL: `${hcpAuth.url}/token`,
    HOUSECALLPRO_API_URL: hcp.url,
    SERVICETITAN_APP_KEY: 'st-app-key', SERVICETITAN_AUTH_URL: `${stAuth.url}/token`, SERVICETITAN_API_URL: st.url,
    SERVICETITAN_BOOKING_PROVIDER_ID: 'switchboard',
    WEBHOOK_TIMEOUT_MS: '3000',
  };
  return {
    jobberAuth, hcpAuth, stAuth, jobber, hcp, st, env,
    close: async () => {
      for (const x of [jobber, hcp, st, jobberAuth, hcpAuth, stAuth]) await x.close();
    },
  };
}

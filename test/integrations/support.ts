/**
 * Shared set-up of the field-service tests: the API on a real database pointed at the stand-ins
 * (test/support/field-service.ts), and the contractor's round trip through a provider's consent.
 */
import https from 'node:https';
import { integrationKey, open, SECRETS, type IntegrationSecrets } from '../../src/integrations/crypto.js';
import { SyncRunner } from '../../src/integrations/sync.js';
import { startFieldServiceWorld, type FieldServiceWorld } from '../support/field-service.js';
import { request, startTestApi, tenant, testLog, type TestApi, type TestApiOptions } from '../support/harness.js';
import { makePki, type TestPki } from '../support/https.js';

export interface Setup {
  pki: TestPki;
  world: FieldServiceWorld;
  api: TestApi;
  close(): Promise<void>;
}

/** `log`: the API's logger (testLog unless given; test/privacy/trace-paths.test.ts reads what it writes). */
export async function setup(env: Record<string, string> = {}, opts: Pick<TestApiOptions, 'log'> = {}): Promise<Setup> {
  const pki = makePki();
  const world = await startFieldServiceWorld(pki);
  const api = await startTestApi({ ...world.env, ...env }, undefined, { ca: pki.caPem, log: opts.log });
  // The redirect URI needs the port the API got.
  api.cfg.PUBLIC_BASE_URL ??= api.baseUrl;
  return {
    pki, world, api,
    close: async () => {
      await api.close();
      await world.close();
    },
  };
}

export { tenant };

/** A GET over HTTPS trusting the test CA, without following redirects. */
export function httpsGet(url: string, ca: string): Promise<{ status: number; location?: string; body: string }> {
  return new Promise((resolve, reject) => {
    https.get(url, { ca }, (res) => {
      let body = '';
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, location: res.headers.location, body }));
    }).on('error', reject);
  });
}

/**
 * What a contractor's browser does after the app opens authorize_url and they press Allow: the
 * authorization server's redirect back to our callback. Returns the callback URL.
 */
export async function consent(s: Setup, authorizeUrl: string): Promise<string> {
  const consentPage = await httpsGet(authorizeUrl, s.pki.caPem);
  const allow = /id="allow" href="([^"]+)"/.exec(consentPage.body)![1].replace(/&quot;/g, '"').replace(/&amp;/g, '&');
  const redirect = await httpsGet(allow, s.pki.caPem);
  if (redirect.status !== 302 || !redirect.location) throw new Error(`authorization server answered ${redirect.status}`);
  return redirect.location;
}

export async function getPage(url: string): Promise<{ status: number; text: string; headers: Headers }> {
  const res = await fetch(url, { redirect: 'manual' });
  return { status: res.status, text: await res.text(), headers: res.headers };
}

/**
 * A new location with an API key, connected to a provider: Jobber and Housecall Pro through their
 * consent, ServiceTitan with its client credentials.
 */
export async function connectedTenant(s: Setup, provider: 'jobber' | 'housecall_pro' | 'servicetitan') {
  const t = await tenant(s.api);
  if (provider === 'servicetitan') {
    const r = await request(s.api.baseUrl, 'PUT', `/api/v1/locations/${t.loc.id}/integrations/servicetitan/credentials`,
      { token: t.token, body: { tenant_id: '4021', client_id: 'st-client', client_secret: 'st-secret' } });
    if (r.status !== 200) throw new Error(`credentials answered ${r.status} ${JSON.stringify(r.body)}`);
  } else {
    const page = await connect(s, t.loc.id, t.token, provider);
    if (page.status !== 200) throw new Error(`the callback answered ${page.status}`);
  }
  return t;
}

/** Connects a provider with a redirect flow end to end; returns the callback answer. */
export async function connect(s: Setup, locId: string, token: string, provider: 'jobber' | 'housecall_pro') {
  const auth = await request(s.api.baseUrl, 'POST', `/api/v1/locations/${locId}/integrations/${provider}/authorize`, { token });
  if (auth.status !== 201) throw new Error(`authorize answered ${auth.status} ${JSON.stringify(auth.body)}`);
  return getPage(await consent(s, auth.body.data.authorize_url));
}

/** The integration's stored secrets, decrypted with the test key (null when erased). */
export async function storedSecrets(s: Setup, locId: string, provider: string): Promise<IntegrationSecrets | null> {
  const { rows } = await s.api.owner.query(
    'select secrets_ciphertext from app.integrations where location_id = $1 and provider = $2 order by created_at desc limit 1', [locId, provider]);
  const ct = rows[0]?.secrets_ciphertext as Buffer | null | undefined;
  return ct ? open<IntegrationSecrets>(integrationKey(s.api.cfg), SECRETS, ct) : null;
}

/** A booking of a lead (10:00 on 10 December 2026, in the location's time zone), as a call's would be written. */
export async function insertBooking(s: Setup, locId: string, leadId: string): Promise<string> {
  const { rows: [b] } = await s.api.owner.query(
    `insert into app.bookings (location_id, lead_id, scheduled_date, scheduled_time, service_type, status)
     values ($1, $2, '2026-12-10', '10:00', 'Leak', 'scheduled') returning id`, [locId, leadId]);
  return b.id;
}

/** A sync runner on the test API's database, trusting the stand-ins' CA. */
export const syncRunner = (s: Setup, log = testLog) => new SyncRunner({ cfg: s.api.cfg, log, pool: s.api.owner, ca: s.pki.caPem });

/** A location's sync log, oldest first. */
export const syncRows = async (s: Setup, locId: string) =>
  (await s.api.owner.query('select * from app.integration_syncs where location_id = $1 order by created_at, action', [locId])).rows;

/** Makes a waiting sync due now. */
export const makeDue = (s: Setup, id: string) =>
  s.api.owner.query("update app.integration_syncs set next_attempt_at = now() - interval '1 second' where id = $1", [id]);

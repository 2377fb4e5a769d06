/**
 * Connecting Jobber, Housecall Pro and ServiceTitan (docs/integrations.md "Connect"), against
 * oauth2-mock-server authorization servers and HTTPS stand-ins of the providers' APIs.
 */
import { hashToken } from '../../src/auth/tokens.js';
import { request } from '../support/harness.js';
import { connect, consent, getPage, setup, storedSecrets, tenant, type Setup } from './support.js';

const V = '/api/v1';
let s: Setup;

beforeAll(async () => {
  s = await setup();
}, 60_000);
afterAll(async () => s?.close());

const integration = async (locId: string, provider: string) =>
  (await s.api.owner.query('select * from app.integrations where location_id = $1 and provider = $2 order by created_at desc', [locId, provider])).rows;

test('Jobber: authorize URL with single-use state and PKCE S256, callback stores encrypted tokens and the account id', async () => {
  const { loc, token } = await tenant(s.api);
  const auth = await request(s.api.baseUrl, 'POST', `${V}/locations/${loc.id}/integrations/jobber/authorize`, { token });
  expect(auth.status).toBe(201);
  const u = new URL(auth.body.data.authorize_url);
  expect(u.origin + u.pathname).toBe(s.world.env.JOBBER_AUTHORIZE_URL);
  expect(u.searchParams.get('response_type')).toBe('code');
  expect(u.searchParams.get('client_id')).toBe('jobber-client');
  expect(u.searchParams.get('redirect_uri')).toBe(`${s.api.baseUrl}/api/oauth/callback`);
  expect(u.searchParams.get('code_challenge_method')).toBe('S256');
  expect(u.searchParams.get('code_challenge')).toMatch(/^[A-Za-z0-9_-]{43}$/);
  expect(u.searchParams.get('state')).toMatch(/^[A-Za-z0-9_-]{43}$/);
  const ttl = Date.parse(auth.body.data.expires_at) - Date.now();
  expect(ttl).toBeGreaterThan(9 * 60_000);
  expect(ttl).toBeLessThanOrEqual(10 * 60_000);

  const callbackUrl = await consent(s, auth.body.data.authorize_url);
  expect(callbackUrl.startsWith(`${s.api.baseUrl}/api/oauth/callback?`)).toBe(true);
  const page = await getPage(callbackUrl);
  expect(page.status).toBe(200);
  expect(page.headers.get('content-type')).toMatch(/^text\/html/);
  expect(page.headers.get('referrer-policy')).toBe('no-referrer');
  expect(page.text).toContain('Jobber');
  expect(page.text).toContain(loc.name);
  expect(page.text).toMatch(/close this window/);

  // The token request carried the PKCE verifier (oauth2-mock-server checks it against the challenge).
  const exchange = s.world.jobberAuth.tokenRequests.filter((r) => r.grant_type === 'authorization_code').at(-1)!;
  expect(exchange.code_verifier).toMatch(/^[A-Za-z0-9_-]{43}$/);
  expect(exchange.redirect_uri).toBe(`${s.api.baseUrl}/api/oauth/callback`);

  const [row] = await integration(loc.id, 'jobber');
  expect(row).toMatchObject({ status: 'connected', external_id: 'Z2lkOi8vSm9iYmVyL0FjY291bnQvMQ==', access_token: null, refresh_token: null });
  expect(row.connected_at).not.toBeNull();
  expect(row.expires_at.getTime()).toBeGreaterThan(Date.now());
  const secrets = (await storedSecrets(s, loc.id, 'jobber'))!;
  expect(s.world.jobberAuth.access.has(secrets.access_token!)).toBe(true);
  expect(s.world.jobberAuth.refresh.has(secrets.refresh_token!)).toBe(true);
  // Encrypted at rest: neither token appears in the stored bytes.
  expect(row.secrets_ciphertext.includes(Buffer.from(secrets.access_token!))).toBe(false);
  expect(row.secrets_ciphertext.includes(Buffer.from(secrets.refresh_token!))).toBe(false);

  // The API's answer never carries a token or the ciphertext.
  const list = await request(s.api.baseUrl, 'GET', `${V}/locations/${loc.id}/integrations`, { token });
  const jobber = list.body.data.find((i: any) => i.provider === 'jobber');
  expect(jobber).toMatchObject({ status: 'connected', external_id: 'Z2lkOi8vSm9iYmVyL0FjY291bnQvMQ==' });
  expect(JSON.stringify(list.body)).not.toContain(secrets.access_token);
  expect(JSON.stringify(list.body)).not.toMatch(/ciphertext/);

  // Replaying the callback: the state was single use.
  const replay = await getPage(callbackUrl);
  expect(replay.status).toBe(400);
  expect(replay.text).toMatch(/already used/);
  expect(await integration(loc.id, 'jobber')).toHaveLength(1);

  // Connected already: a second authorize is a conflict.
  const again = await request(s.api.baseUrl, 'POST', `${V}/locations/${loc.id}/integrations/jobber/authorize`, { token });
  expect(again.status).toBe(409);
});

test('Housecall Pro: JSON token exchange without PKCE, account id from GET /company', async () => {
  const { loc, token } = await tenant(s.api);
  const page = await connect(s, loc.id, token, 'housecall_pro');
  expect(page.status).toBe(200);
  expect(page.text).toContain('Housecall Pro');
  const [row] = await integration(loc.id, 'housecall_pro');
  expect(row).toMatchObject({ status: 'connected', external_id: 'company-9' });
  const exchange = s.world.hcpAuth.tokenRequests.filter((r) => r.grant_type === 'authorization_code').at(-1)!;
  expect(exchange.code_verifier).toBeUndefined();
  const company = s.world.hcp.requests.filter((r) => r.path === '/company').at(-1)!;
  expect(company.headers.authorization).toBe(`Bearer ${(await storedSecrets(s, loc.id, 'housecall_pro'))!.access_token}`);
});

test('bad, unknown, expired or declined callbacks answer a 400 page and store nothing', async () => {
  const { loc, token } = await tenant(s.api);
  const cb = `${s.api.baseUrl}/api/oauth/callback`;
  const missing = await getPage(`${cb}?code=abc`);
  expect(missing.status).toBe(400);
  expect(missing.text).toMatch(/no valid state/);
  const unknown = await getPage(`${cb}?code=abc&state=${'x'.repeat(43)}`);
  expect(unknown.status).toBe(400);
  expect(unknown.text).toMatch(/not known/);

  // Declined at the consent page.
  const auth1 = await request(s.api.baseUrl, 'POST', `${V}/locations/${loc.id}/integrations/jobber/authorize`, { token });
  const consentPage = await (await import('./support.js')).httpsGet(auth1.body.data.authorize_url, s.pki.caPem);
  const deny = /id="deny" href="([^"]+)"/.exec(consentPage.body)![1].replace(/&amp;/g, '&');
  const denied = await getPage(deny);
  expect(denied.status).toBe(400);
  expect(denied.text).toMatch(/declined/);
  expect(denied.text).toContain(loc.name);

  // Expired: the state is older than ten minutes by the time the contractor comes back.
  const auth2 = await request(s.api.baseUrl, 'POST', `${V}/locations/${loc.id}/integrations/jobber/authorize`, { token });
  const callbackUrl = await consent(s, auth2.body.data.authorize_url);
  await s.api.owner.query("update app.integration_oauth_states set expires_at = now() - interval '1 second' where location_id = $1 and used_at is null", [loc.id]);
  const expired = await getPage(callbackUrl);
  expect(expired.status).toBe(400);
  expect(expired.text).toMatch(/expired/);

  // A refused code (the authorization server's invalid_grant) stores nothing either.
  const auth3 = await request(s.api.baseUrl, 'POST', `${V}/locations/${loc.id}/integrations/jobber/authorize`, { token });
  const state = new URL(auth3.body.data.authorize_url).searchParams.get('state')!;
  const refused = await getPage(`${cb}?code=forged&state=${state}`);
  expect(refused.status).toBe(400);
  expect(refused.text).toMatch(/refused/);

  expect(await integration(loc.id, 'jobber')).toHaveLength(0);
});

test('authorize: scopes, tenancy, providers without a redirect flow, unconfigured providers', async () => {
  const a = await tenant(s.api);
  const b = await tenant(s.api);
  const ro = await tenant(s.api, ['integrations:read']);
  const post = (loc: string, provider: string, token: string) =>
    request(s.api.baseUrl, 'POST', `${V}/locations/${loc}/integrations/${provider}/authorize`, { token });
  expect((await post(a.loc.id, 'jobber', b.token)).status).toBe(404);
  const forbidden = await post(ro.loc.id, 'jobber', ro.token);
  expect(forbidden.status).toBe(403);
  expect(forbidden.body.error.details).toEqual({ required_scope: 'integrations:write' });
  const st = await post(a.loc.id, 'servicetitan', a.token);
  expect(st.status).toBe(400);
  expect(st.body.error.message).toMatch(/credentials/);
  expect((await post(a.loc.id, 'hubspot', a.token)).status).toBe(400);
  // Google Calendar, Outlook and HubSpot keep answering oauth_required on POST integrations.
  const hub = await request(s.api.baseUrl, 'POST', `${V}/locations/${a.loc.id}/integrations`, { token: a.token, body: { provider: 'hubspot', webhook_url: 'https://example.com/h' } });
  expect(hub.body.error.code).toBe('oauth_required');
  const { rows } = await s.api.owner.query('select count(*)::int as n from app.integration_oauth_states where location_id = any($1)', [[a.loc.id, ro.loc.id]]);
  expect(rows[0].n).toBe(0);

  const bare = await (await import('../support/harness.js')).startTestApi({ INTEGRATION_ENCRYPTION_KEY: s.world.env.INTEGRATION_ENCRYPTION_KEY, PUBLIC_BASE_URL: 'https://app.example.com' });
  try {
    const t = await tenant(bare);
    const r = await request(bare.baseUrl, 'POST', `${V}/locations/${t.loc.id}/integrations/jobber/authorize`, { token: t.token });
    expect(r.status).toBe(503);
    expect(r.body.error.code).toBe('not_configured');
    const st2 = await request(bare.baseUrl, 'PUT', `${V}/locations/${t.loc.id}/integrations/servicetitan/credentials`, { token: t.token, body: { tenant_id: '123', client_id: 'a', client_secret: 'b' } });
    expect(st2.status).toBe(503);
    expect(st2.body.error.code).toBe('not_configured');
  } finally {
    await bare.close();
  }
});

test('ServiceTitan: credentials are checked by minting a token; refused → 422 with the reason, accepted → connected', async () => {
  const { loc, token } = await tenant(s.api);
  const put = (body: unknown) => request(s.api.baseUrl, 'PUT', `${V}/locations/${loc.id}/integrations/servicetitan/credentials`, { token, body });
  const bad = await put({ tenant_id: '4021', client_id: 'st-client', client_secret: 'wrong' });
  expect(bad.status).toBe(422);
  expect(bad.body.error.code).toBe('provider_rejected');
  expect(bad.body.error.message).toContain('Client authentication failed');
  expect(await integration(loc.id, 'servicetitan')).toHaveLength(0);
  expect((await put({ tenant_id: 'abc', client_id: 'st-client', client_secret: 'st-secret' })).status).toBe(400);

  const ok = await put({ tenant_id: '4021', client_id: 'st-client', client_secret: 'st-secret' });
  expect(ok.status).toBe(200);
  expect(ok.body.data).toMatchObject({ provider: 'servicetitan', status: 'connected', external_id: '4021' });
  expect(JSON.stringify(ok.body)).not.toContain('st-secret');
  const secrets = (await storedSecrets(s, loc.id, 'servicetitan'))!;
  expect(secrets).toMatchObject({ client_id: 'st-client', client_secret: 'st-secret' });
  expect(s.world.stAuth.access.has(secrets.access_token!)).toBe(true);
  const [row] = await integration(loc.id, 'servicetitan');
  expect(row.secrets_ciphertext.includes(Buffer.from('st-secret'))).toBe(false);
});

test('DELETE revokes at Jobber (appDisconnect) and erases the stored tokens', async () => {
  const { loc, token } = await tenant(s.api);
  expect((await connect(s, loc.id, token, 'jobber')).status).toBe(200);
  const before = (await storedSecrets(s, loc.id, 'jobber'))!;
  const disconnects = s.world.jobber.records.disconnects?.length ?? 0;
  const del = await request(s.api.baseUrl, 'DELETE', `${V}/locations/${loc.id}/integrations/jobber`, { token });
  expect(del.status).toBe(200);
  expect(del.body.data).toMatchObject({ provider: 'jobber', status: 'disconnected' });
  expect(JSON.stringify(del.body)).not.toMatch(/ciphertext/);
  expect(s.world.jobber.records.disconnects).toHaveLength(disconnects + 1);
  const call = s.world.jobber.requests.filter((r) => /appDisconnect/.test(r.body?.query ?? '')).at(-1)!;
  expect(call.headers.authorization).toBe(`Bearer ${before.access_token}`);
  const [row] = await integration(loc.id, 'jobber');
  expect(row.secrets_ciphertext).toBeNull();
  expect(await storedSecrets(s, loc.id, 'jobber')).toBeNull();
  expect((await request(s.api.baseUrl, 'DELETE', `${V}/locations/${loc.id}/integrations/jobber`, { token })).status).toBe(404);
});

test('a new token refused on the account look-up answers a 400 page, not JSON, and stores nothing', async () => {
  for (const [provider, world] of [['jobber', s.world.jobber], ['housecall_pro', s.world.hcp]] as const) {
    const { loc, token } = await tenant(s.api);
    const auth = await request(s.api.baseUrl, 'POST', `${V}/locations/${loc.id}/integrations/${provider}/authorize`, { token });
    const callbackUrl = await consent(s, auth.body.data.authorize_url);
    world.fail('401');
    const page = await getPage(callbackUrl);
    expect(page.status).toBe(400);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    expect(page.text).toMatch(/refused/);
    expect(await integration(loc.id, provider)).toEqual([]);
  }
});

test('a token answer that is a success without a token (HTML, JSON without access_token) is the provider not answering: a 502 "try again" page, nothing stored', async () => {
  for (const body of ['<html>maintenance</html>', { token_type: 'Bearer' }]) {
    const { loc, token } = await tenant(s.api);
    const auth = await request(s.api.baseUrl, 'POST', `${V}/locations/${loc.id}/integrations/jobber/authorize`, { token });
    const callbackUrl = await consent(s, auth.body.data.authorize_url);
    s.world.jobberAuth.server.service.once('beforeResponse', (response: { body: unknown; statusCode: number }) => {
      response.statusCode = 200;
      response.body = body;
    });
    const page = await getPage(callbackUrl);
    expect([page.status, page.text]).toEqual([502, expect.stringMatching(/could not be reached/)]);
    expect(page.text).not.toMatch(/refused/);
    expect(await integration(loc.id, 'jobber')).toEqual([]);
  }
});

test('a code exchange answered without a refresh token stores nothing: the connection would stop within the hour (a 502 page)', async () => {
  for (const [provider, server] of [['jobber', s.world.jobberAuth.server], ['housecall_pro', s.world.hcpAuth.server]] as const) {
    const { loc, token } = await tenant(s.api);
    const auth = await request(s.api.baseUrl, 'POST', `${V}/locations/${loc.id}/integrations/${provider}/authorize`, { token });
    const callbackUrl = await consent(s, auth.body.data.authorize_url);
    server.service.once('beforeResponse', (response: { body: Record<string, unknown> }) => {
      delete response.body.refresh_token;
    });
    const page = await getPage(callbackUrl);
    expect([page.status, page.text]).toEqual([502, expect.stringMatching(/without a refresh token/)]);
    expect(await integration(loc.id, provider)).toEqual([]);
  }
});

test('a connection started with an API key revoked before the callback is refused with a 400 page, and nothing is stored', async () => {
  const { loc, token } = await tenant(s.api);
  const auth = await request(s.api.baseUrl, 'POST', `${V}/locations/${loc.id}/integrations/jobber/authorize`, { token });
  const callbackUrl = await consent(s, auth.body.data.authorize_url);
  await s.api.owner.query('update app.api_keys set revoked_at = now() where token_hash = $1', [hashToken(token)]);
  const page = await getPage(callbackUrl);
  expect([page.status, page.text]).toEqual([400, expect.stringMatching(/has been revoked since/)]);
  expect(await integration(loc.id, 'jobber')).toEqual([]);
});

test('a HEAD of the callback URL (a link checker) is 405 and leaves the state for the contractor\'s own GET', async () => {
  const { loc, token } = await tenant(s.api);
  const auth = await request(s.api.baseUrl, 'POST', `${V}/locations/${loc.id}/integrations/jobber/authorize`, { token });
  const callbackUrl = await consent(s, auth.body.data.authorize_url);
  const head = await fetch(callbackUrl, { method: 'HEAD' });
  expect([head.status, head.headers.get('allow')]).toEqual([405, 'GET']);
  expect(await integration(loc.id, 'jobber')).toEqual([]);
  const page = await getPage(callbackUrl);
  expect(page.status).toBe(200);
  expect(await integration(loc.id, 'jobber')).toHaveLength(1);
});

test('two callbacks for one location racing: the second answers a 409 page, not JSON', async () => {
  const { loc, token } = await tenant(s.api);
  const auth = await request(s.api.baseUrl, 'POST', `${V}/locations/${loc.id}/integrations/jobber/authorize`, { token });
  const callbackUrl = await consent(s, auth.body.data.authorize_url);
  // The other callback has inserted its connected row and not committed yet: this one's check
  // does not see it, and its insert waits on the unique index until the other commits.
  const other = await s.api.owner.connect();
  try {
    await other.query('begin');
    await other.query(`insert into app.integrations (location_id, provider, status, external_id, connected_at) values ($1, 'jobber', 'connected', 'other', now())`, [loc.id]);
    const pending = getPage(callbackUrl);
    await new Promise((ok) => setTimeout(ok, 1000));
    await other.query('commit');
    const page = await pending;
    expect(page.status).toBe(409);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    expect(page.text).toMatch(/already connected/);
  } finally {
    other.release();
  }
  expect((await integration(loc.id, 'jobber')).map((i) => i.external_id)).toEqual(['other']);
});

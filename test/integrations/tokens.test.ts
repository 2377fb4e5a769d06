/**
 * Token lifecycle (docs/integrations.md "Tokens"): refresh before expiry and once on a 401, one
 * refresh at a time across processes with Jobber's rotating refresh tokens, a refused refresh
 * expiring the integration and notifying the owner, ServiceTitan's cached client-credentials token.
 */
import { createOwnerPool } from '../../src/db/pools.js';
import { jobberAccountId } from '../../src/integrations/jobber.js';
import { netOptions } from '../../src/integrations/service.js';
import { IntegrationUnavailable, TokenKeeper } from '../../src/integrations/tokens.js';
import { request, testLog } from '../support/harness.js';
import { connect, setup, storedSecrets, tenant, type Setup } from './support.js';

let s: Setup;
beforeAll(async () => {
  s = await setup();
}, 60_000);
afterAll(async () => s?.close());

const keeper = (pool = s.api.owner) => new TokenKeeper({ cfg: s.api.cfg, log: testLog, pool, net: netOptions(s.api.cfg, s.pki.caPem) });
const refreshes = () => s.world.jobberAuth.tokenRequests.filter((r) => r.grant_type === 'refresh_token').length;

async function connectedJobber() {
  const { loc, token } = await tenant(s.api);
  expect((await connect(s, loc.id, token, 'jobber')).status).toBe(200);
  const { rows } = await s.api.owner.query("select id from app.integrations where location_id = $1 and provider = 'jobber' and status = 'connected'", [loc.id]);
  return { loc, token, id: rows[0].id as string };
}

const expireSoon = (id: string) => s.api.owner.query("update app.integrations set expires_at = now() + interval '1 minute' where id = $1", [id]);

test('a token close to expires_at is refreshed first; the rotated refresh token is stored and the old one is dead', async () => {
  const { loc, id } = await connectedJobber();
  const before = (await storedSecrets(s, loc.id, 'jobber'))!;
  const k = keeper();
  // Far from expiry: used as is.
  const n0 = refreshes();
  expect((await k.usable(id)).secrets.access_token).toBe(before.access_token);
  expect(refreshes()).toBe(n0);

  await expireSoon(id);
  const c = await k.usable(id);
  expect(refreshes()).toBe(n0 + 1);
  expect(c.secrets.access_token).not.toBe(before.access_token);
  const after = (await storedSecrets(s, loc.id, 'jobber'))!;
  expect(after.access_token).toBe(c.secrets.access_token);
  expect(after.refresh_token).not.toBe(before.refresh_token);
  expect(s.world.jobberAuth.refresh.has(after.refresh_token!)).toBe(true);
  expect(s.world.jobberAuth.refresh.has(before.refresh_token!)).toBe(false);
  const { rows } = await s.api.owner.query('select expires_at, status from app.integrations where id = $1', [id]);
  expect(rows[0].status).toBe('connected');
  expect(rows[0].expires_at.getTime()).toBeGreaterThan(Date.now() + 30 * 60_000);
});

test('two processes needing a refresh at once: one refresh grant, both get the new token, still connected', async () => {
  const { id } = await connectedJobber();
  await expireSoon(id);
  // Separate pools stand for separate worker processes.
  const p1 = createOwnerPool(s.api.db.url, 2, 'proc-1');
  const p2 = createOwnerPool(s.api.db.url, 2, 'proc-2');
  try {
    const n0 = refreshes();
    const [a, b, c] = await Promise.all([keeper(p1).usable(id), keeper(p2).usable(id), keeper(p1).usable(id)]);
    expect(refreshes()).toBe(n0 + 1);
    expect(new Set([a.secrets.access_token, b.secrets.access_token, c.secrets.access_token]).size).toBe(1);
    const { rows } = await s.api.owner.query('select status from app.integrations where id = $1', [id]);
    expect(rows[0].status).toBe('connected');
  } finally {
    await p1.end();
    await p2.end();
  }
});

test('a 401 refreshes once and repeats the call with the new token', async () => {
  const { id } = await connectedJobber();
  s.world.jobber.fail('401');
  const seen: string[] = [];
  const n0 = refreshes();
  const account = await keeper().withToken(id, async (c) => {
    seen.push(c.secrets.access_token!);
    return jobberAccountId(netOptions(s.api.cfg, s.pki.caPem), s.api.cfg, c.secrets.access_token!);
  });
  expect(account).toBe('Z2lkOi8vSm9iYmVyL0FjY291bnQvMQ==');
  expect(seen).toHaveLength(2);
  expect(seen[0]).not.toBe(seen[1]);
  expect(refreshes()).toBe(n0 + 1);
});

test('a refresh answered with a success that carries no token does not expire the integration: the next use asks again', async () => {
  const { id } = await connectedJobber();
  await expireSoon(id);
  s.world.jobberAuth.server.service.once('beforeResponse', (response: { body: unknown; statusCode: number }, req: { body: Record<string, string> }) => {
    response.statusCode = 200;
    response.body = { token_type: 'Bearer' };
    // A provider that issued nothing rotated nothing: the refresh token stays good.
    s.world.jobberAuth.refresh.add(req.body.refresh_token);
  });
  await expect(keeper().usable(id)).rejects.toThrow(/without an access token/);
  expect((await s.api.owner.query('select status, last_error from app.integrations where id = $1', [id])).rows[0]).toEqual({ status: 'connected', last_error: null });
  const n0 = refreshes();
  expect((await keeper().usable(id)).secrets.access_token).toEqual(expect.any(String));
  expect(refreshes()).toBe(n0 + 1);
});

test('a refused refresh expires the integration with last_error and notifies the owner; calls then wait', async () => {
  const { loc, token, id } = await connectedJobber();
  await s.api.owner.query("select admin.member_invite($1, 'owner@acme.example', 'owner', 'Owner')", [loc.slug]);
  // The account is disconnected at Jobber: every refresh answers invalid_grant from now on.
  s.world.jobberAuth.revokeAll();
  {
    await expireSoon(id);
    await expect(keeper().usable(id)).rejects.toBeInstanceOf(IntegrationUnavailable);
    const { rows } = await s.api.owner.query('select status, last_error from app.integrations where id = $1', [id]);
    expect(rows[0].status).toBe('expired');
    expect(rows[0].last_error).toMatch(/refresh token is not valid/);
    const n = await s.api.owner.query("select channel, recipient, data from app.notifications where location_id = $1 and event = 'integration.expired'", [loc.id]);
    expect(n.rows.map((r) => r.channel)).toContain('email');
    expect(n.rows[0].data).toMatchObject({ provider: 'jobber', integration_id: id });
    expect(JSON.stringify(n.rows[0].data)).not.toMatch(/access_token|refresh_token|ciphertext/);
    // The API shows it expired with the reason.
    const list = await request(s.api.baseUrl, 'GET', `/api/v1/locations/${loc.id}/integrations`, { token });
    expect(list.body.data.find((i: any) => i.provider === 'jobber')).toMatchObject({ status: 'expired', last_error: expect.stringMatching(/refresh/) });
    // Further use waits for re-authorisation, without asking the provider again.
    const n0 = refreshes();
    await expect(keeper().usable(id)).rejects.toMatchObject({ status: 'expired' });
    expect(refreshes()).toBe(n0);
  }
});

test('ServiceTitan: the client-credentials token is cached until shortly before it expires, then minted again', async () => {
  const { loc, token } = await tenant(s.api);
  const put = await request(s.api.baseUrl, 'PUT', `/api/v1/locations/${loc.id}/integrations/servicetitan/credentials`, { token, body: { tenant_id: '77', client_id: 'st-client', client_secret: 'st-secret' } });
  expect(put.status).toBe(200);
  const id = put.body.data.id;
  const mints = () => s.world.stAuth.tokenRequests.filter((r) => r.grant_type === 'client_credentials').length;
  const n0 = mints();
  const first = await keeper().usable(id);
  expect(mints()).toBe(n0);
  await s.api.owner.query("update app.integrations set expires_at = now() + interval '30 seconds' where id = $1", [id]);
  const second = await keeper().usable(id);
  expect(mints()).toBe(n0 + 1);
  expect(second.secrets.access_token).not.toBe(first.secrets.access_token);
  expect(second.secrets.client_secret).toBe('st-secret');
});

/**
 * The sync log routes (docs/integrations.md "Sync log"): GET …/integrations/{provider}/syncs
 * (paginated, filter status) and POST …/syncs/{syncId}/retry; last_synced_at and last_error of the
 * integration follow the log. Tenancy and scopes through the endpoints.
 */
import { SyncRunner } from '../../src/integrations/sync.js';
import { mintKey, request, testLog } from '../support/harness.js';
import { setup, tenant, type Setup } from './support.js';

const V = '/api/v1';
let s: Setup;
beforeAll(async () => {
  s = await setup({ WEBHOOK_RETRY_DELAYS: '1' });
}, 60_000);
afterAll(async () => s?.close());

const runner = () => new SyncRunner({ cfg: s.api.cfg, log: testLog, pool: s.api.owner, ca: s.pki.caPem });

test('list, filter, paginate and retry the sync log; the integration follows it', async () => {
  const { loc, token } = await tenant(s.api);
  const other = await tenant(s.api);
  const put = await request(s.api.baseUrl, 'PUT', `${V}/locations/${loc.id}/integrations/servicetitan/credentials`, { token, body: { tenant_id: '99', client_id: 'st-client', client_secret: 'st-secret' } });
  expect(put.status).toBe(200);
  for (const phone of ['+15125550101', '+15125550102', '+15125550103']) {
    expect((await request(s.api.baseUrl, 'POST', `${V}/locations/${loc.id}/leads`, { token, body: { name: 'Pat Lee', phone } })).status).toBe(201);
  }
  const url = `${V}/locations/${loc.id}/integrations/servicetitan/syncs`;
  const all = await request(s.api.baseUrl, 'GET', url, { token });
  expect(all.status).toBe(200);
  expect(all.body.data).toHaveLength(3);
  expect(all.body.data.every((x: any) => x.status === 'pending' && x.record_type === 'lead' && x.action === 'create' && x.attempts === 0)).toBe(true);
  expect(JSON.stringify(all.body)).not.toMatch(/remote|lease|ciphertext/);

  // One goes through, one is refused by ServiceTitan.
  const [newest, middle] = all.body.data;
  expect(await runner().run(middle.id)).toBe('synced');
  s.world.st.fail('pass', 'invalid');
  expect(await runner().run(newest.id)).toBe('failed');

  const failed = await request(s.api.baseUrl, 'GET', `${url}?status=failed`, { token });
  expect(failed.body.data.map((x: any) => x.id)).toEqual([newest.id]);
  expect(failed.body.data[0]).toMatchObject({ attempts: 1, external_id: null, last_error: expect.stringMatching(/Name field is required/), next_attempt_at: null });
  const synced = await request(s.api.baseUrl, 'GET', `${url}?status=synced`, { token });
  expect(synced.body.data).toEqual([expect.objectContaining({ id: middle.id, external_id: expect.stringMatching(/^\d+$/), last_error: null })]);
  expect((await request(s.api.baseUrl, 'GET', `${url}?status=bogus`, { token })).status).toBe(400);

  const page1 = await request(s.api.baseUrl, 'GET', `${url}?limit=2`, { token });
  expect(page1.body.data).toHaveLength(2);
  const next = /<([^>]+)>; rel="next"/.exec(page1.headers.get('link') ?? '')![1];
  const page2 = await request(s.api.baseUrl, 'GET', next, { token });
  expect(page2.body.data.map((x: any) => x.id)).toEqual([all.body.data[2].id]);

  let integ = (await request(s.api.baseUrl, 'GET', `${V}/locations/${loc.id}/integrations`, { token })).body.data.find((i: any) => i.provider === 'servicetitan');
  expect(integ.last_synced_at).not.toBeNull();
  expect(integ.last_error).toMatch(/Name field is required/);

  // Tenancy and scopes.
  expect((await request(s.api.baseUrl, 'GET', url, { token: other.token })).status).toBe(404);
  const otherList = await request(s.api.baseUrl, 'GET', `${V}/locations/${other.loc.id}/integrations/servicetitan/syncs`, { token: other.token });
  expect(otherList.body.data).toEqual([]);
  expect((await request(s.api.baseUrl, 'POST', `${V}/locations/${other.loc.id}/integrations/servicetitan/syncs/${newest.id}/retry`, { token: other.token })).status).toBe(404);
  const readOnly = (await mintKey(s.api.owner, loc.id, ['integrations:read'])).token;
  expect((await request(s.api.baseUrl, 'GET', url, { token: readOnly })).status).toBe(200);
  const denied = await request(s.api.baseUrl, 'POST', `${url}/${newest.id}/retry`, { token: readOnly });
  expect(denied.status).toBe(403);

  // Retry: only a failed sync, which becomes pending with a fresh schedule and then goes through.
  expect((await request(s.api.baseUrl, 'POST', `${url}/${middle.id}/retry`, { token })).status).toBe(409);
  const retried = await request(s.api.baseUrl, 'POST', `${url}/${newest.id}/retry`, { token });
  expect(retried.status).toBe(202);
  expect(retried.body.data).toMatchObject({ id: newest.id, status: 'pending', attempts: 0 });
  const { rows } = await s.api.owner.query('select count(*)::int as n from graphile_worker.jobs where key = $1', [`integration_sync:${newest.id}`]);
  expect(rows[0].n).toBe(1);
  expect(await runner().run(newest.id)).toBe('synced');
  integ = (await request(s.api.baseUrl, 'GET', `${V}/locations/${loc.id}/integrations`, { token })).body.data.find((i: any) => i.provider === 'servicetitan');
  expect(integ.last_error).toBeNull();
  expect((await request(s.api.baseUrl, 'GET', `${url}?status=synced`, { token })).body.data).toHaveLength(2);
});

/**
 * Field-service sync errors are caller data (docs/privacy.md): a provider's refusal quotes the
 * record it was sent (ServiceTitan: "Phone '+1512…' for 'Name' at '3 Emu Street'…"), and it is kept
 * in the sync's last_error and copied into the connection's. Erasure of the caller and the
 * personal-data window clear both (the connection's only when it is that caller's message); the
 * staff viewer's refusal of the columns is test/privacy/classification.test.ts's.
 */
import { prunePrivacy } from '../../src/privacy/retention.js';
import { request } from '../support/harness.js';
import { setup, tenant, type Setup } from '../integrations/support.js';

const V = '/api/v1';
let s: Setup;
beforeAll(async () => {
  s = await setup();
}, 60_000);
afterAll(async () => s?.close());

interface Person { name: string; phone: string; address: string }
const refusal = (p: Person) => `servicetitan refused: One or more validation errors occurred. Phone '${p.phone}' for '${p.name}' at '${p.address}' is already used by another customer`;

/** A connected ServiceTitan location with one lead per person, each lead's sync refused quoting it; the connection keeps `last`'s. */
async function refusedSyncs(people: Person[], last: Person) {
  const { loc, token } = await tenant(s.api);
  const put = await request(s.api.baseUrl, 'PUT', `${V}/locations/${loc.id}/integrations/servicetitan/credentials`, { token, body: { tenant_id: '99', client_id: 'st-client', client_secret: 'st-secret' } });
  expect(put.status).toBe(200);
  for (const p of people) {
    const lead = await request(s.api.baseUrl, 'POST', `${V}/locations/${loc.id}/leads`, { token, body: p });
    expect(lead.status).toBe(201);
    // What a refused sync leaves (app.integration_sync_finish 'failed'): the message on the sync and on the connection.
    const { rowCount } = await s.api.owner.query(`update app.integration_syncs set status = 'failed', attempts = 1, last_error = $3 where location_id = $1 and record_id = $2`, [loc.id, lead.body.data.id, refusal(p)]);
    expect(rowCount).toBe(1);
  }
  await s.api.owner.query(`update app.integrations set last_error = $2 where location_id = $1 and provider = 'servicetitan'`, [loc.id, refusal(last)]);
  return { loc, token };
}

const served = async (locId: string, token: string) => JSON.stringify([
  (await request(s.api.baseUrl, 'GET', `${V}/locations/${locId}/integrations/servicetitan/syncs`, { token })).body,
  (await request(s.api.baseUrl, 'GET', `${V}/locations/${locId}/integrations`, { token })).body,
]);

const lucinda = { name: 'Lucinda Brouhaha', phone: '+15125550177', address: '3 Emu Street' };
const other = { name: 'Otto Keeps', phone: '+15125550178', address: '9 Stay Road' };

test('erasure clears the caller\'s sync errors and the connection\'s copy; another caller\'s stay', async () => {
  const { loc, token } = await refusedSyncs([other, lucinda], lucinda);
  expect(await served(loc.id, token)).toContain('Lucinda Brouhaha');
  const erased = await request(s.api.baseUrl, 'POST', `${V}/locations/${loc.id}/erasures`, { token, body: { phone: lucinda.phone } });
  expect(erased.status).toBe(202);
  // The record counts the sync errors it cleared, as it counts the other kinds (the connection's copy is one of them).
  expect(erased.body.data.matched).toMatchObject({ leads: 1, integration_syncs: 1 });
  const listed = await request(s.api.baseUrl, 'GET', `${V}/locations/${loc.id}/erasures`, { token });
  expect(listed.body.data[0].matched.integration_syncs).toBe(1);
  const after = await served(loc.id, token);
  expect(after).not.toMatch(/Lucinda|Brouhaha|5125550177|Emu Street/);
  expect(after).toContain(refusal(other));
  const { rows } = await s.api.owner.query(`select last_error from app.integrations where location_id = $1`, [loc.id]);
  expect(rows).toEqual([{ last_error: null }]);

  // The connection's message is another caller's: an erasure of this one leaves it.
  const two = await refusedSyncs([lucinda, other], other);
  const second = await request(s.api.baseUrl, 'POST', `${V}/locations/${two.loc.id}/erasures`, { token: two.token, body: { phone: lucinda.phone } });
  expect([second.status, second.body.data.matched.integration_syncs]).toEqual([202, 1]);
  // The same caller again: nothing left to clear.
  const again = await request(s.api.baseUrl, 'POST', `${V}/locations/${two.loc.id}/erasures`, { token: two.token, body: { phone: lucinda.phone } });
  expect([again.status, again.body.data.matched.integration_syncs]).toEqual([202, 0]);
  const kept = await s.api.owner.query(`select last_error from app.integrations where location_id = $1`, [two.loc.id]);
  expect(kept.rows).toEqual([{ last_error: refusal(other) }]);
  expect(await served(two.loc.id, two.token)).not.toMatch(/Lucinda|5125550177/);
});

test('the personal-data window clears sync errors older than it, and the connection\'s copy', async () => {
  const { loc, token } = await refusedSyncs([lucinda, other], lucinda);
  await s.api.owner.query(`update app.integration_syncs s set created_at = now() - interval '40 days' from app.leads l
                            where s.location_id = $1 and l.location_id = $1 and l.id = s.record_id and l.phone = $2`, [loc.id, lucinda.phone]);
  await s.api.owner.query('update app.privacy_settings set personal_data_retention_days = 30 where location_id = $1', [loc.id]);
  const r = await prunePrivacy({ pool: s.api.owner }, { kinds: ['personal_integration_syncs'] });
  expect(r.personal_integration_syncs).toBeGreaterThanOrEqual(1);
  const after = await served(loc.id, token);
  expect(after).not.toMatch(/Lucinda|Brouhaha|5125550177|Emu Street/);
  expect(after).toContain(refusal(other));
  expect((await prunePrivacy({ pool: s.api.owner }, { kinds: ['personal_integration_syncs'] })).personal_integration_syncs).toBe(0);
});

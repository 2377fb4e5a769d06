/**
 * A booking's update after its connection was disconnected and connected again
 * (docs/integrations.md "Disconnect", "Order"): a reconnection is a new integration record, and
 * the booking's create synced through the old one. The same account: the update uses the remote
 * ids the create recorded there. Another account: the booking's create is added through the new
 * connection, and the update waits for it.
 */
import { request } from '../support/harness.js';
import { connect, insertBooking, makeDue, setup, syncRows, syncRunner, tenant, type Setup } from './support.js';

const V = '/api/v1';
let s: Setup;
beforeAll(async () => {
  s = await setup({ WEBHOOK_RETRY_DELAYS: '1', WEBHOOK_TIMEOUT_MS: '1500' });
}, 60_000);
afterAll(async () => s?.close());

const runner = () => syncRunner(s);
const syncs = (locId: string) => syncRows(s, locId);
const stCredentials = (locId: string, token: string, tenantId: string) =>
  request(s.api.baseUrl, 'PUT', `${V}/locations/${locId}/integrations/servicetitan/credentials`, { token, body: { tenant_id: tenantId, client_id: 'st-client', client_secret: 'st-secret' } });

/** A location in New York with a lead and its booking (10:00 on 10 December), the booking's create synced. */
async function bookedAndSynced(provider: 'housecall_pro' | 'servicetitan', phone: string) {
  const t = await tenant(s.api);
  await s.api.owner.query('update app.locations set timezone = $2 where id = $1', [t.loc.id, 'America/New_York']);
  if (provider === 'servicetitan') expect((await stCredentials(t.loc.id, t.token, '4031')).status).toBe(200);
  else expect((await connect(s, t.loc.id, t.token, provider)).status).toBe(200);
  const l = await request(s.api.baseUrl, 'POST', `${V}/locations/${t.loc.id}/leads`, { token: t.token, body: { name: 'Pat Doe', notes: 'Leak', phone, address: '9 Elm St' } });
  for (const x of await syncs(t.loc.id)) expect(await runner().run(x.id)).toBe('synced');
  const bookingId = await insertBooking(s, t.loc.id, l.body.data.id);
  const pending = (await syncs(t.loc.id)).find((x) => x.record_type === 'booking')!;
  expect(await runner().run(pending.id)).toBe('synced');
  const create = (await syncs(t.loc.id)).find((x) => x.id === pending.id)!;
  return { ...t, bookingId, create };
}

/** Reschedules the booking to `time` and answers its update sync (pending, not run). */
async function reschedule(locId: string, token: string, bookingId: string, time: string) {
  const r = await request(s.api.baseUrl, 'PATCH', `${V}/locations/${locId}/bookings/${bookingId}`, { token, body: { scheduled_time: time } });
  expect(r.status).toBe(200);
  return (await syncs(locId)).filter((x) => x.action === 'update' && x.status === 'pending').at(-1)!;
}

/** Reschedules, then disconnects before the update ran: the update fails "integration disconnected". */
async function updateFailedByDisconnect(locId: string, token: string, provider: string, bookingId: string) {
  const update = await reschedule(locId, token, bookingId, '15:00');
  expect((await request(s.api.baseUrl, 'DELETE', `${V}/locations/${locId}/integrations/${provider}`, { token })).status).toBe(200);
  expect((await syncs(locId)).find((x) => x.id === update.id)).toMatchObject({ status: 'failed', last_error: 'integration disconnected' });
  return update;
}

const retry = (locId: string, token: string, provider: string, syncId: string) =>
  request(s.api.baseUrl, 'POST', `${V}/locations/${locId}/integrations/${provider}/syncs/${syncId}/retry`, { token });

test('the same account reconnected: a retried update and a later one write the new time to the job the old record\'s create made (Housecall Pro)', async () => {
  const { loc, token, bookingId, create } = await bookedAndSynced('housecall_pro', '+15125550741');
  const update = await updateFailedByDisconnect(loc.id, token, 'housecall_pro', bookingId);
  expect((await connect(s, loc.id, token, 'housecall_pro')).status).toBe(200);
  expect((await retry(loc.id, token, 'housecall_pro', update.id)).status).toBe(202);

  expect(await runner().run(update.id)).toBe('synced');
  const jobId = create.remote.job_id;
  const job = s.world.hcp.records.jobs.find((j) => j.id === jobId)!;
  // 15:00 in New York on 10 December.
  expect(job.schedule.start_time).toBe('2026-12-10T20:00:00.000Z');
  expect((await syncs(loc.id)).find((x) => x.id === update.id)).toMatchObject({ status: 'synced', external_id: jobId, integration_id: expect.not.stringMatching(create.integration_id) });

  // A booking.updated after the reconnection (its sync made for the new record) writes too.
  const later = await reschedule(loc.id, token, bookingId, '16:00');
  expect(later.integration_id).not.toBe(create.integration_id);
  expect(await runner().run(later.id)).toBe('synced');
  expect(job.schedule.start_time).toBe('2026-12-10T21:00:00.000Z');
  expect(s.world.hcp.records.jobs.filter((j) => j.customer_id === job.customer_id)).toHaveLength(1);
});

test('the same account reconnected, the old record\'s create failed: the update fails asking for the create\'s retry, which moves it', async () => {
  const t = await tenant(s.api);
  expect((await stCredentials(t.loc.id, t.token, '4032')).status).toBe(200);
  const l = await request(s.api.baseUrl, 'POST', `${V}/locations/${t.loc.id}/leads`, { token: t.token, body: { name: 'Pat Doe', notes: 'Leak', phone: '+15125550742' } });
  const bookingId = await insertBooking(s, t.loc.id, l.body.data.id);
  const update = await updateFailedByDisconnect(t.loc.id, t.token, 'servicetitan', bookingId);
  const create = (await syncs(t.loc.id)).find((x) => x.record_type === 'booking' && x.action === 'create')!;
  expect(create).toMatchObject({ status: 'failed', last_error: 'integration disconnected' });
  expect((await stCredentials(t.loc.id, t.token, '4032')).status).toBe(200);
  expect((await retry(t.loc.id, t.token, 'servicetitan', update.id)).status).toBe(202);

  expect(await runner().run(update.id)).toBe('failed');
  expect((await syncs(t.loc.id)).find((x) => x.id === update.id)!.last_error).toMatch(/create sync failed \(integration disconnected\): retry it, then this update/);
  expect((await retry(t.loc.id, t.token, 'servicetitan', create.id)).status).toBe(202);
  expect(await runner().run(create.id)).toBe('synced');
  expect((await retry(t.loc.id, t.token, 'servicetitan', update.id)).status).toBe(202);
  expect(await runner().run(update.id)).toBe('synced');
  expect(s.world.st.records.bookings.filter((b) => b.externalId === bookingId)).toHaveLength(1);
});

test('another account connected: the retried update adds the booking\'s create through the new connection, waits for it, then writes', async () => {
  const { loc, token, bookingId, create } = await bookedAndSynced('servicetitan', '+15125550743');
  const update = await updateFailedByDisconnect(loc.id, token, 'servicetitan', bookingId);
  expect((await stCredentials(loc.id, token, '4033')).status).toBe(200);
  expect((await retry(loc.id, token, 'servicetitan', update.id)).status).toBe(202);

  expect(await runner().run(update.id)).toBe('defer');
  const added = (await syncs(loc.id)).filter((x) => x.record_id === bookingId && x.action === 'create' && x.id !== create.id);
  expect(added).toHaveLength(1);
  expect(added[0]).toMatchObject({ status: 'pending', integration_id: expect.not.stringMatching(create.integration_id) });
  expect((await syncs(loc.id)).find((x) => x.id === update.id)).toMatchObject({ status: 'pending', attempts: 0, last_error: expect.stringMatching(/Waiting for the booking's create sync/) });
  const { rows } = await s.api.owner.query('select count(*)::int as n from graphile_worker.jobs where key = $1', [`integration_sync:${added[0].id}`]);
  expect(rows).toEqual([{ n: 1 }]);

  expect(await runner().run(added[0].id)).toBe('synced');
  await makeDue(s, update.id);
  expect(await runner().run(update.id)).toBe('synced');
  const inNew = s.world.st.records.bookings.filter((b) => b.externalId === bookingId && b.tenant === '4033');
  expect(inNew).toHaveLength(1);
  expect(inNew[0].start).toBe('2026-12-10T20:00:00.000Z');
  // The old account's booking is left as it was (no longer ours to write).
  expect(s.world.st.records.bookings.filter((b) => b.externalId === bookingId && b.tenant === '4031').map((b) => b.start)).toEqual(['2026-12-10T15:00:00.000Z']);
  // The old record's create stays synced; a retry of it has nothing to do.
  expect((await retry(loc.id, token, 'servicetitan', create.id)).status).toBe(409);
});

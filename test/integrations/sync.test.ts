/**
 * Write-back (docs/integrations.md "What is written where", "Sync log"): lead.created,
 * booking.created and booking.updated become syncs written into Jobber, Housecall Pro and
 * ServiceTitan stand-ins; 401 mid-sync, 429 and throttling, a validation refusal, a provider down
 * then back, a crash between the remote create and our record, an expired connection, isolation.
 */
import { callFn } from '../../src/db/pools.js';
import { stWrite } from '../../src/integrations/servicetitan.js';
import { netOptions } from '../../src/integrations/service.js';
import { toSyncRecord } from '../../src/integrations/records.js';
import { request } from '../support/harness.js';
import { startTestWorker, waitFor } from '../webhooks/support.js';
import { connect, connectedTenant, insertBooking, makeDue, setup, syncRows, syncRunner, type Setup } from './support.js';

const V = '/api/v1';
let s: Setup;
beforeAll(async () => {
  s = await setup({ WEBHOOK_RETRY_DELAYS: '1,1,1,1,1', WEBHOOK_TIMEOUT_MS: '1500' });
}, 60_000);
afterAll(async () => s?.close());

const runner = () => syncRunner(s);
const syncs = (locId: string) => syncRows(s, locId);
const due = (id: string) => makeDue(s, id);
const integrationRow = async (locId: string, provider: string) =>
  (await s.api.owner.query('select * from app.integrations where location_id = $1 and provider = $2 order by created_at desc limit 1', [locId, provider])).rows[0];

const withProvider = (provider: 'jobber' | 'housecall_pro' | 'servicetitan') => connectedTenant(s, provider);

const booking = (locId: string, leadId: string) => insertBooking(s, locId, leadId);

const lead = (locId: string, token: string, body: Record<string, unknown> = {}) =>
  request(s.api.baseUrl, 'POST', `${V}/locations/${locId}/leads`, {
    token, body: { name: 'Dana Miller', phone: '+15125550142', email: 'dana@example.com', urgency_level: 4, notes: 'No heat upstairs', ...body },
  });

test('the worker writes a new lead into Jobber: client created once (found by phone the second time), one request per lead', async () => {
  const { loc, token } = await withProvider('jobber');
  const w = await startTestWorker(s.api.cfg, s.api.db.url, s.pki);
  try {
    const l1 = await lead(loc.id, token, { service_type: 'Furnace repair' });
    expect(l1.status).toBe(201);
    const first = await waitFor(async () => (await syncs(loc.id)).find((x) => x.status === 'synced'), 'first lead synced');
    expect(first).toMatchObject({ record_type: 'lead', record_id: l1.body.data.id, action: 'create', attempts: 1, provider: 'jobber' });
    const l2 = await lead(loc.id, token, { notes: 'Water heater leaking' });
    expect(l2.status).toBe(201);
    await waitFor(async () => (await syncs(loc.id)).filter((x) => x.status === 'synced').length === 2, 'second lead synced');
    expect((await syncs(loc.id)).map((x) => x.record_id)).toEqual(expect.arrayContaining([l1.body.data.id, l2.body.data.id]));
  } finally {
    await w.stop();
  }
  const clients = s.world.jobber.records.clients.filter((c) => c.phones?.[0]?.number === '+15125550142');
  expect(clients).toHaveLength(1);
  expect(clients[0]).toMatchObject({ firstName: 'Dana', lastName: 'Miller', emails: [{ address: 'dana@example.com', primary: true }] });
  const rows = await syncs(loc.id);
  const requests = s.world.jobber.records.requests.filter((r) => r.clientId === clients[0].id);
  expect(requests.map((r) => r.id).sort()).toEqual(rows.map((r) => r.external_id).sort());
  expect(requests.find((r) => r.id === rows[0].external_id).title).toMatch(/^Furnace repair — No heat upstairs \[ref [0-9a-f]{8}\]$/);
  expect(rows[0].remote).toEqual({ client_id: clients[0].id });
  const i = await integrationRow(loc.id, 'jobber');
  expect(i.last_synced_at).not.toBeNull();
  expect(i.last_error).toBeNull();
});

test('Housecall Pro: lead → customer + lead; booking → job with the window; reschedule → job schedule; a 401 mid-sync refreshes once', async () => {
  const { loc, token } = await withProvider('housecall_pro');
  const l = await lead(loc.id, token, { address: '12 Elm St, Austin TX 78701' });
  const [leadSync] = await syncs(loc.id);
  s.world.hcp.fail('pass', '401');
  const refreshes = s.world.hcpAuth.tokenRequests.filter((r) => r.grant_type === 'refresh_token').length;
  expect(await runner().run(leadSync.id)).toBe('synced');
  expect(s.world.hcpAuth.tokenRequests.filter((r) => r.grant_type === 'refresh_token').length).toBe(refreshes + 1);
  const customer = s.world.hcp.records.customers.find((c) => c.mobile_number === '+15125550142' && c.addresses?.[0]?.street === '12 Elm St, Austin TX 78701')!;
  expect(customer).toMatchObject({ first_name: 'Dana', last_name: 'Miller', email: 'dana@example.com', lead_source: 'Switchboard' });
  const hcpLead = s.world.hcp.records.leads.find((x) => x.customer_id === customer.id)!;
  expect(hcpLead.address_id).toBe(customer.addresses[0].id);
  expect((await syncs(loc.id))[0]).toMatchObject({ status: 'synced', external_id: hcpLead.id });

  await s.api.owner.query('update app.locations set timezone = $2 where id = $1', [loc.id, 'America/Chicago']);
  const { rows: [b] } = await s.api.owner.query(
    `insert into app.bookings (location_id, lead_id, scheduled_date, scheduled_time, service_type, status)
     values ($1, $2, '2026-12-01', '09:00', 'Furnace repair', 'scheduled') returning id`, [loc.id, l.body.data.id]);
  const bookingSync = (await syncs(loc.id)).find((x) => x.record_type === 'booking')!;
  expect(await runner().run(bookingSync.id)).toBe('synced');
  const jobId = (await syncs(loc.id)).find((x) => x.id === bookingSync.id)!.external_id;
  const job = s.world.hcp.records.jobs.find((j) => j.id === jobId)!;
  // 09:00 in Chicago on 1 December is 15:00 UTC; a two-hour window.
  expect(job.schedule).toEqual({ scheduled_start: '2026-12-01T15:00:00.000Z', scheduled_end: '2026-12-01T17:00:00.000Z', arrival_window: 0 });
  expect(job.customer_id).toBe(customer.id);
  expect(s.world.hcp.records.customers.filter((c) => c.mobile_number === '+15125550142' && c.id === customer.id)).toHaveLength(1);

  const patched = await request(s.api.baseUrl, 'PATCH', `${V}/locations/${loc.id}/bookings/${b.id}`, { token, body: { scheduled_time: '13:30' } });
  expect(patched.status).toBe(200);
  const update = (await syncs(loc.id)).find((x) => x.action === 'update')!;
  expect(await runner().run(update.id)).toBe('synced');
  expect(job.schedule).toMatchObject({ start_time: '2026-12-01T19:30:00.000Z', end_time: '2026-12-01T21:30:00.000Z' });
});

test('ServiceTitan: a booking with externalId, contacts, start and priority; a validation refusal fails without retrying', async () => {
  const { loc, token } = await withProvider('servicetitan');
  await lead(loc.id, token);
  const [sync] = await syncs(loc.id);
  expect(await runner().run(sync.id)).toBe('synced');
  const booking = s.world.st.records.bookings.find((x) => x.externalId === sync.record_id)!;
  expect(booking).toMatchObject({
    tenant: '4021', source: 'Switchboard', name: 'Dana Miller', priority: 'High', isFirstTimeClient: false,
    contacts: [{ type: 'Phone', value: '+15125550142' }, { type: 'Email', value: 'dana@example.com' }],
  });
  const st = s.world.st.requests.filter((r) => r.method === 'POST').at(-1)!;
  expect(st.path).toBe('/crm/v2/tenant/4021/booking-provider/switchboard/bookings');
  expect(st.headers['st-app-key']).toBe('st-app-key');

  await lead(loc.id, token, { phone: '+15125550143' });
  const refused = (await syncs(loc.id)).find((x) => x.status === 'pending')!;
  s.world.st.fail('pass', 'invalid');
  expect(await runner().run(refused.id)).toBe('failed');
  const row = (await syncs(loc.id)).find((x) => x.id === refused.id)!;
  expect(row).toMatchObject({ status: 'failed', attempts: 1 });
  expect(row.last_error).toMatch(/validation errors.*Name field is required/);
  expect((await integrationRow(loc.id, 'servicetitan')).last_error).toBe(row.last_error);
  await due(refused.id);
  expect(await runner().run(refused.id)).toBe('skipped');
});

test('429 honours Retry-After, Jobber THROTTLED waits for the bucket, then both go through', async () => {
  const h = await withProvider('housecall_pro');
  await lead(h.loc.id, h.token, { phone: '+15125550150' });
  const [hs] = await syncs(h.loc.id);
  s.world.hcp.fail('429-long');
  expect(await runner().run(hs.id)).toBe('retry');
  const after = (await syncs(h.loc.id))[0];
  expect(after).toMatchObject({ status: 'pending', attempts: 1 });
  expect(after.last_error).toMatch(/Too many requests/);
  expect(after.next_attempt_at.getTime() - after.updated_at.getTime()).toBeGreaterThanOrEqual(599_000);
  expect(await runner().run(hs.id)).toBe('skipped');
  await due(hs.id);
  expect(await runner().run(hs.id)).toBe('synced');
  expect((await syncs(h.loc.id))[0]).toMatchObject({ status: 'synced', attempts: 2, last_error: null });
  expect((await integrationRow(h.loc.id, 'housecall_pro')).last_error).toBeNull();

  const j = await withProvider('jobber');
  await lead(j.loc.id, j.token, { phone: '+15125550151' });
  const [js] = await syncs(j.loc.id);
  s.world.jobber.fail('throttled');
  expect(await runner().run(js.id)).toBe('retry');
  expect((await syncs(j.loc.id))[0].last_error).toMatch(/throttled/);
  await due(js.id);
  expect(await runner().run(js.id)).toBe('synced');
});

test('a provider down (time-outs) then back: retried on the schedule, written once', async () => {
  const { loc, token } = await withProvider('housecall_pro');
  await lead(loc.id, token, { phone: '+15125550160' });
  const [sync] = await syncs(loc.id);
  s.world.hcp.down = true;
  try {
    expect(await runner().run(sync.id)).toBe('retry');
    await due(sync.id);
    expect(await runner().run(sync.id)).toBe('retry');
  } finally {
    s.world.hcp.down = false;
  }
  expect((await syncs(loc.id))[0].last_error).toMatch(/No complete response/);
  await due(sync.id);
  expect(await runner().run(sync.id)).toBe('synced');
  expect((await syncs(loc.id))[0]).toMatchObject({ status: 'synced', attempts: 3 });
  expect(s.world.hcp.records.customers.filter((c) => c.mobile_number === '+15125550160')).toHaveLength(1);
});

test('a worker crash between the remote create and our record: the retry finds the remote record (ServiceTitan externalId, Jobber and Housecall Pro references)', async () => {
  for (const provider of ['servicetitan', 'jobber', 'housecall_pro'] as const) {
    const { loc, token } = await withProvider(provider);
    await lead(loc.id, token, { phone: '+15125550170' });
    const [sync] = await syncs(loc.id);
    // The crashed worker: it claimed the sync and created the remote record, then died.
    const claimed = await callFn<any>(s.api.owner, 'app.integration_sync_claim', [sync.id, 60]);
    const keeper = (runner() as any).keeper;
    await keeper.withToken(claimed.integration_id, async (c: any) => {
      const ctx = {
        net: netOptions(s.api.cfg, s.pki.caPem), cfg: s.api.cfg, accessToken: c.secrets.access_token, externalId: c.external_id,
        action: 'create', attempts: 1, remote: {}, createRemote: null, rec: toSyncRecord('lead', claimed.record, claimed.timezone),
        progress: async (ids: Record<string, string>) => callFn(s.api.owner, 'app.integration_sync_progress', [sync.id, ids]),
      };
      const { jobberWrite } = await import('../../src/integrations/jobber.js');
      const { hcpWrite } = await import('../../src/integrations/housecall-pro.js');
      return ({ servicetitan: stWrite, jobber: jobberWrite, housecall_pro: hcpWrite })[provider](ctx as any);
    });
    const remoteCount = () => provider === 'servicetitan' ? s.world.st.records.bookings.filter((b) => b.externalId === sync.record_id).length
      : provider === 'jobber' ? s.world.jobber.records.requests.filter((r) => r.title.includes(sync.record_id.slice(0, 8))).length
      : s.world.hcp.records.leads.filter((r) => r.note.includes(sync.record_id.slice(0, 8))).length;
    expect(remoteCount()).toBe(1);
    // Its lease lapses; the sweep queues the sync again; the next attempt finds the record.
    // Its job stays locked by the dead worker (graphile-worker would free it only after four hours).
    await s.api.owner.query("update graphile_worker._private_jobs set locked_at = now(), locked_by = 'crashed-worker' where key = $1", [`integration_sync:${sync.id}`]);
    await s.api.owner.query("update app.integration_syncs set lease_until = now() - interval '1 second', next_attempt_at = now() - interval '1 minute' where id = $1", [sync.id]);
    expect(await callFn<number>(s.api.owner, 'app.integration_sync_sweep', [100])).toBeGreaterThanOrEqual(1);
    const jobs = await s.api.owner.query('select locked_at from graphile_worker.jobs where key = $1', [`integration_sync:${sync.id}`]);
    expect(jobs.rows).toEqual([{ locked_at: null }]);
    expect(await runner().run(sync.id)).toBe('synced');
    expect(remoteCount()).toBe(1);
    expect((await syncs(loc.id))[0]).toMatchObject({ status: 'synced', attempts: 2 });
  }
});

test('an expired connection: syncs wait (pending, attempt not counted) and go through after re-authorisation', async () => {
  const { loc, token } = await withProvider('housecall_pro');
  await s.api.owner.query("update app.integrations set status = 'expired', last_error = 'Token refresh refused' where location_id = $1", [loc.id]);
  await lead(loc.id, token, { phone: '+15125550180' });
  const [sync] = await syncs(loc.id);
  expect(sync).toMatchObject({ status: 'pending', attempts: 0 });
  expect(await runner().run(sync.id)).toBe('skipped');
  expect((await connect(s, loc.id, token, 'housecall_pro')).status).toBe(200);
  expect((await integrationRow(loc.id, 'housecall_pro')).id).toBe(sync.integration_id);
  await due(sync.id);
  await s.api.owner.query("update app.integration_syncs set next_attempt_at = now() - interval '1 minute' where id = $1", [sync.id]);
  expect(await callFn<number>(s.api.owner, 'app.integration_sync_sweep', [100])).toBeGreaterThanOrEqual(1);
  expect(await runner().run(sync.id)).toBe('synced');
});

test('isolation: a black-holed provider holds one call per connection; another location syncs meanwhile', async () => {
  const slow = await withProvider('housecall_pro');
  const fast = await withProvider('servicetitan');
  for (const phone of ['+15125550190', '+15125550191', '+15125550193']) await lead(slow.loc.id, slow.token, { phone });
  await lead(fast.loc.id, fast.token, { phone: '+15125550192' });
  const [a1, a2, a3] = await syncs(slow.loc.id);
  const [b1] = await syncs(fast.loc.id);
  s.world.hcp.down = true;
  const order: string[] = [];
  const r = runner();
  try {
    const p1 = r.run(a1.id, a1.integration_id).then((o) => order.push(`slow1:${o}`));
    const p2 = r.run(a2.id, a2.integration_id).then((o) => order.push(`slow2:${o}`));
    await new Promise((ok) => setTimeout(ok, 200));
    const p3 = r.run(a3.id, a3.integration_id).then((o) => order.push(`slow3:${o}`));
    const p4 = r.run(b1.id, b1.integration_id).then((o) => order.push(`fast:${o}`));
    await Promise.all([p1, p2, p3, p4]);
  } finally {
    s.world.hcp.down = false;
  }
  // One of the two started together holds the connection (the database's claim decides which:
  // neither is in this process's in-flight set yet); the other, and the third, stepped aside
  // (queued again, not an attempt).
  const holder = order.includes('slow1:retry') ? 1 : 2;
  expect(order).toEqual(expect.arrayContaining([`slow${holder}:retry`, `slow${3 - holder}:busy`, 'slow3:busy']));
  for (const a of [holder === 1 ? a2 : a1, a3]) {
    expect((await syncs(slow.loc.id)).find((x) => x.id === a.id)).toMatchObject({ status: 'pending', attempts: 0 });
    const { rows } = await s.api.owner.query('select count(*)::int as n from graphile_worker.jobs where key = $1', [`integration_sync:${a.id}`]);
    expect(rows).toEqual([{ n: 1 }]);
  }
  // The other location's sync finished while the black-holed one was still waiting.
  expect(order.indexOf('fast:synced')).toBeLessThan(order.indexOf(`slow${holder}:retry`));
});

test('Housecall Pro in its documented shapes: a job at one of the customer\'s addresses, and a lost answer found again by the reference tag', async () => {
  const { loc, token } = await withProvider('housecall_pro');
  const hcp = s.world.hcp;
  // A customer the contractor already has, with no address on file.
  (hcp.records.customers ??= []).push({ id: 'cus_known', first_name: 'Lee', mobile_number: '+15125550600', addresses: [] });
  const l = await lead(loc.id, token, { phone: '+15125550600', address: '7 Birch Rd' });
  const ref = `[ref ${l.body.data.id.slice(0, 8)}]`;
  const [leadSync] = await syncs(loc.id);
  // The lead is created, its answer lost; Housecall Pro answers leads without their note.
  hcp.hold = (q) => {
    if (q.method !== 'POST' || q.path !== '/leads') return false;
    (hcp.records.leads ??= []).push({ id: 'lea_lost', number: 77, status: 'open', ...q.body });
    hcp.hold = undefined;
    return true;
  };
  expect(await runner().run(leadSync.id)).toBe('retry');
  await due(leadSync.id);
  expect(await runner().run(leadSync.id)).toBe('synced');
  expect(hcp.records.leads.filter((x) => x.customer_id === 'cus_known').map((x) => x.id)).toEqual(['lea_lost']);
  expect(hcp.records.leads.find((x) => x.id === 'lea_lost').tags).toEqual([ref]);
  const address = hcp.records.customers.find((c) => c.id === 'cus_known').addresses;
  expect(address).toEqual([expect.objectContaining({ street: '7 Birch Rd' })]);

  const bookingRef = `[ref ${(await booking(loc.id, l.body.data.id)).slice(0, 8)}]`;
  const jobSync = (await syncs(loc.id)).find((x) => x.record_type === 'booking')!;
  hcp.hold = (q) => {
    if (q.method !== 'POST' || q.path !== '/jobs') return false;
    (hcp.records.jobs ??= []).push({ id: 'job_lost', ...q.body });
    hcp.hold = undefined;
    return true;
  };
  expect(await runner().run(jobSync.id)).toBe('retry');
  const posted = hcp.requests.filter((q) => q.method === 'POST' && q.path === '/jobs').at(-1)!.body;
  expect(posted).toMatchObject({ customer_id: 'cus_known', address_id: address[0].id, tags: [bookingRef], notes: expect.stringContaining(bookingRef) });
  expect(posted).not.toHaveProperty('description');
  await due(jobSync.id);
  expect(await runner().run(jobSync.id)).toBe('synced');
  expect(hcp.records.jobs.filter((x) => x.customer_id === 'cus_known').map((x) => x.id)).toEqual(['job_lost']);
  expect((await syncs(loc.id)).find((x) => x.id === jobSync.id)).toMatchObject({ external_id: 'job_lost', remote: expect.objectContaining({ job_id: 'job_lost' }) });

  // No address anywhere: refused with a message, not sent without address_id.
  const bare = await lead(loc.id, token, { phone: '+15125550601' });
  await booking(loc.id, bare.body.data.id);
  const bareSync = (await syncs(loc.id)).find((x) => x.record_type === 'booking' && x.record_id !== jobSync.record_id)!;
  expect(await runner().run(bareSync.id)).toBe('failed');
  expect((await syncs(loc.id)).find((x) => x.id === bareSync.id)!.last_error).toMatch(/only at an address of the customer/);
}, 30_000);

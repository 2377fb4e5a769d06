/**
 * What may run when (docs/integrations.md "Exactly once", "Isolation", "Sync log"): one sync in
 * flight per connection, a manual retry that looks before it creates, an update that waits for
 * its create, syncs failed by a disconnect and retried after reconnecting, an erased caller never
 * written.
 */
import { callFn } from '../../src/db/pools.js';
import type { ApiRequest } from '../support/field-service.js';
import { request } from '../support/harness.js';
import { connect, connectedTenant, insertBooking, makeDue, setup, syncRows, syncRunner, type Setup } from './support.js';

const V = '/api/v1';
let s: Setup;
beforeAll(async () => {
  s = await setup({ WEBHOOK_RETRY_DELAYS: '1', WEBHOOK_TIMEOUT_MS: '1500' });
}, 60_000);
afterAll(async () => s?.close());

const runner = () => syncRunner(s);
const syncs = (locId: string) => syncRows(s, locId);
const due = (id: string) => makeDue(s, id);

const withProvider = (provider: 'jobber' | 'housecall_pro' | 'servicetitan') => connectedTenant(s, provider);

const lead = (locId: string, token: string, body: Record<string, unknown>) =>
  request(s.api.baseUrl, 'POST', `${V}/locations/${locId}/leads`, { token, body: { name: 'Pat Doe', notes: 'Leak under the sink', ...body } });

const booking = (locId: string, leadId: string) => insertBooking(s, locId, leadId);

test('one sync in flight per connection: a lead and a booking of one caller at once make one client; a second claim of the connection answers busy', async () => {
  const { loc, token } = await withProvider('jobber');
  const l = await lead(loc.id, token, { phone: '+15125550701' });
  await booking(loc.id, l.body.data.id);
  const [a, b] = await syncs(loc.id);
  const outcomes = await Promise.all([runner().run(a.id), runner().run(b.id)]);
  // Overlapping, the second claim answers busy; on a loaded machine the first sync may have ended
  // before the second claimed, and both sync one after the other. One client either way (the
  // claim's refusal itself is checked deterministically below).
  expect([['busy', 'synced'], ['synced', 'synced']]).toContainEqual(outcomes.sort());
  const waiting = (await syncs(loc.id)).find((x) => x.status === 'pending');
  if (waiting) {
    expect(waiting.attempts).toBe(0);
    await due(waiting.id);
    expect(await runner().run(waiting.id)).toBe('synced');
  }
  expect((await syncs(loc.id)).map((x) => x.status)).toEqual(['synced', 'synced']);
  expect(s.world.jobber.records.clients.filter((c) => c.phones?.[0]?.number === '+15125550701')).toHaveLength(1);

  // Across processes: the claim itself refuses a second sync of a connection with one leased.
  const l2 = await lead(loc.id, token, { phone: '+15125550702' });
  const l3 = await lead(loc.id, token, { phone: '+15125550703' });
  const [c, d] = (await syncs(loc.id)).filter((x) => [l2.body.data.id, l3.body.data.id].includes(x.record_id));
  expect(await callFn<any>(s.api.owner, 'app.integration_sync_claim', [c.id, 60])).toMatchObject({ id: c.id, attempts: 1 });
  expect(await callFn<any>(s.api.owner, 'app.integration_sync_claim', [d.id, 60])).toEqual({ busy: true, id: d.id, integration_id: d.integration_id });
  expect((await syncs(loc.id)).find((x) => x.id === d.id)).toMatchObject({ attempts: 0, lease_until: null });
  await callFn(s.api.owner, 'app.integration_sync_finish', [c.id, 'retry', null, 'test', 0]);
  expect(await callFn<any>(s.api.owner, 'app.integration_sync_claim', [d.id, 60])).toMatchObject({ id: d.id, attempts: 1 });
});

/** The provider creates the record but its answer never arrives (the request times out). */
function loseAnswer(pick: (r: ApiRequest) => boolean, store: (r: ApiRequest) => void) {
  let done = false;
  return (r: ApiRequest) => {
    if (done || !pick(r)) return false;
    done = true;
    store(r);
    return true;
  };
}

test('a manual retry after a lost answer looks before it creates (Jobber, Housecall Pro)', async () => {
  for (const provider of ['jobber', 'housecall_pro'] as const) {
    const { loc, token } = await withProvider(provider);
    const l = await lead(loc.id, token, { phone: provider === 'jobber' ? '+15125550711' : '+15125550712', address: '4 Oak St' });
    const [sync] = await syncs(loc.id);
    const w = provider === 'jobber' ? s.world.jobber : s.world.hcp;
    w.hold = provider === 'jobber'
      ? loseAnswer((r) => /requestCreate/.test(String(r.body?.query)), (r) => (w.records.requests ??= []).push({ id: 'request-lost', ...r.body.variables.input }))
      : loseAnswer((r) => r.method === 'POST' && r.path === '/leads', (r) => (w.records.leads ??= []).push({ id: 'lea_lost', number: 99, status: 'open', ...r.body }));
    expect(await runner().run(sync.id)).toBe('retry');
    w.hold = undefined;
    await due(sync.id);
    w.fail('500');
    expect(await runner().run(sync.id)).toBe('failed');
    const retried = await request(s.api.baseUrl, 'POST', `${V}/locations/${loc.id}/integrations/${provider}/syncs/${sync.id}/retry`, { token });
    expect(retried.status).toBe(202);
    expect(retried.body.data).toMatchObject({ status: 'pending', attempts: 0 });
    expect(await runner().run(sync.id)).toBe('synced');
    const ref = `[ref ${l.body.data.id.slice(0, 8)}]`;
    const made = provider === 'jobber' ? w.records.requests.filter((x) => x.title.includes(ref)) : w.records.leads.filter((x) => x.note.includes(ref));
    expect(made.map((x) => x.id)).toEqual([provider === 'jobber' ? 'request-lost' : 'lea_lost']);
    expect((await syncs(loc.id))[0]).toMatchObject({ status: 'synced', attempts: 1, attempts_before_retry: 2 });
  }
});

test('a booking.updated waits (pending, attempt not counted) until its create has synced; a failed create fails it, saying so', async () => {
  const { loc, token } = await withProvider('servicetitan');
  await s.api.owner.query('update app.locations set timezone = $2 where id = $1', [loc.id, 'America/New_York']);
  const l = await lead(loc.id, token, { phone: '+15125550721' });
  const bookingId = await booking(loc.id, l.body.data.id);
  const create = (await syncs(loc.id)).find((x) => x.record_type === 'booking')!;
  s.world.st.fail('500');
  expect(await runner().run(create.id)).toBe('retry');
  expect((await request(s.api.baseUrl, 'PATCH', `${V}/locations/${loc.id}/bookings/${bookingId}`, { token, body: { scheduled_time: '15:00' } })).status).toBe(200);
  const update = (await syncs(loc.id)).find((x) => x.action === 'update')!;
  expect(await runner().run(update.id)).toBe('defer');
  const waiting = (await syncs(loc.id)).find((x) => x.id === update.id)!;
  expect(waiting).toMatchObject({ status: 'pending', attempts: 0, last_error: expect.stringMatching(/create sync/) });
  expect(waiting.next_attempt_at.getTime()).toBeGreaterThan(Date.now() + 3000);
  const { rows } = await s.api.owner.query('select count(*)::int as n from graphile_worker.jobs where key = $1', [`integration_sync:${update.id}`]);
  expect(rows).toEqual([{ n: 1 }]);
  await due(create.id);
  expect(await runner().run(create.id)).toBe('synced');
  await due(update.id);
  expect(await runner().run(update.id)).toBe('synced');
  const remote = s.world.st.records.bookings.filter((x) => x.externalId === bookingId);
  expect(remote).toHaveLength(1);
  // 15:00 in New York on 10 December, written by the update's PATCH.
  expect(s.world.st.requests.filter((r) => r.method === 'PATCH' && r.path.endsWith(`/bookings/${remote[0].id}`)).map((r) => r.body.start)).toEqual(['2026-12-10T20:00:00.000Z']);
  expect(remote[0].start).toBe('2026-12-10T20:00:00.000Z');

  // A create refused by the provider: the update fails and names it.
  const h = await withProvider('housecall_pro');
  const hl = await lead(h.loc.id, h.token, { phone: '+15125550722', address: '9 Elm St' });
  const hb = await booking(h.loc.id, hl.body.data.id);
  const hcreate = (await syncs(h.loc.id)).find((x) => x.record_type === 'booking')!;
  s.world.hcp.fail('pass', 'invalid');
  expect(await runner().run(hcreate.id)).toBe('failed');
  await request(s.api.baseUrl, 'PATCH', `${V}/locations/${h.loc.id}/bookings/${hb}`, { token: h.token, body: { scheduled_time: '15:00' } });
  const hupdate = (await syncs(h.loc.id)).find((x) => x.action === 'update')!;
  expect(await runner().run(hupdate.id)).toBe('failed');
  expect((await syncs(h.loc.id)).find((x) => x.id === hupdate.id)!.last_error).toMatch(/create sync failed \(housecall_pro refused: .*address.*\): retry it, then this update/);
});

test('DELETE fails the connection\'s pending syncs ("integration disconnected"); they can be retried after reconnecting', async () => {
  const { loc, token } = await withProvider('jobber');
  await lead(loc.id, token, { phone: '+15125550731' });
  const [sync] = await syncs(loc.id);
  expect((await request(s.api.baseUrl, 'DELETE', `${V}/locations/${loc.id}/integrations/jobber`, { token })).status).toBe(200);
  expect((await syncs(loc.id))[0]).toMatchObject({ status: 'failed', last_error: 'integration disconnected', lease_until: null });
  const url = `${V}/locations/${loc.id}/integrations/jobber/syncs/${sync.id}/retry`;
  const early = await request(s.api.baseUrl, 'POST', url, { token });
  expect(early.status).toBe(409);
  expect(early.body.error.message).toMatch(/connect it again/);
  expect((await connect(s, loc.id, token, 'jobber')).status).toBe(200);
  expect((await request(s.api.baseUrl, 'POST', url, { token })).status).toBe(202);
  const moved = (await syncs(loc.id))[0];
  expect(moved.integration_id).not.toBe(sync.integration_id);
  expect(await runner().run(sync.id)).toBe('synced');
  expect(s.world.jobber.records.clients.filter((c) => c.phones?.[0]?.number === '+15125550731')).toHaveLength(1);
});

test('a caller erased while their sync waits: the sync fails without calling the provider', async () => {
  for (const provider of ['jobber', 'servicetitan'] as const) {
    const { loc, token } = await withProvider(provider);
    const w = provider === 'jobber' ? s.world.jobber : s.world.st;
    await lead(loc.id, token, { name: 'Erin Erased', phone: '+15125550911', email: 'erin@example.com' });
    const [sync] = await syncs(loc.id);
    w.fail('500');
    expect(await runner().run(sync.id)).toBe('retry');
    expect((await request(s.api.baseUrl, 'POST', `${V}/locations/${loc.id}/erasures`, { token, body: { phone: '+15125550911' } })).status).toBe(202);
    await due(sync.id);
    const before = w.requests.length;
    expect(await runner().run(sync.id)).toBe('failed');
    expect(w.requests.length).toBe(before);
    expect((await syncs(loc.id))[0]).toMatchObject({ status: 'failed', last_error: expect.stringMatching(/erased before it was written/) });
  }
});

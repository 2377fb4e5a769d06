/**
 * The claim after a history (docs/performance.md, "The drain after a history"): a paused
 * endpoint's held attempts and a capped endpoint's backlog at the head of the due order are passed
 * over inside the claim's first step, so the claim finds the other endpoints' attempts without the
 * skip scan over every endpoint with work (counted by the scans of
 * webhook_deliveries_ready_endpoint_idx); past the walk's bound the skip scan still finds them, and
 * such claims hold the paused endpoint's attempts out of the due order, 256 a claim, until claims
 * after its resume release them, 256 a claim.
 * Counts and which attempts are claimed only.
 */
import type pg from 'pg';
import { createLocation, mintKey, request, startTestApi, waitingOnLock, type TestApi } from '../support/harness.js';
import { createEndpoint, emitMany } from './support.js';

let t: TestApi;

beforeAll(async () => {
  t = await startTestApi({});
});
afterAll(async () => {
  await t?.close();
});

async function endpointFor(locationId: string, label: string): Promise<{ id: string; token: string }> {
  const { token } = await mintKey(t.owner, locationId);
  const ep = await createEndpoint(t, token, locationId, { url: `https://receiver.example/${label}`, events: ['lead.created'] });
  return { id: ep.id, token };
}

/** One claim as the engine makes it, in a transaction of its own, and how many scans of the skip scan's index it made. */
async function claim(c: pg.PoolClient, max: number): Promise<{ endpoints: string[]; skipScans: number }> {
  // The backend's pending counts, not the transaction's: PostgreSQL reports them at most once a
  // second, so they may still hold an earlier claim's scans. The claim's own are the difference.
  const scans = async () => (await c.query(`select pg_stat_get_xact_numscans('app.webhook_deliveries_ready_endpoint_idx'::regclass)::int as n`)).rows[0].n as number;
  await c.query('begin');
  try {
    const before = await scans();
    const { rows: [{ claims }] } = await c.query(`select app.webhook_claim_batch('test-claim', $1, $2, 2, 40000) -> 'claims' as claims`, [max, Math.floor(max / 2)]);
    const n = (await scans()) - before;
    await c.query('commit');
    return { endpoints: (claims as Array<{ endpoint_id: string }>).map((x) => x.endpoint_id).sort(), skipScans: n };
  } catch (e) {
    await c.query('rollback');
    throw e;
  }
}

async function release(c: pg.PoolClient): Promise<void> {
  await c.query(`update app.webhook_deliveries set lease_expires_at = null, lease_owner = null, attempted_at = null where lease_owner = 'test-claim'`);
}

test('held and capped backlogs ahead in due order: the claim takes the healthy endpoints’ attempts without the skip scan, and past its bound with it', async () => {
  const held = await createLocation(t.owner, { name: 'Paused Plumbing' });
  const capped = await createLocation(t.owner, { name: 'Silent Heating' });
  const healthy = await createLocation(t.owner, { name: 'Healthy Air' });
  const epHeld = await endpointFor(held.id, 'held');
  const epCapped = await endpointFor(capped.id, 'capped');
  const epsHealthy = [await endpointFor(healthy.id, 'h1'), await endpointFor(healthy.id, 'h2'), await endpointFor(healthy.id, 'h3')];

  const c = await t.owner.connect();
  try {
    // The paused endpoint's 300 attempts, then the capped endpoint's 300 with 2 in flight: all due
    // before the healthy endpoints' attempts, and more than the claim's first window (128).
    await emitMany(t.owner, held.id, 'lead.created', 300);
    const paused = await request(t.baseUrl, 'PATCH', `/api/v1/locations/${held.id}/webhook-endpoints/${epHeld.id}`, { token: epHeld.token, body: { active: false } });
    expect(paused.status).toBe(200);
    await emitMany(t.owner, capped.id, 'lead.created', 300);
    expect((await claim(c, 2)).endpoints).toEqual([epCapped.id, epCapped.id]);
    await c.query(`update app.webhook_deliveries set lease_owner = 'in-flight' where lease_owner = 'test-claim'`);
    await new Promise((r) => setTimeout(r, 5)); // the healthy attempts are due strictly later
    await emitMany(t.owner, healthy.id, 'lead.created', 5);
    // Statistics as a running installation has them (autovacuum): on a table never analysed the
    // planner may read any index of it for the lease update.
    await c.query('analyze app.webhook_deliveries, app.webhook_endpoints');

    const healthyTwice = epsHealthy.flatMap((e) => [e.id, e.id]).sort();
    const first = await claim(c, 32);
    expect(first.endpoints).toEqual(healthyTwice);
    expect(first.skipScans).toBe(0);
    await release(c);

    // Past the walk's bound (2,048 entries for a batch of 32) the skip scan still finds them.
    await request(t.baseUrl, 'PATCH', `/api/v1/locations/${held.id}/webhook-endpoints/${epHeld.id}`, { token: epHeld.token, body: { active: true } });
    await emitMany(t.owner, held.id, 'lead.created', 1_800);
    await request(t.baseUrl, 'PATCH', `/api/v1/locations/${held.id}/webhook-endpoints/${epHeld.id}`, { token: epHeld.token, body: { active: false } });
    await c.query(`update app.webhook_deliveries set next_attempt_at = now() - interval '1 hour' where endpoint_id = $1 and status = 'pending'`, [epHeld.id]);
    const second = await claim(c, 32);
    expect(second.endpoints).toEqual(healthyTwice);
    expect(second.skipScans).toBeGreaterThan(0);
    await release(c);

    // That claim held the first 256 of the paused endpoint's attempts (out of the due order; still
    // pending for every reader). A claim cut short again holds 256 more; once the rest fits in the
    // walk (1,588 + 298 + 15 entries, under 2,048) claims pass over it without the skip scan.
    const heldOf = async (id: string) => (await c.query(
      `select count(*) filter (where held)::int as held, count(*) filter (where status = 'pending')::int as pending
         from app.webhook_deliveries where endpoint_id = $1`, [id])).rows[0];
    expect(await heldOf(epHeld.id)).toEqual({ held: 256, pending: 2_100 });
    const again = await claim(c, 32);
    expect(again.endpoints).toEqual(healthyTwice);
    expect(again.skipScans).toBeGreaterThan(0);
    await release(c);
    expect(await heldOf(epHeld.id)).toEqual({ held: 512, pending: 2_100 });
    const third = await claim(c, 32);
    expect(third.endpoints).toEqual(healthyTwice);
    expect(third.skipScans).toBe(0);
    await release(c);
    expect(await heldOf(epHeld.id)).toEqual({ held: 512, pending: 2_100 });

    // Resuming writes the endpoint row only; the next claim releases 256 and already takes two.
    const patch = (active: boolean) => request(t.baseUrl, 'PATCH', `/api/v1/locations/${held.id}/webhook-endpoints/${epHeld.id}`, { token: epHeld.token, body: { active } });
    expect((await patch(true)).status).toBe(200);
    expect(await heldOf(epHeld.id)).toEqual({ held: 512, pending: 2_100 });
    expect((await claim(c, 32)).endpoints).toEqual(expect.arrayContaining([epHeld.id, epHeld.id]));
    await release(c);
    expect(await heldOf(epHeld.id)).toEqual({ held: 256, pending: 2_100 });

    // A pause in progress (its row lock taken, not committed): the claim skips releasing rather
    // than wait for it; it waits only to lease, and the pause rolls back.
    const pauser = await t.owner.connect();
    try {
      const claimer = (await c.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0].pid;
      await pauser.query('begin');
      await pauser.query(`update app.webhook_endpoints set active = false where id = $1`, [epHeld.id]);
      const pending = claim(c, 32);
      // Rolled back once the claim waits on the pause's row lock (to lease), past its release step.
      await waitingOnLock(t.owner, { pid: claimer });
      await pauser.query('rollback');
      expect((await pending).endpoints).toEqual(expect.arrayContaining([epHeld.id, epHeld.id]));
      await release(c);
    } finally {
      pauser.release();
    }
    expect(await heldOf(epHeld.id)).toEqual({ held: 256, pending: 2_100 });
    await claim(c, 32);
    expect(await heldOf(epHeld.id)).toEqual({ held: 0, pending: 2_100 });
  } finally {
    await c.query(`update app.webhook_deliveries set lease_expires_at = null, lease_owner = null where lease_owner in ('test-claim', 'in-flight')`);
    c.release();
  }
});

/**
 * The claim with few endpoints holding work (migration 000040, docs/performance.md "Performance
 * after a realistic history: the seventh round"): after a burst to one location's two endpoints,
 * both at their cap, a claim found nothing only after walking thousands of entries of the due
 * order. With at most 16 active endpoints holding unleased attempts the claim probes each of them
 * instead of walking (it reads a handful of entries of webhook_deliveries_ready_idx, not thousands), takes what their caps
 * allow, and no more; many endpoints, or a paused one among few, take the walk as before.
 * Counts and which attempts are claimed only.
 */
import type pg from 'pg';
import { createLocation, mintKey, request, startTestApi, type TestApi } from '../support/harness.js';
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

/** One claim of up to `max` (cap 2 an endpoint) in its own transaction: the endpoints it leased and the due-order entries it walked. */
async function claim(c: pg.PoolClient, max: number): Promise<{ endpoints: string[]; walked: number }> {
  // pg_stat_get_xact_tuples_returned of the due-order index: the entries the walk read.
  const walked = async () => (await c.query(
    `select pg_stat_get_xact_tuples_returned('app.webhook_deliveries_ready_idx'::regclass)::int as n`)).rows[0].n as number;
  await c.query('begin');
  try {
    const before = await walked();
    const { rows: [{ claims }] } = await c.query(
      `select app.webhook_claim_batch('few-claim', $1, $1, 2, 40000) -> 'claims' as claims`, [max]);
    const n = (await walked()) - before;
    await c.query('commit');
    return { endpoints: (claims as Array<{ endpoint_id: string }>).map((x) => x.endpoint_id).sort(), walked: n };
  } catch (e) {
    await c.query('rollback');
    throw e;
  }
}

const inFlight = (c: pg.PoolClient) => c.query(`update app.webhook_deliveries set lease_owner = 'in-flight' where lease_owner = 'few-claim'`);
const leasesOf = async (c: pg.PoolClient, endpoint: string) => (await c.query(
  `select count(*)::int n from app.webhook_deliveries where endpoint_id = $1 and status = 'pending' and lease_expires_at > now()`, [endpoint])).rows[0].n as number;
/** The end of one in-flight send of `endpoint`: its attempt recorded as delivered, which frees the slot. */
const recordOne = (c: pg.PoolClient, endpoint: string) => c.query(
  `update app.webhook_deliveries set status = 'delivered', lease_expires_at = null
    where id = (select id from app.webhook_deliveries where endpoint_id = $1 and lease_owner = 'in-flight' and status = 'pending' limit 1)`, [endpoint]);

test('two endpoints at their cap behind a burst: the claim walks nothing, finds nothing, then refills a freed slot and no more', async () => {
  const loc = await createLocation(t.owner, { name: 'Burst Heating' });
  const a = await endpointFor(loc.id, 'a');
  const b = await endpointFor(loc.id, 'b');
  const c = await t.owner.connect();
  try {
    // 2,200 attempts, interleaved in due order: more than the walk's bound for a claim of 32 (2,048).
    await emitMany(t.owner, loc.id, 'lead.created', 1_100);
    await c.query('analyze app.webhook_deliveries, app.webhook_endpoints');
    const first = await claim(c, 32);
    expect(first.endpoints).toEqual([a.id, a.id, b.id, b.id].sort());
    // The lease update and the next due time may read a few entries of that index; the walk alone reads thousands.
    expect(first.walked).toBeLessThanOrEqual(32);
    await inFlight(c);

    // Both at their cap: nothing to lease, and nothing walked (was: 2,048 entries).
    const empty = await claim(c, 32);
    expect(empty.endpoints).toEqual([]);
    expect(empty.walked).toBeLessThanOrEqual(32);

    // One send of `a` ends: its slot is refilled with `a`'s next attempt, and `b` stays at its cap.
    await recordOne(c, a.id);
    const refill = await claim(c, 32);
    expect(refill.endpoints).toEqual([a.id]);
    expect(refill.walked).toBeLessThanOrEqual(32);
    expect(await leasesOf(c, a.id)).toBe(2);
    expect(await leasesOf(c, b.id)).toBe(2);
  } finally {
    c.release();
  }
});

test('a paused endpoint among few, or more than 16 endpoints with work: the claim walks the due order as before', async () => {
  const loc = await createLocation(t.owner, { name: 'Mixed Plumbing' });
  const paused = await endpointFor(loc.id, 'paused');
  const live = await endpointFor(loc.id, 'live');
  const c = await t.owner.connect();
  try {
    await emitMany(t.owner, loc.id, 'lead.created', 50);
    const res = await request(t.baseUrl, 'PATCH', `/api/v1/locations/${loc.id}/webhook-endpoints/${paused.id}`, { token: paused.token, body: { active: false } });
    expect(res.status).toBe(200);
    const withPaused = await claim(c, 4);
    expect(withPaused.endpoints).toEqual([live.id, live.id]);
    expect(withPaused.walked).toBeGreaterThan(0);
    await c.query(`update app.webhook_deliveries set status = 'delivered', lease_expires_at = null where location_id = $1`, [loc.id]);

    // 17 active endpoints of other locations with one attempt each.
    const many: string[] = [];
    for (let i = 0; i < 17; i++) {
      const other = await createLocation(t.owner, { name: `Many ${i}` });
      many.push((await endpointFor(other.id, `m${i}`)).id);
      await emitMany(t.owner, other.id, 'lead.created', 1);
    }
    const wide = await claim(c, 32);
    expect(wide.endpoints).toEqual([...many].sort());
    expect(wide.walked).toBeGreaterThan(0);
  } finally {
    c.release();
  }
});

/**
 * Recording a batch of outcomes (app.webhook_record_batch; docs/performance.md, "The drain after a
 * history"): a batch of successes is written in one pass, with what recording them one by one
 * writes (the attempt's outcome, its lease ended, the endpoint's failure run ended); a batch with a
 * failure goes through app.webhook_record for each. Which path ran is read from the transaction's
 * function counters.
 */
import type pg from 'pg';
import { createLocation, mintKey, startTestApi, type TestApi } from '../support/harness.js';
import { createEndpoint, emitMany, okResult } from './support.js';

let t: TestApi;

beforeAll(async () => {
  t = await startTestApi({});
});
afterAll(async () => {
  await t?.close();
});

interface Claim { delivery_id: string; endpoint_id: string }

async function setUp(): Promise<{ locationId: string; failing: string; healthy: string }> {
  const loc = await createLocation(t.owner, { name: 'Batch Recording Plumbing' });
  const { token } = await mintKey(t.owner, loc.id);
  const [failing, healthy] = await Promise.all(['failing', 'healthy'].map(async (label) =>
    (await createEndpoint(t, token, loc.id, { url: `https://receiver.example/${label}`, events: ['lead.created'] })).id));
  // One endpoint in a failure run, the other last succeeded ten seconds ago.
  await t.owner.query(`update app.webhook_endpoints set failure_count = 3, failing_since = now() - interval '1 hour',
                              last_failure_at = now() - interval '1 minute' where id = $1`, [failing]);
  await t.owner.query(`update app.webhook_endpoints set last_success_at = now() - interval '10 seconds' where id = $1`, [healthy]);
  return { locationId: loc.id, failing, healthy };
}

async function claimAll(c: pg.PoolClient, endpoints: string[]): Promise<Claim[]> {
  const { rows: [{ claims }] } = await c.query(`select app.webhook_claim_batch('test-record', 64, 64, 10, 40000) -> 'claims' as claims`);
  return (claims as Claim[]).filter((x) => endpoints.includes(x.endpoint_id));
}

/** Records `results` in a transaction of its own; returns what the function returned and how often it called app.webhook_record. */
async function record(c: pg.PoolClient, results: unknown[]): Promise<{ done: unknown[]; oneByOne: number }> {
  await c.query('begin');
  try {
    await c.query(`set local track_functions = 'all'`);
    const { rows: [{ done }] } = await c.query(`select app.webhook_record_batch($1, '{1,5}', 20, 3600) as done`, [JSON.stringify(results)]);
    const { rows: [{ n }] } = await c.query(
      `select coalesce(sum(calls), 0)::int as n from pg_stat_xact_user_functions where schemaname = 'app' and funcname = 'webhook_record'`);
    await c.query('commit');
    return { done, oneByOne: n };
  } catch (e) {
    await c.query('rollback');
    throw e;
  }
}

test('a batch of successes is recorded in one pass, with what one by one records; a batch with a failure one by one', async () => {
  const { locationId, failing, healthy } = await setUp();
  const c = await t.owner.connect();
  try {
    await emitMany(t.owner, locationId, 'lead.created', 3);
    const claims = await claimAll(c, [failing, healthy]);
    expect(claims).toHaveLength(6);
    const attemptedAt = new Date(Date.now() - 1500).toISOString();
    const missing = { delivery_id: '00000000-0000-4000-8000-000000000000', endpoint_id: healthy, result: okResult(attemptedAt) };
    const results = [missing, ...claims.map((x) => ({ delivery_id: x.delivery_id, endpoint_id: x.endpoint_id, result: okResult(attemptedAt) }))];
    const before = Date.now();

    const { done, oneByOne } = await record(c, results);
    expect(oneByOne).toBe(0);
    // One entry per outcome in (endpoint, attempt) order, null for an attempt that is not pending.
    const order = [...results].sort((a, b) => (a.endpoint_id + a.delivery_id < b.endpoint_id + b.delivery_id ? -1 : 1));
    expect(done).toEqual(order.map((r) => (r === missing ? null
      : { delivery_id: r.delivery_id, status: 'delivered', next_delivery_id: null, disabled: false })));

    const { rows } = await c.query(
      `select status, response_status, response_body, error, duration_ms, attempted_at, next_attempt_at, lease_expires_at, lease_owner
         from app.webhook_deliveries where id = any ($1::uuid[])`, [claims.map((x) => x.delivery_id)]);
    expect(rows).toHaveLength(6);
    for (const r of rows) {
      expect(r).toEqual({ status: 'delivered', response_status: 200, response_body: 'thanks', error: null, duration_ms: 7,
        attempted_at: new Date(attemptedAt), next_attempt_at: null, lease_expires_at: null, lease_owner: null });
    }
    const eps = (await c.query(`select id, failure_count, failing_since, last_success_at from app.webhook_endpoints where id = any ($1::uuid[])`,
      [[failing, healthy]])).rows;
    for (const e of eps) {
      expect(e.failure_count).toBe(0);
      expect(e.failing_since).toBeNull();
      expect(e.last_success_at.getTime()).toBeGreaterThanOrEqual(before - 1000);
    }

    // Recording the same outcomes again changes nothing: none of them is pending any more.
    const again = await record(c, results);
    expect(again.done).toEqual(order.map(() => null));

    // A batch with one failure: every outcome through app.webhook_record, the failure retried.
    await emitMany(t.owner, locationId, 'lead.created', 1);
    const next = await claimAll(c, [failing, healthy]);
    expect(next).toHaveLength(2);
    const failed = next.find((x) => x.endpoint_id === failing)!;
    const mixed = next.map((x) => ({ delivery_id: x.delivery_id, endpoint_id: x.endpoint_id,
      result: x === failed ? { ...okResult(attemptedAt), ok: false, response_status: 500, error: 'Non-2xx response (500)' } : okResult(attemptedAt) }));
    const m = await record(c, mixed);
    expect(m.oneByOne).toBe(2);
    const { rows: [f] } = await c.query(`select status from app.webhook_deliveries where id = $1`, [failed.delivery_id]);
    expect(f.status).toBe('failed');
    const { rows: [{ n }] } = await c.query(
      `select count(*)::int as n from app.webhook_deliveries where endpoint_id = $1 and status = 'pending' and attempt = 2`, [failing]);
    expect(n).toBe(1);
  } finally {
    c.release();
  }
});

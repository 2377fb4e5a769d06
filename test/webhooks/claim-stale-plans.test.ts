/**
 * The claim's plans are made once per session (generic plans) on the statistics of that moment.
 * Made while the delivery table held no pending attempt, they must still reach a burst's attempts
 * through the claim's partial indexes, never by scanning the whole table (docs/performance.md,
 * "Performance after a realistic history: the third round"). Counts only.
 */
import { createLocation, mintKey, startTestApi, type TestApi } from '../support/harness.js';
import { createEndpoint, emitMany } from './support.js';

let t: TestApi;

beforeAll(async () => {
  t = await startTestApi({});
});
afterAll(async () => {
  await t?.close();
});

test('a claim planned before a burst reads the burst through its indexes, not by scanning the table', async () => {
  const loc = await createLocation(t.owner, { name: 'Burst Heating' });
  const { token } = await mintKey(t.owner, loc.id);
  for (const label of ['a', 'b']) await createEndpoint(t, token, loc.id, { url: `https://receiver.example/${label}`, events: ['lead.created'] });
  // A history: every attempt delivered, and the statistics say so.
  await emitMany(t.owner, loc.id, 'lead.created', 500);
  await t.owner.query(`update app.webhook_deliveries set status = 'delivered', response_status = 200 where location_id = $1`, [loc.id]);
  await t.owner.query('analyze app.webhook_deliveries');

  const c = await t.owner.connect();
  try {
    const claim = async () => {
      await c.query('begin');
      const scans = async () => (await c.query(
        `select seq_scan::int as n from pg_stat_xact_user_tables where relid = 'app.webhook_deliveries'::regclass`)).rows[0].n as number;
      const before = await scans();
      const { rows: [{ n }] } = await c.query(
        `select jsonb_array_length(app.webhook_claim_batch('test-stale', 32, 16, 2, 40000) -> 'claims') as n`);
      const seq = (await scans()) - before;
      await c.query('rollback');
      return { claimed: n as number, seq };
    };
    // The session's plans are made now, with nothing pending.
    expect(await claim()).toEqual({ claimed: 0, seq: 0 });
    // The burst: 4,000 attempts pending, the statistics not yet told.
    await emitMany(t.owner, loc.id, 'lead.created', 2000);
    const after = await claim();
    expect(after).toEqual({ claimed: 4, seq: 0 });
  } finally {
    c.release();
  }
});

/**
 * The notification claim's plans are made once per session (generic), on the statistics of their
 * moment. Made while the table held a few dozen notifications, they must still reach a burst's
 * thousands through the due index and the primary key, never by reading the whole table
 * (docs/performance.md, "Performance after a realistic history: the fifth round"). Counts only.
 */
import { createLocation, startTestApi, type TestApi } from '../support/harness.js';

let t: TestApi;

beforeAll(async () => {
  t = await startTestApi({});
});
afterAll(async () => {
  await t?.close();
});

/** `n` operational e-mails of the location, inserted as the fan-out leaves them (pending, due now) or already sent. */
async function notifications(locationId: string, n: number, status: 'pending' | 'sent'): Promise<void> {
  await t.owner.query(
    `insert into app.notifications (location_id, event, channel, provider, recipient, data, status, attempts)
     select $1, 'endpoint.disabled', 'email', 'smtp', 'owner' || i || '@example.com', jsonb_build_object('n', i), $3, case when $3 = 'sent' then 1 else 0 end
       from generate_series(1, $2::int) i`,
    [locationId, n, status]);
}

test('a notification claim planned on a near-empty table reads a burst through its indexes, not by scanning the table', async () => {
  const loc = await createLocation(t.owner, { name: 'Burst Cooling' });
  await notifications(loc.id, 40, 'sent');
  await t.owner.query('analyze app.notifications');

  const c = await t.owner.connect();
  try {
    const claim = async () => {
      await c.query('begin');
      const scans = async () => (await c.query(
        `select seq_scan::int as n from pg_stat_xact_user_tables where relid = 'app.notifications'::regclass`)).rows[0].n as number;
      const before = await scans();
      const { rows: [{ r }] } = await c.query(`select app.notification_claim_batch('test-stale', 8, 40000) as r`);
      const seq = (await scans()) - before;
      await c.query('rollback');
      const claims = r.claims as Array<{ location_id: string; recipient: string }>;
      return { claimed: claims.filter((x) => x.location_id === loc.id).length, seq };
    };
    // The session's plans (the pick and the send's query) are made now, with nothing pending.
    expect(await claim()).toEqual({ claimed: 0, seq: 0 });
    // The burst: 3,000 pending, the statistics not yet told.
    await notifications(loc.id, 3_000, 'pending');
    expect(await claim()).toEqual({ claimed: 8, seq: 0 });
  } finally {
    c.release();
  }
});

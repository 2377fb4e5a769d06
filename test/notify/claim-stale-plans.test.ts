/**
 * The notification claim's plans are made once per session (generic), on the statistics of their
 * moment. Made while the table held a few dozen notifications, they must still reach a burst's
 * thousands through the due index and the primary key, never by reading the whole table or a
 * whole index of it (docs/performance.md, "Performance after a realistic history: the fifth round"). Counts only.
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
      // Sequential scans of the notifications, and rows read from them and from the events.
      const counts = async () => (await c.query(
        `select coalesce(sum(seq_scan) filter (where relid = 'app.notifications'::regclass), 0)::int as seq,
                coalesce(sum(coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0)), 0)::int as rows
           from pg_stat_xact_user_tables where relid in ('app.notifications'::regclass, 'app.events'::regclass)`)).rows[0] as { seq: number; rows: number };
      const before = await counts();
      const { rows: [{ r }] } = await c.query(`select app.notification_claim_batch('test-stale', 8, 40000) as r`);
      const after = await counts();
      await c.query('rollback');
      const claims = r.claims as Array<{ location_id: string; recipient: string }>;
      const claimed = claims.filter((x) => x.location_id === loc.id).length;
      return { claimed, seq: after.seq - before.seq, rows: after.rows - before.rows };
    };
    // The session's plans (the pick and the send's query) are made now, with nothing pending.
    // The pick reads its batch, the send's query one notification and one event a claim.
    const quiet = await claim();
    expect(quiet).toMatchObject({ claimed: 0, seq: 0 });
    expect(quiet.rows).toBeLessThanOrEqual(8);
    // The burst: 3,000 pending, the statistics not yet told.
    await notifications(loc.id, 3_000, 'pending');
    const burst = await claim();
    expect(burst).toMatchObject({ claimed: 8, seq: 0 });
    expect(burst.rows).toBeLessThanOrEqual(8 * 3);
  } finally {
    c.release();
  }
});

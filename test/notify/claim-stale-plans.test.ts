/**
 * The notification claim's plans are made once per session (generic), on the statistics of their
 * moment. Made while the table held a few dozen notifications and the events and calls had no
 * statistics, they must still reach a burst's thousands, and each one's event and call, through
 * the due index and the primary keys, never by reading a whole table, a whole index or a location's
 * rows (docs/performance.md, "Performance after a realistic history: the fifth round"). Counts only.
 */
import { xactReads } from '../support/db.js';
import { createLocation, seedDemo, startTestApi, type TestApi } from '../support/harness.js';

let t: TestApi;

beforeAll(async () => {
  t = await startTestApi({});
});
afterAll(async () => {
  await t?.close();
});

/** `n` operational e-mails of the location, already sent (a quiet history). */
async function sentHistory(locationId: string, n: number): Promise<void> {
  await t.owner.query(
    `insert into app.notifications (location_id, event, channel, provider, recipient, data, status, attempts)
     select $1, 'endpoint.disabled', 'email', 'smtp', 'owner' || i || '@example.com', jsonb_build_object('n', i), 'sent', 1
       from generate_series(1, $2::int) i`,
    [locationId, n]);
}

/**
 * A burst as ingestion leaves it: `calls` demo calls, a call.ended event for each and three pending
 * SMS for every event (due now), so that each send looks up its event and its call.
 */
async function burst(loc: { id: string; slug: string }, calls: number): Promise<void> {
  await seedDemo(t.owner, loc.slug, calls, { days: 2 });
  await t.owner.query(
    `select app.emit($1, 'call.ended', jsonb_build_object('id', c.id)) from app.calls c where c.location_id = $1`, [loc.id]);
  await t.owner.query(
    `insert into app.notifications (location_id, event_id, event, channel, provider, recipient)
     select e.location_id, e.id, e.type, 'sms', 'twilio', '+1212555' || lpad(k::text, 4, '0')
       from app.events e cross join generate_series(1, 3) k
      where e.location_id = $1 and e.type = 'call.ended'`, [loc.id]);
}

test('a notification claim planned on a near-empty table reads a burst through its indexes, not by scanning the table', async () => {
  const loc = await createLocation(t.owner, { name: 'Burst Cooling' });
  await sentHistory(loc.id, 40);
  await t.owner.query('analyze app.notifications');

  const c = await t.owner.connect();
  try {
    const claim = async () => {
      await c.query('begin');
      // Sequential scans of the notifications; rows read from them, the events and the calls.
      const seqBefore = await xactReads(c, ['app.notifications']);
      const rowsBefore = await xactReads(c, ['app.notifications', 'app.events', 'app.calls']);
      const { rows: [{ r }] } = await c.query(`select app.notification_claim_batch('test-stale', 8, 40000) as r`);
      const seqAfter = await xactReads(c, ['app.notifications']);
      const rowsAfter = await xactReads(c, ['app.notifications', 'app.events', 'app.calls']);
      await c.query('rollback');
      const claims = r.claims as Array<{ location_id: string; recipient: string }>;
      const claimed = claims.filter((x) => x.location_id === loc.id).length;
      return { claimed, seq: seqAfter.seq - seqBefore.seq, rows: rowsAfter.rows - rowsBefore.rows };
    };
    // The session's plans (the pick and the send's query) are made now, with nothing pending and
    // no statistics of the events or the calls.
    const quiet = await claim();
    expect(quiet).toMatchObject({ claimed: 0, seq: 0 });
    expect(quiet.rows).toBeLessThanOrEqual(8);
    // The burst: 1,000 calls and events, 3,000 SMS pending, the statistics not yet told.
    await burst(loc, 1_000);
    const after = await claim();
    expect(after).toMatchObject({ claimed: 8, seq: 0 });
    // Five rows a notification: the pick's, the lease's, and the send's notification, event and call.
    expect(after.rows).toBeLessThanOrEqual(8 * 5);
  } finally {
    c.release();
  }
});

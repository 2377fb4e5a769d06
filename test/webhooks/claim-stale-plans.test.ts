/**
 * The claim's and the record's plans are made on the statistics of their moment (the claim's once
 * per session, generic). Made while the delivery table held no pending attempt, they must still
 * reach a burst's attempts through the indexes written for them, never by reading the table or
 * every pending attempt (docs/performance.md, "Performance after a realistic history: the third
 * round" and "the fourth round"). Counts only.
 */
import { xactReads } from '../support/db.js';
import { createLocation, mintKey, startTestApi, type TestApi } from '../support/harness.js';
import { claimAndRecord, createEndpoint, emitMany } from './support.js';

let t: TestApi;

beforeAll(async () => {
  t = await startTestApi({});
});
afterAll(async () => {
  await t?.close();
});

/** A location with two lead.created endpoints and a history: 1,000 attempts, every one delivered, and the statistics say so. */
async function deliveredHistory(name: string) {
  const loc = await createLocation(t.owner, { name });
  const { token } = await mintKey(t.owner, loc.id);
  for (const label of ['a', 'b']) await createEndpoint(t, token, loc.id, { url: `https://receiver.example/${label}`, events: ['lead.created'] });
  await emitMany(t.owner, loc.id, 'lead.created', 500);
  await t.owner.query(`update app.webhook_deliveries set status = 'delivered', response_status = 200 where location_id = $1`, [loc.id]);
  await t.owner.query('analyze app.webhook_deliveries');
  return loc;
}

test('a claim planned before a burst reads the burst through its indexes, not by scanning the table', async () => {
  const loc = await deliveredHistory('Burst Heating');

  const c = await t.owner.connect();
  try {
    const claim = async () => {
      await c.query('begin');
      const scans = async () => (await xactReads(c, ['app.webhook_deliveries'])).seq;
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

test('a record batch planned before a burst finds its attempts by primary key, not among every pending one', async () => {
  const loc = await deliveredHistory('Burst Drains');

  const c = await t.owner.connect();
  try {
    // This session's plans are made now, with nothing pending (a record needs something to record:
    // two attempts).
    await emitMany(t.owner, loc.id, 'lead.created', 1);
    for (let i = 0; i < 6; i++) await claimAndRecord(c, 'test-stale-record');
    // The burst: 4,000 attempts pending, the statistics not yet told.
    await emitMany(t.owner, loc.id, 'lead.created', 2000);
    const after = await claimAndRecord(c, 'test-stale-record');
    expect(after.recorded).toBe(64);
    // Three reads an attempt at most (its endpoint's for the lock, its own lock taken before the
    // write for an erasure meanwhile, its update), never the 4,000.
    expect(after.recordRead).toBeLessThanOrEqual(64 * 3);
  } finally {
    c.release();
  }
});

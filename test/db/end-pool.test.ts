/**
 * The test databases are dropped `with (force)` after their pools end (test/support/db.ts). A pool
 * whose end() has resolved may still have a connection open, and a force drop terminating it makes
 * the pool emit an 'error' event: with no listener, a file fails after its tests passed (a
 * fresh-clone CI saw it once). endPool waits for the connections themselves. Counts only.
 */
import pg from 'pg';
import { createEmptyDatabase, endPool } from '../support/db.js';

/** Pool errors over `trials` pools of two used connections, each ended then its database force-dropped at once. */
async function errorsOnDrop(end: (p: pg.Pool) => Promise<void>, trials: number): Promise<number> {
  let errors = 0;
  // One admin connection kept open, not db.drop() (which connects first): the drop must follow
  // the end at once, or the window this counts has closed before it (0 of 20 with db.drop()).
  const admin = new pg.Client({ connectionString: process.env.SB_TEST_ADMIN_URL! });
  await admin.connect();
  try {
    for (let i = 0; i < trials; i++) {
      const db = await createEmptyDatabase();
      const pool = new pg.Pool({ connectionString: db.url, max: 2 });
      pool.on('error', () => errors++);
      const [a, b] = [await pool.connect(), await pool.connect()];
      await Promise.all([a.query('select 1'), b.query('select 1')]);
      a.release();
      b.release();
      await end(pool);
      await admin.query(`drop database if exists ${db.name} with (force)`);
      // A termination's error arrives after the drop's answer.
      await new Promise((r) => setTimeout(r, 20));
    }
  } finally {
    await admin.end();
  }
  return errors;
}

test('a pool ended with endPool has no connection left for a force drop to terminate', async () => {
  expect(await errorsOnDrop(endPool, 20)).toBe(0);
  // pool.end() alone leaves the window (3 errors in 30 trials when this was written); it is timing,
  // so it is printed, not asserted.
  console.log(`pool.end() alone: ${await errorsOnDrop((p) => p.end(), 20)} pool errors in 20 force drops`);
}, 60_000);

/**
 * `npm start` (mode `all`) opens its admin listener before the worker has started: its /readyz
 * says 503 with the `worker` check "starting" until then, so nothing that waits for readiness
 * (an orchestrator, a test that then kills the database) acts on a process still starting; then
 * `{ "ok": true }`, listed like every other check.
 */
import pg from 'pg';
import { startService, type Service } from '../../src/service.js';
import { createTestDatabase } from '../support/db.js';
import { testConfig, testLog, waitingOnLock } from '../support/harness.js';
import { freePort } from '../support/spawn.js';
import { until } from '../support/supervision.js';

/** The advisory lock the worker's first connection waits for while the test holds it. */
const HOLD = 7_310_042;

test('the admin /readyz of `all` is 503 "worker: starting" until the worker has started, then 200', async () => {
  const db = await createTestDatabase();
  const blocker = new pg.Client({ connectionString: db.url });
  await blocker.connect();
  let svc: Service | undefined;
  let starting: Promise<Service> | undefined;
  try {
    // The worker's start opens the first connection of its pool (application_name
    // switchboard-worker); a login trigger of this test's database makes that connection wait
    // for an advisory lock the blocker holds, so the start waits there until it is let go.
    // (Nothing the start awaits reads a table the rest of start-up does not read first.)
    await blocker.query(`create function public.hold_worker_login() returns event_trigger language plpgsql as $$
      begin
        if current_setting('application_name') = 'switchboard-worker' then
          perform pg_advisory_lock_shared(${HOLD}); perform pg_advisory_unlock_shared(${HOLD});
        end if;
      end $$`);
    await blocker.query('create event trigger hold_worker_login on login execute function public.hold_worker_login()');
    await blocker.query('select pg_advisory_lock($1)', [HOLD]);
    const adminPort = await freePort();
    const cfg = testConfig({ DATABASE_URL: db.url, PORT: '0', HOST: '127.0.0.1', ADMIN_HOST: '127.0.0.1', ADMIN_PORT: String(adminPort) });
    starting = startService(cfg, testLog, 'all').then((s) => (svc = s));
    const readyz = async () => {
      const res = await fetch(`http://127.0.0.1:${adminPort}/readyz`).catch(() => null);
      return res && { status: res.status, body: (await res.json()) as any };
    };
    let early: Awaited<ReturnType<typeof readyz>> = null;
    await until('the admin listener answers', async () => Boolean(early = await readyz()));
    expect(early!.status).toBe(503);
    expect(early!.body.error.details.checks.worker).toEqual({ ok: false, detail: 'starting' });
    // The start is still held at the login (so the answer was about a worker not yet started).
    await waitingOnLock(blocker, { application: 'switchboard-worker' });
    expect(svc).toBeUndefined();

    await blocker.query('select pg_advisory_unlock($1)', [HOLD]);
    await starting;
    let ready: Awaited<ReturnType<typeof readyz>> = null;
    await until('admin ready', async () => (ready = await readyz())?.status === 200, 30_000);
    expect(ready!.body.data.checks.worker).toEqual({ ok: true });
  } finally {
    await blocker.end(); // ends the hold, so a start still waiting finishes and is stopped
    await (svc ?? (await starting?.catch(() => undefined)))?.stop();
    await db.drop();
  }
}, 60_000);

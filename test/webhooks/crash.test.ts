import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { createLocation, mintKey, request, startTestApi, testLog, type TestApi } from '../support/harness.js';
import { makeSweepTask } from '../../src/webhooks/deliver.js';
import { createOwnerPool } from '../../src/db/pools.js';
import { makePki, reply, silence, startHttpsReceiver, type HttpsReceiver, type TestPki } from '../support/https.js';
import { deliveriesOf, emit, startTestWorker, waitFor } from './support.js';

let t: TestApi;
let pki: TestPki;
let rx: HttpsReceiver;
let child: ChildProcess | undefined;

beforeAll(async () => {
  pki = makePki();
  t = await startTestApi({ WEBHOOK_RETRY_DELAYS: '3600', WEBHOOK_TIMEOUT_MS: '30000' });
  rx = await startHttpsReceiver(pki);
});
afterAll(async () => {
  child?.kill('SIGKILL');
  await rx?.close();
  await t?.close();
});

test('a worker killed -9 mid-delivery: the sweeper re-queues the attempt and the delivery arrives', async () => {
  const loc = await createLocation(t.owner);
  const { token } = await mintKey(t.owner, loc.id);
  const ep = await request(t.baseUrl, 'POST', `/api/v1/locations/${loc.id}/webhook-endpoints`, {
    token, body: { url: rx.url, events: ['call.ended'] },
  });
  expect(ep.status).toBe(201);

  // The receiver holds the first request open (never answers); later ones get 200.
  rx.respond(silence, reply(200, 'ok'));
  child = spawn(process.execPath, ['--import', 'tsx', path.join(process.cwd(), 'test/webhooks/worker-child.ts')], {
    env: {
      ...process.env, DATABASE_URL: t.db.url, NODE_EXTRA_CA_CERTS: pki.caFile, LOG_LEVEL: 'silent',
      WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true', WEBHOOK_TIMEOUT_MS: '30000', WEBHOOK_RETRY_DELAYS: '3600',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await waitFor(async () => new Promise<boolean>((ok) => child!.stdout!.once('data', () => ok(true))), 'child ready', 30000);

  const eventId = await emit(t.owner, loc.id, 'call.ended', { id: 'call-1' });
  await waitFor(async () => rx.received.length >= 1, 'request reached the receiver', 20000);
  const exited = new Promise((ok) => child!.once('exit', ok));
  child.kill('SIGKILL');
  await exited;
  child = undefined;

  // The dead worker's job stays locked (graphile-worker would wait 4 h); the sweeper does not.
  const pool = createOwnerPool(t.db.url, 2, 'sweeper');
  try {
    const sweep = makeSweepTask({ cfg: t.cfg, log: testLog, pool });
    await waitFor(async () => {
      await sweep({ grace_seconds: 0 }, {} as never);
      const { rows } = await t.owner.query(
        `select count(*)::int as n from graphile_worker.jobs where key = $1 and locked_at is null`,
        [`delivery:${(await deliveriesOf(t.owner, eventId))[0].id}`]);
      return rows[0].n === 1;
    }, 'sweeper re-queued the attempt');
  } finally {
    await pool.end();
  }
  const worker = await startTestWorker(t.cfg, t.db.url, pki);
  try {
    const rows = await waitFor(async () => {
      const r = await deliveriesOf(t.owner, eventId);
      return r[0]?.status === 'delivered' && r;
    }, 'delivered after recovery');
    expect(rows).toHaveLength(1);
    const got = rx.received.filter((x) => x.headers['svc-event-id'] === eventId);
    expect(got).toHaveLength(2);
    expect(got[0].raw.equals(got[1].raw)).toBe(true);
  } finally {
    await worker.stop();
  }
});

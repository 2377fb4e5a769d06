/**
 * Isolation between endpoints (docs/delivery-engine.md): a receiver that never answers holds at
 * most WEBHOOK_ENDPOINT_CONCURRENCY (2) attempts in flight across all workers, and another
 * location's deliveries go past its backlog instead of queueing behind it. Order and counts only.
 */
import pg from 'pg';
import { WebhookEngine } from '../../src/webhooks/engine.js';
import { createLocation, memoryLog, mintKey, request, startTestApi, testConfig, type TestApi } from '../support/harness.js';
import { makePki, reply, silence, startHttpsReceiver, type HttpsReceiver, type Responder, type TestPki } from '../support/https.js';
import { createEndpoint, emitMany, startTestWorker, waitFor } from './support.js';

let t: TestApi;
let pki: TestPki;
let rxA: HttpsReceiver;
let rxB: HttpsReceiver;
const workers: Array<Awaited<ReturnType<typeof startTestWorker>>> = [];

beforeAll(async () => {
  pki = makePki();
  // A short time-out so B's attempts fail (and free their slot) quickly; no automatic retries.
  t = await startTestApi({ WEBHOOK_RETRY_DELAYS: '3600', WEBHOOK_TIMEOUT_MS: '1000' });
  [rxA, rxB] = await Promise.all([startHttpsReceiver(pki, { path: '/a' }), startHttpsReceiver(pki, { path: '/b' })]);
});
afterAll(async () => {
  await Promise.all(workers.map((w) => w.stop()));
  await Promise.all([rxA?.close(), rxB?.close()]);
  await t?.close();
});

async function endpointFor(locationId: string, url: string): Promise<string> {
  const { token } = await mintKey(t.owner, locationId);
  return (await createEndpoint(t, token, locationId, { url, events: ['lead.created'] })).id;
}

test('noisy neighbour: all of A’s 50 events arrive while B’s silent endpoint still has ≥ 150 of its 200 unsent', async () => {
  const a = await createLocation(t.owner, { name: 'Healthy Heating' });
  const b = await createLocation(t.owner, { name: 'Broken Zapier Plumbing' });
  await endpointFor(a.id, rxA.url);
  const epB = await endpointFor(b.id, rxB.url);

  // B's receiver never answers; it counts how many of B's requests are open at once.
  let openB = 0;
  let maxOpenB = 0;
  const hang: Responder = (_r, res) => {
    openB += 1;
    maxOpenB = Math.max(maxOpenB, openB);
    res.on('close', () => (openB -= 1));
  };
  rxB.respond(hang);
  // A's receiver notes how many of B's requests had gone out when each of A's arrived.
  const bSentAtA: number[] = [];
  rxA.respond((r, res) => {
    bSentAtA.push(rxB.received.length);
    reply(200, 'ok')(r, res);
  });

  // B's 200 are queued first, then A's 50; then two workers start (as two worker processes would).
  await emitMany(t.owner, b.id, 'lead.created', 200);
  await emitMany(t.owner, a.id, 'lead.created', 50);
  workers.push(await startTestWorker(t.cfg, t.db.url, pki), await startTestWorker(t.cfg, t.db.url, pki));

  await waitFor(async () => rxA.received.length >= 50, 'all of A’s events delivered', 45000);
  const unsentB = 200 - bSentAtA[49];
  expect(unsentB).toBeGreaterThanOrEqual(150);
  // A's were delivered (and recorded) as such.
  await waitFor(async () => (await t.owner.query(
    `select count(*)::int as n from app.webhook_deliveries where location_id = $1 and status = 'delivered'`, [a.id])).rows[0].n === 50,
  'A’s deliveries recorded');
  // Never more than 2 of B's attempts in flight at once, across both workers.
  expect(maxOpenB).toBeLessThanOrEqual(2);
  expect(maxOpenB).toBeGreaterThanOrEqual(1);
  const { rows: [{ leased }] } = await t.owner.query(
    `select count(*)::int as leased from app.webhook_deliveries where endpoint_id = $1 and lease_expires_at > now()`, [epB]);
  expect(leased).toBeLessThanOrEqual(2);

  // Stop B's backlog (DELETE answers at once; in-flight ones are recorded when they time out).
  const { token } = await mintKey(t.owner, b.id);
  expect((await request(t.baseUrl, 'DELETE', `/api/v1/webhook-endpoints/${epB}`, { token })).status).toBe(200);
});

test('failing endpoints share at most half of a worker’s slots: three silent ones never hold more than 2 of 4', async () => {
  await Promise.all(workers.splice(0).map((w) => w.stop())); // only this test's worker from here on
  const rxS = await startHttpsReceiver(pki, { path: '/silent' });
  const a = await createLocation(t.owner, { name: 'Steady Electric' });
  const b = await createLocation(t.owner, { name: 'Three Dead Hooks Roofing' });
  rxA.received.length = 0;
  rxA.respond(reply(200, 'ok'));
  let open = 0;
  let maxOpen = 0;
  rxS.respond((_r, res) => {
    open += 1;
    maxOpen = Math.max(maxOpen, open);
    res.on('close', () => (open -= 1));
  });
  await endpointFor(a.id, rxA.url);
  const silent: string[] = [];
  for (let i = 1; i <= 3; i++) silent.push(await endpointFor(b.id, `${rxS.url}?hook=${i}`));
  // They have failed before (failure_count > 0): their attempts are the degraded share.
  await t.owner.query(`update app.webhook_endpoints set failure_count = 3 where id = any($1::uuid[])`, [silent]);
  await emitMany(t.owner, b.id, 'lead.created', 20); // 60 attempts, 20 per silent endpoint
  await emitMany(t.owner, a.id, 'lead.created', 10);
  const w = await startTestWorker({ ...t.cfg, WEBHOOK_CONCURRENCY: 4 }, t.db.url, pki);
  workers.push(w);
  try {
    await waitFor(async () => rxA.received.length >= 10, 'all of A’s events delivered', 45000);
    const sentSilent = rxS.received.length;
    expect(sentSilent).toBeLessThanOrEqual(20);
    await waitFor(async () => rxS.received.length >= 4, 'silent endpoints keep their share', 20000);
    expect(maxOpen).toBeLessThanOrEqual(2);
  } finally {
    await w.stop();
    workers.splice(workers.indexOf(w), 1);
    await rxS.close();
  }
});

test('failing endpoints whose backlog fills a claim\'s window hold no healthy endpoint back once their half of the slots is taken', async () => {
  await Promise.all(workers.splice(0).map((w) => w.stop()));
  await t.owner.query(`delete from app.webhook_deliveries where status = 'pending'`); // earlier tests' leftovers
  const rxS = await startHttpsReceiver(pki, { path: '/silent-backlog' });
  const a = await createLocation(t.owner, { name: 'Patient Plumbing' });
  const b = await createLocation(t.owner, { name: 'Backlogged Heating' });
  rxA.received.length = 0;
  rxA.respond(reply(200, 'ok'));
  rxS.respond(silence); // each attempt ends at the 1 s time-out
  await endpointFor(a.id, rxA.url);
  const failing: string[] = [];
  for (let i = 1; i <= 3; i++) failing.push(await endpointFor(b.id, `${rxS.url}?hook=${i}`));
  await t.owner.query(`update app.webhook_endpoints set failure_count = 3 where id = any($1::uuid[])`, [failing]);
  // 120 attempts of the failing endpoints first in the due order: more than a claim's window (64)
  // holds, so A's attempts are found only by the claim's second step.
  await emitMany(t.owner, b.id, 'lead.created', 40);
  await emitMany(t.owner, a.id, 'lead.created', 10);
  const w = await startTestWorker({ ...t.cfg, WEBHOOK_CONCURRENCY: 4 }, t.db.url, pki);
  workers.push(w);
  try {
    await waitFor(async () => rxA.received.length >= 10, 'all of A’s events delivered', 45000);
    // Served beside the backlog, not after it: most of the failing endpoints' attempts are unsent.
    expect(rxS.received.length).toBeLessThan(40);
  } finally {
    await w.stop();
    workers.splice(workers.indexOf(w), 1);
    await rxS.close();
  }
});

test('a per-endpoint cap above half of the worker\'s slots is warned about at start; half or less is not', async () => {
  const pool = new pg.Pool({ max: 1 }); // never connected: only the engine's settings are read
  const warnings = (cap: string) => {
    const { log, records } = memoryLog('warn');
    new WebhookEngine({ cfg: testConfig({ WEBHOOK_CONCURRENCY: '64', WEBHOOK_ENDPOINT_CONCURRENCY: cap }), log, pool });
    return records().map((r) => [r.msg.split(':')[0], r.per_endpoint, r.concurrency]);
  };
  expect(warnings('2')).toEqual([]);
  expect(warnings('32')).toEqual([]);
  expect(warnings('33')).toEqual([['WEBHOOK_ENDPOINT_CONCURRENCY is above half of WEBHOOK_CONCURRENCY', 33, 64]]);
  expect(warnings('64')).toEqual([['WEBHOOK_ENDPOINT_CONCURRENCY is above half of WEBHOOK_CONCURRENCY', 64, 64]]);
  await pool.end();
});

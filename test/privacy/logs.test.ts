/**
 * Logs carry no caller data (docs/privacy.md): the service runs as an operator runs it (src/main.ts,
 * API and worker in one process) at LOG_LEVEL=trace, the most verbose level it has, and a full call
 * flow goes through it: the pre-call inbound webhook, call_started, the analysed call (finalised
 * in the request), a second call settled by the worker's finalize_call job, signed webhook
 * deliveries to a local HTTPS receiver, notifications over SMTP, SMS and Slack, and REST reads of
 * the calls and leads, some with the caller's phone in the query string. Then every line the
 * process wrote (stdout and stderr) is searched for the callers' phones in every format, their
 * names, addresses, e-mail and every sentence of the transcripts: no hit.
 */
import { startFanoutReceivers, type FanoutReceivers } from '../support/receivers.js';
import type pg from 'pg';
import { callFn, createApiPool, createOwnerPool } from '../../src/db/pools.js';
import { createTestDatabase, type TestDatabase } from '../support/db.js';
import { createLocation, mintKey, request } from '../support/harness.js';
import { startService } from '../support/service.js';
import { freePort } from '../support/spawn.js';
import { postVoice, VOICE_SECRET, voiceFixture, type VoiceLocation } from '../platform/support.js';
import { waitFor } from '../webhooks/support.js';
import { connectSlack } from '../notify/support.js';
import { gqlAt, mintMember } from '../staff/support.js';

let rx: FanoutReceivers;
let db: TestDatabase;
let owner: pg.Pool;
let apiPool: pg.Pool;

beforeAll(async () => {
  rx = await startFanoutReceivers('logs');
  db = await createTestDatabase();
  owner = createOwnerPool(db.url, 3, 'test-owner');
  apiPool = createApiPool(db.url, 2);
});

afterAll(async () => {
  await apiPool?.end();
  await owner?.end();
  await db?.drop();
  await rx?.close();
});

/** The callers' personal data as it could appear in a log line. */
function needlesOf(...calls: any[]): string[] {
  const out = new Set<string>();
  for (const c of calls) {
    const e164: string = c.from_number;
    const n = e164.slice(2);
    for (const p of [e164, e164.slice(1), n, `(${n.slice(0, 3)}) ${n.slice(3, 6)}-${n.slice(6)}`, `${n.slice(0, 3)}-${n.slice(3, 6)}-${n.slice(6)}`,
      `${n.slice(0, 3)} ${n.slice(3, 6)} ${n.slice(6)}`, `${n.slice(0, 3)}.${n.slice(3, 6)}.${n.slice(6)}`, `%2B${e164.slice(1)}`]) out.add(p);
    const cad = c.call_analysis?.custom_analysis_data ?? {};
    for (const k of ['caller_name', 'caller_address', 'caller_email', 'issue_summary']) if (cad[k]) out.add(cad[k]);
    if (cad.caller_name) for (const part of String(cad.caller_name).split(' ')) out.add(part);
    if (cad.caller_address) out.add(String(cad.caller_address).split(',')[0]);
    if (c.call_analysis?.call_summary) out.add(c.call_analysis.call_summary);
    // Every sentence of the transcript (long enough to be the caller's words, not "Yes.").
    for (const t of c.transcript_object ?? []) {
      for (const s of String(t.content).split(/(?<=[.?!])\s+/)) if (s.length >= 12) out.add(s);
    }
  }
  return [...out];
}

test('a full call flow at LOG_LEVEL=trace writes no caller phone, name, address or transcript text to the logs', async () => {
  const phone = '+15125550100';
  const loc = { ...(await createLocation(owner, { name: 'Acme Heating & Air', timezone: 'America/Chicago', service_phone: phone, owner_cell: '+12125550100' })), phone } as VoiceLocation;
  await callFn(owner, 'admin.member_invite', [loc.id, 'owner@acme.test', 'owner', 'Olive Owner']);
  await connectSlack(apiPool, loc.id, rx.slack.url);
  const { token } = await mintKey(owner, loc.id);
  // Transcripts kept as spoken, so the search covers every sentence a caller said.
  await owner.query('update app.privacy_settings set redact_sensitive_data = false where location_id = $1', [loc.id]);

  const [port, adminPort] = [await freePort(), await freePort()];
  const svc = await startService({
    DATABASE_URL: db.url, PORT: String(port), HOST: '127.0.0.1', ADMIN_PORT: String(adminPort), LOG_LEVEL: 'trace',
    // As PostGraphile's start-up line advises for development: it then prints more to the console.
    GRAPHILE_ENV: 'development',
    VOICE_WEBHOOK_SECRET: VOICE_SECRET, NODE_EXTRA_CA_CERTS: rx.pki.caFile, WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
    ...rx.env,
  });
  const base = `http://127.0.0.1:${port}`;
  try {
    const ep = await request(base, 'POST', `/api/v1/locations/${loc.id}/webhook-endpoints`, {
      token, body: { url: rx.hooks.url, events: ['call.emergency', 'call.ended', 'lead.created', 'booking.created'] },
    });
    expect(ep.status).toBe(201);

    // Before the call: the agent's variables for this caller.
    const analysed = voiceFixture('card-payment', loc);
    const inbound = voiceFixture('inbound', loc);
    inbound.call_inbound.from_number = analysed.call.from_number;
    expect((await postVoice(base, 'inbound', inbound)).status).toBe(200);
    // The call starts, then ends analysed (settled in the request).
    const started = structuredClone(analysed);
    started.event = 'call_started';
    delete started.call.call_analysis;
    delete started.call.transcript;
    delete started.call.transcript_object;
    expect((await postVoice(base, 'post-call', started)).status).toBe(200);
    expect((await postVoice(base, 'post-call', analysed)).status).toBe(200);
    // A second caller's call ends without analysis; the worker settles it (finalize_call, made due now).
    const unanalysed = voiceFixture('analysis-missing-call-ended', loc);
    const ended = await postVoice(base, 'post-call', unanalysed);
    expect(ended.status).toBe(200);
    await owner.query(`update graphile_worker._private_jobs set run_at = now() where key = $1`, [`finalize_call:${ended.body.data.call_id}`]);

    await waitFor(async () => {
      const { rows: [r] } = await owner.query(
        `select (select count(*) from app.webhook_deliveries where location_id = $1 and status = 'delivered')::int as delivered,
                (select count(*) from app.notifications where location_id = $1 and status = 'pending')::int as pending,
                (select count(*) from app.notifications where location_id = $1)::int as total,
                (select count(*) from app.calls where location_id = $1 and finalized_at is not null)::int as settled`, [loc.id]);
      return r.delivered >= 5 && r.total >= 7 && r.pending === 0 && r.settled === 2;
    }, 'deliveries, notifications and both calls settled', 45000);
    expect(rx.smtp.messages.length).toBeGreaterThan(0);
    expect(rx.sms.received.length).toBeGreaterThan(0);

    // REST reads, with the caller's phone in query strings too.
    const calls = await request(base, 'GET', `/api/v1/locations/${loc.id}/calls?outcome=booked`, { token });
    expect(calls.status).toBe(200);
    const callId = calls.body.data[0].id;
    expect((await request(base, 'GET', `/api/v1/locations/${loc.id}/calls/${callId}`, { token })).status).toBe(200);
    const leads = await request(base, 'GET', `/api/v1/locations/${loc.id}/leads`, { token });
    expect(leads.status).toBe(200);
    expect((await request(base, 'GET', `/api/v1/locations/${loc.id}/leads/${leads.body.data[0].id}`, { token })).status).toBe(200);
    for (const q of [`caller-data?phone=${encodeURIComponent(analysed.call.from_number)}`, `calls?phone=${encodeURIComponent(analysed.call.from_number)}`]) {
      await fetch(`${base}/api/v1/locations/${loc.id}/${q}`, { headers: { authorization: `Bearer ${token}` } }).then((r) => r.text());
    }

    // Staff GraphQL requests that carry the caller's data in values PostGraphile prints to the
    // console when it refuses them: a forged node id, a forged cursor, and a subscription (its
    // planning error's stack).
    const staff = (await mintMember(owner, 'admin', 'logs@staff.example.net')).token;
    const forged = Buffer.from(JSON.stringify(['customers', `${analysed.call.from_number} Marcus Bell`])).toString('base64');
    const admin = `http://127.0.0.1:${adminPort}`;
    expect((await gqlAt(admin, staff, `{ node(id: "${forged}") { id } }`)).status).toBe(200);
    expect((await gqlAt(admin, staff, `{ allCalls(first: 1, after: "${forged}") { totalCount } }`)).status).toBeLessThan(500);
    expect((await gqlAt(admin, staff, 'subscription { __typename }')).status).toBeLessThan(500);
  } finally {
    svc.child.kill('SIGTERM');
    await svc.exited;
  }

  const lines = svc.output().split('\n').filter(Boolean);
  // Verbose for real: access lines, the worker's debug lines (webhook attempts, graphile-worker) and trace.
  expect(lines.filter((l) => l.includes('"msg":"request completed"')).length).toBeGreaterThanOrEqual(10);
  expect(lines.some((l) => l.includes('"msg":"webhook attempt"'))).toBe(true);
  expect(lines.some((l) => l.includes('"msg":"finalize_call done"'))).toBe(true);
  expect(lines.some((l) => l.includes('"level":20'))).toBe(true);
  expect(lines.some((l) => l.includes('PostGraphile wrote to the console; withheld'))).toBe(true);

  const needles = needlesOf(voiceFixture('card-payment', loc).call, voiceFixture('analysis-missing-call-ended', loc).call);
  expect(needles).toEqual(expect.arrayContaining(['+15125550143', '(512) 555-0143', '512-555-0143', 'Marcus', 'Bell', '2207 Cedar Hollow Lane',
    'Our furnace quit and it\'s twenty degrees in the house.', '+15125550199']));
  const hits = lines.flatMap((l) => needles.filter((n) => l.includes(n)).map((n) => `${n} in ${l.slice(0, 300)}`));
  expect(hits).toEqual([]);
}, 120_000);

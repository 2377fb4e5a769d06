/**
 * Redaction at ingestion through the real voice route (docs/privacy.md "Redaction at ingestion"):
 * a Retell-shaped call in which the caller reads a card number digit by digit, its expiry and
 * security code in answer to the agent, and an SSN, signed with retell-sdk. Every stored copy
 * (call, turns and words, customer, lead, booking, events and their webhook bodies) and every
 * rendered notification (e-mail over SMTP, SMS, Slack) holds the replacements; phone numbers,
 * the address, prices, the appointment and numbers failing Luhn stay as spoken. A location that
 * turned redaction off keeps the call as received.
 */
import { startFanoutReceivers, type FanoutReceivers } from '../support/receivers.js';
import type pg from 'pg';
import { callFn } from '../../src/db/pools.js';
import { mintKey, request, startTestApi, type TestApi } from '../support/harness.js';
import { decodeQuotedPrintable } from '../support/smtp.js';
import { postVoice, VOICE_SECRET, voiceFixture, voiceLocation, type VoiceLocation } from '../platform/support.js';
import { startTestWorker, waitFor } from '../webhooks/support.js';
import { connectSlack } from '../notify/support.js';
import { asSpoken, KEPT, leaks, redactedFixture } from './support.js';

let rx: FanoutReceivers;
let t: TestApi;
let worker: Awaited<ReturnType<typeof startTestWorker>> | undefined;

const EVENTS = ['call.emergency', 'call.ended', 'lead.created', 'booking.created'];

beforeAll(async () => {
  rx = await startFanoutReceivers('red');
  t = await startTestApi({
    VOICE_WEBHOOK_SECRET: VOICE_SECRET,
    ...rx.env,
  });
  worker = await startTestWorker(t.cfg, t.db.url, rx.pki);
});

afterAll(async () => {
  await worker?.stop();
  await t?.close();
  await rx?.close();
});

/** A location with a webhook endpoint, Slack, an owner's inbox and cell: every copy a call makes. */
async function wiredLocation(): Promise<{ loc: VoiceLocation; token: string }> {
  const loc = await voiceLocation(t.owner, { owner_cell: '+12125550100' });
  await callFn(t.owner, 'admin.member_invite', [loc.id, `owner-${loc.slug}@acme.test`, 'owner', 'Olive Owner']);
  await connectSlack(t.apiPool, loc.id, rx.slack.url);
  const { token } = await mintKey(t.owner, loc.id);
  const ep = await request(t.baseUrl, 'POST', `/api/v1/locations/${loc.id}/webhook-endpoints`, { token, body: { url: rx.hooks.url, events: EVENTS } });
  expect(ep.status).toBe(201);
  return { loc, token };
}

/** Everything stored about a location's calls, as text, for the leak check. */
async function storedCopies(owner: pg.Pool, locationId: string) {
  const q = async (sql: string) => (await owner.query(sql, [locationId])).rows;
  return {
    calls: await q('select * from app.calls where location_id = $1'),
    customers: await q('select * from app.customers where location_id = $1'),
    leads: await q('select * from app.leads where location_id = $1'),
    bookings: await q('select * from app.bookings where location_id = $1'),
    events: await q('select type, data, body from app.events where location_id = $1 order by created_at, id'),
    notifications: await q('select event, channel, data from app.notifications where location_id = $1'),
    log: await q('select l.status, l.detail from app.notification_log l where l.location_id = $1'),
  };
}

const settledFor = (locationId: string) => async () => {
  const { rows } = await t.owner.query(
    `select (select count(*) from app.webhook_deliveries where location_id = $1 and status = 'delivered')::int as delivered,
            (select count(*) from app.notifications where location_id = $1 and status = 'pending')::int as pending,
            (select count(*) from app.notifications where location_id = $1)::int as total`, [locationId]);
  return rows[0].delivered >= EVENTS.length && rows[0].total >= 7 && rows[0].pending === 0;
};

test('card, expiry, security code and SSN are replaced in every stored, evented, delivered and notified copy; the rest stays', async () => {
  const { loc, token } = await wiredLocation();
  const body = voiceFixture('card-payment', loc);
  const expected = redactedFixture(body.call);
  const res = await postVoice(t.baseUrl, 'post-call', body);
  expect(res.status).toBe(200);
  expect(res.body.data).toMatchObject({ platform_status: 'analyzed', outcome: 'booked', finalized: true });
  await waitFor(settledFor(loc.id), 'webhooks delivered and notifications sent', 30000);

  // The call: transcript, every turn's content and words, the summaries.
  const stored = await storedCopies(t.owner, loc.id);
  const call = stored.calls[0];
  expect(call.transcript).toBe(expected.transcript);
  expect(call.transcript_turns.map((x: any) => x.content)).toEqual(expected.contents);
  expect(call.transcript_turns.map((x: any) => x.words.map((w: any) => w.word).join(' '))).toEqual(expected.contents);
  // The card read digit by digit over sixteen words is one word now, spanning their time.
  const cardTurn = call.transcript_turns[expected.cardTurn];
  const spokenWords = body.call.transcript_object[expected.cardTurn].words;
  expect(cardTurn.words).toEqual([spokenWords[0], { word: '[card ending 4242].', start: spokenWords[1].start, end: spokenWords.at(-1).end }]);
  expect(call.call_summary).toBe(expected.callSummary);
  expect(call.issue_summary).toBe(expected.issueSummary);
  expect(call.issue_summary).toBe('Furnace out, house at 20°F. Dispatch fee $149 paid by card [card ending 4242] exp [expiry], security code [security code].');

  // Copies: lead and booking notes, events (their data and the webhook body), notifications.
  expect(stored.leads.map((l: any) => l.notes)).toEqual([expected.issueSummary]);
  expect(stored.bookings.map((b: any) => b.notes)).toEqual([expected.issueSummary]);
  expect(stored.events.map((e: any) => e.type).sort()).toEqual([...EVENTS].sort());
  expect(stored.events.find((e: any) => e.type === 'call.ended').data.issue_summary).toBe(expected.issueSummary);
  expect(JSON.parse(stored.events.find((e: any) => e.type === 'lead.created').body).data.notes).toBe(expected.issueSummary);
  expect(leaks(JSON.stringify(stored))).toEqual([]);

  // What left the building: webhook bodies, e-mails, SMS, Slack.
  const mine = rx.hooks.received.filter((r) => r.body.includes(loc.id));
  expect(mine.map((r) => r.headers['svc-event']).sort()).toEqual([...EVENTS].sort());
  const sent = [
    ...mine.map((r) => r.body),
    ...rx.smtp.messages.filter((m) => m.to.includes(`owner-${loc.slug}@acme.test`)).map((m) => decodeQuotedPrintable(m.raw)),
    ...rx.sms.received.map((r) => new URLSearchParams(r.body).get('Body') ?? ''),
    ...rx.slack.received.map((r) => r.body),
  ];
  expect(leaks(sent.join('\n'))).toEqual([]);
  const emergencyMail = rx.smtp.messages.map((m) => decodeQuotedPrintable(m.raw)).find((m) => m.includes('Emergency call') && m.includes(`owner-${loc.slug}`));
  expect(emergencyMail?.replace(/\s+/g, ' ')).toContain('[card ending 4242] exp [expiry], security code [security code]');
  const smsBodies = rx.sms.received.map((r) => new URLSearchParams(r.body).get('Body') ?? '');
  expect(smsBodies.some((b) => b.includes('[card ending 4242]'))).toBe(true);

  // What must stay as spoken: phones, the address, prices, the appointment, numbers failing Luhn.
  for (const k of KEPT) expect(call.transcript).toContain(k);
  expect(call.call_summary).toContain('4417 1234 5678 9112');
  expect(call.caller_address).toBe('2207 Cedar Hollow Lane, Austin, TX 78745');
  expect(stored.bookings[0]).toMatchObject({ address: '2207 Cedar Hollow Lane, Austin, TX 78745', scheduled_time: '19:30' });

  // The REST read shows the same.
  const detail = await request(t.baseUrl, 'GET', `/api/v1/locations/${loc.id}/calls/${call.id}`, { token });
  expect(detail.status).toBe(200);
  expect(detail.body.data.transcript).toBe(expected.transcript);
  expect(detail.body.data.issue_summary).toBe(expected.issueSummary);

  // A replay of the same delivery changes nothing (the redacted copy equals what is stored).
  const before = (await t.owner.query('select updated_at from app.calls where id = $1', [call.id])).rows[0].updated_at;
  expect((await postVoice(t.baseUrl, 'post-call', body)).status).toBe(200);
  expect((await t.owner.query('select updated_at from app.calls where id = $1', [call.id])).rows[0].updated_at).toEqual(before);
});

test('call_ended before the analysis: the unsettled call is stored redacted too', async () => {
  const loc = await voiceLocation(t.owner);
  const ended = voiceFixture('card-payment', loc);
  ended.event = 'call_ended';
  delete ended.call.call_analysis;
  expect((await postVoice(t.baseUrl, 'post-call', ended)).status).toBe(200);
  const expected = redactedFixture(ended.call);
  const { rows } = await t.owner.query('select transcript, transcript_turns, finalized_at from app.calls where location_id = $1', [loc.id]);
  expect(rows[0].finalized_at).toBeNull();
  expect(rows[0].transcript).toBe(expected.transcript);
  expect(leaks(JSON.stringify(rows))).toEqual([]);
});

test('a location with redaction off keeps the call exactly as spoken', async () => {
  const { loc } = await wiredLocation();
  await t.owner.query('update app.privacy_settings set redact_sensitive_data = false where location_id = $1', [loc.id]);
  const body = voiceFixture('card-payment', loc);
  expect((await postVoice(t.baseUrl, 'post-call', body)).status).toBe(200);
  await waitFor(settledFor(loc.id), 'webhooks delivered and notifications sent', 30000);
  const stored = await storedCopies(t.owner, loc.id);
  const call = stored.calls[0];
  expect(call.transcript).toBe(body.call.transcript);
  expect(call.transcript_turns).toEqual(body.call.transcript_object);
  expect(call.call_summary).toBe(body.call.call_analysis.call_summary);
  expect(call.issue_summary).toBe(body.call.call_analysis.custom_analysis_data.issue_summary);
  expect(stored.leads[0].notes).toBe(body.call.call_analysis.custom_analysis_data.issue_summary);
  expect(leaks(JSON.stringify(stored))).toEqual(asSpoken);
  const mine = rx.hooks.received.filter((r) => r.body.includes(loc.id));
  expect(mine.find((r) => r.headers['svc-event'] === 'lead.created')!.body).toContain('4242-4242-4242-4242');
});

test('the setting is per location: another location of the same service still redacts', async () => {
  const off = await voiceLocation(t.owner);
  await t.owner.query('update app.privacy_settings set redact_sensitive_data = false where location_id = $1', [off.id]);
  const on = await voiceLocation(t.owner);
  for (const loc of [off, on]) expect((await postVoice(t.baseUrl, 'post-call', voiceFixture('card-payment', loc))).status).toBe(200);
  const transcriptOf = async (id: string) => (await t.owner.query('select transcript from app.calls where location_id = $1', [id])).rows[0].transcript;
  expect(await transcriptOf(off.id)).toContain('4 2 4 2 4 2 4 2 4 2 4 2 4 2 4 2');
  expect(await transcriptOf(on.id)).toContain('[card ending 4242]');
});

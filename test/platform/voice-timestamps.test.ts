/**
 * Implausible call times never reach the row as such (docs/voice.md "Implausible timestamps"):
 * before 2000, more than a day ahead, an end before the start, a duration over a day are dropped
 * (the row keeps what it had) and the rest of the webhook is stored. Payloads signed with
 * retell-sdk's sign (postVoice).
 */
import { EARLIEST_CALL_MS } from '../../src/http/platform/voice-payloads.js';
import { mintKey, request, startTestApi, type TestApi } from '../support/harness.js';
import { callRow, postVoice, VOICE_SECRET, voiceFixture, voiceLocation, type VoiceLocation } from './support.js';

let t: TestApi;
let loc: VoiceLocation;
let token: string;

beforeAll(async () => {
  t = await startTestApi({ VOICE_WEBHOOK_SECRET: VOICE_SECRET });
  loc = await voiceLocation(t.owner);
  ({ token } = await mintKey(t.owner, loc.id));
});
afterAll(() => t.close());

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

interface Times {
  start_timestamp?: number | null;
  end_timestamp?: number | null;
  duration_ms?: number | null;
}

/** A call_ended webhook (no analysis) with these times; the fixture's own times removed first. */
function ended(times: Times): any {
  const body = voiceFixture('analysis-missing-call-ended', loc);
  delete body.call.start_timestamp;
  delete body.call.end_timestamp;
  delete body.call.duration_ms;
  Object.assign(body.call, times);
  return body;
}

/** Posts and returns the stored row's times (ISO strings) plus the transcript, to show the rest was kept. */
async function store(body: any) {
  const res = await postVoice(t.baseUrl, 'post-call', body);
  expect(res.status).toBe(200);
  const row = await callRow(t.owner, loc.id, body.call.call_id);
  return {
    started_at: row.started_at ? row.started_at.toISOString() : null,
    ended_at: row.ended_at ? row.ended_at.toISOString() : null,
    duration_sec: row.duration_sec,
    transcript: row.transcript,
  };
}

// Times relative to the test's clock; `now` is read once per case.
const cases: Array<[string, (now: number) => Times, (now: number) => { started_at: number | null; ended_at: number | null; duration_sec: number | null }]> = [
  ['start = Number.MAX_SAFE_INTEGER (year 287396)', (now) => ({ start_timestamp: 9007199254740991, end_timestamp: now - HOUR, duration_ms: 62_000 }),
    (now) => ({ started_at: null, ended_at: now - HOUR, duration_sec: 62 })],
  ['start = 0 (1970)', (now) => ({ start_timestamp: 0, end_timestamp: now - HOUR }),
    (now) => ({ started_at: null, ended_at: now - HOUR, duration_sec: null })],
  ['start just before 2000', (now) => ({ start_timestamp: EARLIEST_CALL_MS - 1, end_timestamp: now - HOUR }),
    (now) => ({ started_at: null, ended_at: now - HOUR, duration_sec: null })],
  ['start exactly 2000-01-01 (kept)', () => ({ start_timestamp: EARLIEST_CALL_MS, end_timestamp: EARLIEST_CALL_MS + 60_000 }),
    () => ({ started_at: EARLIEST_CALL_MS, ended_at: EARLIEST_CALL_MS + 60_000, duration_sec: 60 })],
  ['start two days ahead', (now) => ({ start_timestamp: now + 2 * DAY }),
    () => ({ started_at: null, ended_at: null, duration_sec: null })],
  ['start an hour ahead (clock skew, kept)', (now) => ({ start_timestamp: now + HOUR, end_timestamp: now + HOUR + 30_000 }),
    (now) => ({ started_at: now + HOUR, ended_at: now + HOUR + 30_000, duration_sec: 30 })],
  ['end = 0 (would be 1970)', (now) => ({ start_timestamp: now - 10 * 60_000, end_timestamp: 0, duration_ms: 45_000 }),
    (now) => ({ started_at: now - 10 * 60_000, ended_at: null, duration_sec: 45 })],
  ['end before start (end dropped, start kept)', (now) => ({ start_timestamp: now - 10 * 60_000, end_timestamp: now - 20 * 60_000, duration_ms: 62_000 }),
    (now) => ({ started_at: now - 10 * 60_000, ended_at: null, duration_sec: 62 })],
  ['end two days ahead', (now) => ({ start_timestamp: now - 60_000, end_timestamp: now + 2 * DAY }),
    (now) => ({ started_at: now - 60_000, ended_at: null, duration_sec: null })],
  ['duration over a day', () => ({ duration_ms: 9_000_000_000_000_000 }),
    () => ({ started_at: null, ended_at: null, duration_sec: null })],
];

test.each(cases)('%s', async (_what, times, expected) => {
  const now = Date.now();
  const body = ended(times(now));
  const got = await store(body);
  const want = expected(now);
  expect(got).toEqual({
    started_at: iso(want.started_at), ended_at: iso(want.ended_at), duration_sec: want.duration_sec, transcript: body.call.transcript,
  });
  // Whatever was stored reads back through the API as ISO 8601 (four-digit year).
  const row = await callRow(t.owner, loc.id, body.call.call_id);
  const detail = await request(t.baseUrl, 'GET', `/api/v1/locations/${loc.id}/calls/${row.id}`, { token });
  expect(detail.status).toBe(200);
  for (const k of ['started_at', 'ended_at'] as const) {
    if (detail.body.data[k] !== null) expect(detail.body.data[k]).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
  }
});

test('a later webhook with an implausible start keeps the stored start', async () => {
  const now = Date.now();
  const started = voiceFixture('call-started', loc);
  started.call.start_timestamp = now - 5 * 60_000;
  expect((await postVoice(t.baseUrl, 'post-call', started)).status).toBe(200);
  const later = ended({ start_timestamp: 9007199254740991, end_timestamp: now - 60_000 });
  later.call.call_id = started.call.call_id;
  const got = await store(later);
  expect(got).toMatchObject({ started_at: iso(now - 5 * 60_000), ended_at: iso(now - 60_000), duration_sec: 240 });
});

test('a timestamp that is not a non-negative integer is still a malformed field → 400', async () => {
  for (const bad of [-1, 1.5, '1795276800000']) {
    const res = await postVoice(t.baseUrl, 'post-call', ended({ start_timestamp: bad as number }));
    expect([bad, res.status, res.body.error?.code]).toEqual([bad, 400, 'validation_error']);
  }
});

test('a transfer event with an implausible time is recorded at our clock’s time, and reads back as ISO 8601', async () => {
  for (const ts of [9007199254740991, 8640000000000001, 0]) {
    const body = voiceFixture('emergency-transfer-started', loc);
    body.timestamp = ts;
    const before = Date.now();
    expect((await postVoice(t.baseUrl, 'post-call', body)).status).toBe(200);
    const row = await callRow(t.owner, loc.id, body.call.call_id);
    const detail = await request(t.baseUrl, 'GET', `/api/v1/locations/${loc.id}/calls/${row.id}`, { token });
    expect(detail.body.data.transfers).toHaveLength(1);
    const at = detail.body.data.transfers[0].at as string;
    expect(at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    expect(Date.parse(at)).toBeGreaterThanOrEqual(before - 1000);
  }
});

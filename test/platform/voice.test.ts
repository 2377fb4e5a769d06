import { startTestApi, type TestApi } from '../support/harness.js';
import { count, postVoice, staleVoiceSignature, VOICE_SECRET, voiceFixture, voiceLocation, type VoiceLocation } from './support.js';

let t: TestApi;

beforeAll(async () => {
  t = await startTestApi({ VOICE_WEBHOOK_SECRET: VOICE_SECRET });
});
afterAll(() => t.close());


describe('POST /api/voice/inbound', () => {
  test('answers the agent’s dynamic variables (all strings) and the location id', async () => {
    const loc = await voiceLocation(t.owner);
    await t.owner.query(`update app.locations set service_areas = '{Austin,Round Rock}' where id = $1`, [loc.id]);
    await t.owner.query(`update app.agent_settings set transfer_number = '+15125550999', emergency_keywords = '{gas,smoke}' where location_id = $1`, [loc.id]);
    await t.owner.query(`insert into app.business_hours (location_id, day, open, close) values ($1, 1, '08:00', '17:00'), ($1, 2, '08:00', '12:00'), ($1, 2, '13:00', '17:00')`, [loc.id]);
    await t.owner.query(`insert into app.faqs (location_id, question, answer) values ($1, 'Do you work weekends?', 'Saturdays for emergencies.')`, [loc.id]);
    await t.owner.query(`insert into app.pricebook_items (location_id, service_name, price, note) values ($1, 'Diagnostic visit', '$89', 'waived with repair')`, [loc.id]);

    const res = await postVoice(t.baseUrl, 'inbound', voiceFixture('inbound', loc));
    expect(res.status).toBe(200);
    const vars = res.body.call_inbound.dynamic_variables;
    expect(res.body.call_inbound.metadata).toEqual({ location_id: loc.id });
    expect(vars).toEqual({
      business_name: 'Acme Heating & Air',
      timezone: 'America/Chicago',
      is_open_now: expect.stringMatching(/^(true|false)$/),
      business_hours: 'Mon: 08:00-17:00; Tue: 08:00-12:00, 13:00-17:00; Wed: closed; Thu: closed; Fri: closed; Sat: closed; Sun: closed',
      service_areas: 'Austin, Round Rock',
      faqs: 'Q: Do you work weekends?\nA: Saturdays for emergencies.',
      pricebook: 'Diagnostic visit: $89 (waived with repair)',
      transfer_number: '+15125550999',
      emergency_keywords: 'gas, smoke',
      booking_enabled: 'true',
      caller_name: '',
      is_returning_customer: 'false',
      next_open_window: expect.stringMatching(/^(Monday|Tuesday), [A-Z][a-z]+ \d{1,2}, between /),
      caller_upcoming_appointment: '',
    });
    for (const v of Object.values(vars)) expect(typeof v).toBe('string');
    expect(await count(t.owner, 'select 1 from app.calls where location_id = $1', [loc.id])).toBe(0);
  });

  test('is_open_now follows the location’s hours in its own timezone', async () => {
    const loc = await voiceLocation(t.owner);
    await t.owner.query(`insert into app.business_hours (location_id, day, open, close) select $1, d, '00:00', '23:59' from generate_series(0, 6) d`, [loc.id]);
    const open = await postVoice(t.baseUrl, 'inbound', voiceFixture('inbound', loc));
    const { rows } = await t.owner.query(`select to_char(now() at time zone 'America/Chicago', 'HH24:MI') = '23:59' as edge`);
    if (!rows[0].edge) expect(open.body.call_inbound.dynamic_variables.is_open_now).toBe('true');
    await t.owner.query(`delete from app.business_hours where location_id = $1`, [loc.id]);
    const closed = await postVoice(t.baseUrl, 'inbound', voiceFixture('inbound', loc));
    expect(closed.body.call_inbound.dynamic_variables.is_open_now).toBe('false');
  });

  test('a returning caller is recognised by name', async () => {
    const loc = await voiceLocation(t.owner);
    expect((await postVoice(t.baseUrl, 'post-call', voiceFixture('booked', loc))).status).toBe(200);
    const res = await postVoice(t.baseUrl, 'inbound', voiceFixture('inbound', loc));
    expect(res.body.call_inbound.dynamic_variables).toMatchObject({ caller_name: 'Dana Whitfield', is_returning_customer: 'true' });
  });

  test('unknown to_number → 404 not_found; malformed → 400', async () => {
    const loc = await voiceLocation(t.owner);
    const body = voiceFixture('inbound', loc);
    body.call_inbound.to_number = '+15125550000';
    const res = await postVoice(t.baseUrl, 'inbound', body);
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe('not_found');
    body.call_inbound.to_number = 'not-a-phone';
    expect((await postVoice(t.baseUrl, 'inbound', body)).body.error.code).toBe('validation_error');
    const noEvent = { call_inbound: { to_number: loc.phone } };
    expect((await postVoice(t.baseUrl, 'inbound', noEvent)).status).toBe(400);
  });
});

describe('signatures', () => {
  let loc: VoiceLocation;
  beforeAll(async () => {
    loc = await voiceLocation(t.owner);
  });
  const nothingStored = async () => {
    expect(await count(t.owner, 'select 1 from app.calls where location_id = $1', [loc.id])).toBe(0);
    expect(await count(t.owner, 'select 1 from app.events where location_id = $1', [loc.id])).toBe(0);
  };

  test('missing, malformed, wrong-key and tampered signatures → 401 invalid_signature, nothing stored', async () => {
    const body = voiceFixture('booked', loc);
    const raw = JSON.stringify(body);
    const good = await (await import('retell-sdk')).sign(raw, VOICE_SECRET);
    const wrongKey = await (await import('retell-sdk')).sign(raw, 'some-other-key');
    for (const signature of [null, '', 'garbage', `v=${Date.now()},d=abc`, wrongKey]) {
      const res = await postVoice(t.baseUrl, 'post-call', body, { signature, raw });
      expect(res.status).toBe(401);
      expect(res.body).toEqual({ error: { code: 'invalid_signature', message: expect.any(String), details: {} } });
    }
    const tampered = raw.replace('"booked"', '"lead"');
    expect((await postVoice(t.baseUrl, 'post-call', null, { signature: good, raw: tampered })).status).toBe(401);
    // Re-serialised JSON (same data, other bytes) does not verify either: the raw bytes are signed.
    const spaced = JSON.stringify(body, null, 1);
    expect((await postVoice(t.baseUrl, 'post-call', null, { signature: good, raw: spaced })).status).toBe(401);
    await nothingStored();
  });

  test('stale signature (older than 5 minutes, or from the future) → 401; inbound too', async () => {
    const body = voiceFixture('booked', loc);
    const raw = JSON.stringify(body);
    for (const age of [6 * 60_000, -6 * 60_000]) {
      const signature = await staleVoiceSignature(raw, age);
      expect((await postVoice(t.baseUrl, 'post-call', body, { signature, raw })).status).toBe(401);
    }
    const inbound = JSON.stringify(voiceFixture('inbound', loc));
    const res = await postVoice(t.baseUrl, 'inbound', null, { raw: inbound, signature: await staleVoiceSignature(inbound, 10 * 60_000) });
    expect(res.status).toBe(401);
    // A fresh signature a few seconds old is fine.
    expect((await postVoice(t.baseUrl, 'post-call', body, { signature: await staleVoiceSignature(raw, 5_000), raw })).status).toBe(200);
  });

  test('signed but not JSON → 400 invalid_json; signed but wrong shape → 400 validation_error', async () => {
    const r1 = await postVoice(t.baseUrl, 'post-call', null, { raw: '{"event":' });
    expect(r1.status).toBe(400);
    expect(r1.body.error.code).toBe('invalid_json');
    const r2 = await postVoice(t.baseUrl, 'post-call', { event: 'call_ended', call: { from_number: loc.phone } });
    expect(r2.status).toBe(400);
    expect(r2.body.error.code).toBe('validation_error');
    expect(r2.body.error.details.issues[0].path).toBe('call.call_id');
    const r3 = await postVoice(t.baseUrl, 'post-call', { event: 'call_ended', call: { call_id: 'x', start_timestamp: 'yesterday' } });
    expect(r3.status).toBe(400);
  });

  test('a body over 5 MiB → 413 payload_too_large, nothing stored', async () => {
    const body = voiceFixture('booked', loc);
    body.call.transcript = 'x'.repeat(5 * 1024 * 1024 + 10);
    const res = await postVoice(t.baseUrl, 'post-call', body);
    expect(res.status).toBe(413);
    expect(res.body.error.code).toBe('payload_too_large');
    expect(await count(t.owner, 'select 1 from app.calls where platform_call_id = $1', [body.call.call_id])).toBe(0);
  });

  test('unset VOICE_WEBHOOK_SECRET → 503 not_configured', async () => {
    const bare = await startTestApi({});
    try {
      for (const route of ['inbound', 'post-call'] as const) {
        const res = await postVoice(bare.baseUrl, route, voiceFixture('booked', loc));
        expect(res.status).toBe(503);
        expect(res.body.error.code).toBe('not_configured');
      }
    } finally {
      await bare.close();
    }
  });

  test('other methods → 405; unknown post-call event → 200 ignored', async () => {
    const res = await fetch(`${t.baseUrl}/api/voice/post-call`);
    expect(res.status).toBe(405);
    expect(res.headers.get('allow')).toBe('POST');
    const body = voiceFixture('booked', loc);
    body.event = 'call_something_new';
    const ign = await postVoice(t.baseUrl, 'post-call', body);
    expect(ign.status).toBe(200);
    expect(ign.body.data.status).toBe('ignored');
  });
});


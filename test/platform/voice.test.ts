import { Logger, run } from 'graphile-worker';
import { callFn } from '../../src/db/pools.js';
import { loadTasks } from '../../src/worker/index.js';
import finalizeCall from '../../tasks/finalize_call.js';
import { startTestApi, testLog, type TestApi } from '../support/harness.js';
import {
  callRow, count, events, postVoice, staleVoiceSignature, types, VOICE_SECRET, voiceFixture, voiceLocation, type VoiceLocation,
} from './support.js';

let t: TestApi;

beforeAll(async () => {
  t = await startTestApi({ VOICE_WEBHOOK_SECRET: VOICE_SECRET });
});
afterAll(() => t.close());

const jobsFor = (callId: string) =>
  t.owner.query(`select j.key, j.run_at, t.identifier as task_identifier, j.payload from graphile_worker._private_jobs j join graphile_worker._private_tasks t on t.id = j.task_id where j.key = $1`, [`finalize_call:${callId}`]).then((r) => r.rows);

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

describe('POST /api/voice/post-call outcomes', () => {
  test('booked: call, customer, booked lead, scheduled booking; lead.created, booking.created, call.ended', async () => {
    const loc = await voiceLocation(t.owner);
    const body = voiceFixture('booked', loc);
    const res = await postVoice(t.baseUrl, 'post-call', body);
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ outcome: 'booked', finalized: true, platform_status: 'analyzed' });

    const c = await callRow(t.owner, loc.id, body.call.call_id);
    expect(c).toMatchObject({
      outcome: 'booked', urgency_level: 2, is_emergency: false, is_returning_customer: false,
      caller_phone: '+15125550143', caller_name: 'Dana Whitfield', duration_sec: 187,
      service_type: 'Furnace repair', appointment_time: '09:30', disconnection_reason: 'user_hangup',
      platform_status: 'analyzed', user_sentiment: 'Positive', in_voicemail: false,
    });
    expect(c.started_at.toISOString()).toBe(new Date(body.call.start_timestamp).toISOString());
    expect(c.ended_at.toISOString()).toBe(new Date(body.call.end_timestamp).toISOString());
    expect(c.transcript_turns).toHaveLength(8);
    expect(c.transcript_turns[0]).toMatchObject({ role: 'agent', words: expect.any(Array) });
    expect(c.summary.caller_phone).toBe('***-***-0143');

    const { rows: [cust] } = await t.owner.query(`select * from app.customers where location_id = $1`, [loc.id]);
    expect(cust).toMatchObject({ phone: '+15125550143', name: 'Dana Whitfield', call_count: 1, email: 'dana.whitfield@example.com' });
    expect(c.customer_id).toBe(cust.id);
    const { rows: leads } = await t.owner.query(`select * from app.leads where call_id = $1`, [c.id]);
    expect(leads).toHaveLength(1);
    expect(leads[0]).toMatchObject({ status: 'booked', name: 'Dana Whitfield', phone: '+15125550143', estimated_value: '189', customer_id: cust.id });
    const { rows: bookings } = await t.owner.query(`select *, scheduled_date::text as d from app.bookings where call_id = $1`, [c.id]);
    expect(bookings).toHaveLength(1);
    expect(bookings[0]).toMatchObject({ status: 'scheduled', d: '2026-12-02', scheduled_time: '09:30', lead_id: leads[0].id });

    const evs = await events(t.owner, loc.id);
    expect(types(evs)).toEqual(['booking.created', 'call.ended', 'lead.created']);
    expect(evs.find((e) => e.type === 'call.ended')!.data).toEqual(c.summary);
    expect(evs.find((e) => e.type === 'lead.created')!.data).toMatchObject({ id: leads[0].id, call_id: c.id, status: 'booked' });

    // Replay: nothing changes, nothing fires.
    const replay = await postVoice(t.baseUrl, 'post-call', body);
    expect(replay.status).toBe(200);
    expect((await events(t.owner, loc.id)).length).toBe(3);
    const again = await callRow(t.owner, loc.id, body.call.call_id);
    expect(again.updated_at.getTime()).toBe(c.updated_at.getTime());
    expect(await count(t.owner, 'select 1 from app.leads where location_id = $1', [loc.id])).toBe(1);
    expect(await count(t.owner, 'select 1 from app.bookings where location_id = $1', [loc.id])).toBe(1);

    // The same caller again is a returning customer.
    const second = voiceFixture('booked', loc);
    second.call.call_analysis.custom_analysis_data = { outcome: 'other' };
    await postVoice(t.baseUrl, 'post-call', second);
    const c2 = await callRow(t.owner, loc.id, second.call.call_id);
    expect(c2).toMatchObject({ is_returning_customer: true, customer_id: cust.id, caller_name: 'Dana Whitfield', outcome: 'other' });
    const { rows: [cust2] } = await t.owner.query(`select call_count from app.customers where id = $1`, [cust.id]);
    expect(cust2.call_count).toBe(2);
  });

  test('warm transfer: transfer_started fires call.emergency once; analysis adds the lead and call.ended only', async () => {
    const loc = await voiceLocation(t.owner);
    const started = voiceFixture('emergency-transfer-started', loc);
    const callId = started.call.call_id;
    expect((await postVoice(t.baseUrl, 'post-call', started)).status).toBe(200);
    let evs = await events(t.owner, loc.id);
    expect(types(evs)).toEqual(['call.emergency']);
    const c0 = await callRow(t.owner, loc.id, callId);
    expect(evs[0].data).toEqual({ ...c0.summary, reason: 'warm_transfer', lead_id: null });
    expect(c0.is_emergency).toBe(true);

    await postVoice(t.baseUrl, 'post-call', started);
    expect((await events(t.owner, loc.id)).length).toBe(1);

    const analyzed = voiceFixture('emergency-transfer-analyzed', loc, { callId });
    const ar = await postVoice(t.baseUrl, 'post-call', analyzed);
    expect(ar.body).toMatchObject({ data: expect.anything() });
    evs = await events(t.owner, loc.id);
    expect(types(evs)).toEqual(['call.emergency', 'call.ended', 'lead.created']);
    const c = await callRow(t.owner, loc.id, callId);
    expect(c).toMatchObject({ outcome: 'transferred', urgency_level: 5, is_emergency: true, duration_sec: 72 });
    const { rows: leads } = await t.owner.query(`select status, urgency_level from app.leads where call_id = $1`, [c.id]);
    expect(leads).toEqual([{ status: 'new', urgency_level: 5 }]);
    expect(await count(t.owner, 'select 1 from app.calls where location_id = $1', [loc.id])).toBe(1);
  });

  test('urgency 5 without transfer: call.emergency with reason urgency and the lead id', async () => {
    const loc = await voiceLocation(t.owner);
    const body = voiceFixture('emergency-transfer-analyzed', loc);
    body.call.disconnection_reason = 'agent_hangup';
    body.call.call_analysis.custom_analysis_data.outcome = 'lead';
    await postVoice(t.baseUrl, 'post-call', body);
    const evs = await events(t.owner, loc.id);
    expect(types(evs)).toEqual(['call.emergency', 'call.ended', 'lead.created']);
    const lead = evs.find((e) => e.type === 'lead.created')!.data;
    expect(evs.find((e) => e.type === 'call.emergency')!.data).toMatchObject({ reason: 'urgency', lead_id: lead.id, is_emergency: true });
  });

  test('voicemail: outcome lead from in_voicemail, a new lead; lead.created and call.ended', async () => {
    const loc = await voiceLocation(t.owner);
    const body = voiceFixture('voicemail', loc);
    await postVoice(t.baseUrl, 'post-call', body);
    const c = await callRow(t.owner, loc.id, body.call.call_id);
    expect(c).toMatchObject({ outcome: 'lead', in_voicemail: true, caller_name: 'Priya Raman' });
    const { rows: leads } = await t.owner.query(`select status, name, service_type from app.leads where call_id = $1`, [c.id]);
    expect(leads).toEqual([{ status: 'new', name: 'Priya Raman', service_type: 'AC repair' }]);
    expect(types(await events(t.owner, loc.id))).toEqual(['call.ended', 'lead.created']);
  });

  test('dropped: a short user hang-up with nothing captured; only call.ended', async () => {
    const loc = await voiceLocation(t.owner);
    const body = voiceFixture('dropped', loc);
    await postVoice(t.baseUrl, 'post-call', body);
    const c = await callRow(t.owner, loc.id, body.call.call_id);
    expect(c).toMatchObject({ outcome: 'dropped', duration_sec: 6 });
    expect(await count(t.owner, 'select 1 from app.leads where location_id = $1', [loc.id])).toBe(0);
    expect(types(await events(t.owner, loc.id))).toEqual(['call.ended']);
  });

  test('platform spam detection: outcome spam, no lead and no customer; only call.ended', async () => {
    const loc = await voiceLocation(t.owner);
    const body = voiceFixture('dropped', loc);
    body.call.disconnection_reason = 'marked_as_spam';
    await postVoice(t.baseUrl, 'post-call', body);
    expect((await callRow(t.owner, loc.id, body.call.call_id)).outcome).toBe('spam');
    expect(await count(t.owner, 'select 1 from app.customers where location_id = $1', [loc.id])).toBe(0);
    expect(types(await events(t.owner, loc.id))).toEqual(['call.ended']);
  });

  test('call_started creates the row and fires nothing; call_analyzed then finalises it', async () => {
    const loc = await voiceLocation(t.owner);
    const started = voiceFixture('call-started', loc);
    const res = await postVoice(t.baseUrl, 'post-call', started);
    expect(res.body.data).toMatchObject({ platform_status: 'started', finalized: false });
    expect((await events(t.owner, loc.id)).length).toBe(0);
    // A late call_started after analysis does not move the call back.
    const analyzed = voiceFixture('booked', loc, { callId: started.call.call_id });
    await postVoice(t.baseUrl, 'post-call', analyzed);
    await postVoice(t.baseUrl, 'post-call', started);
    const c = await callRow(t.owner, loc.id, started.call.call_id);
    expect(c).toMatchObject({ platform_status: 'analyzed', outcome: 'booked', duration_sec: 187 });
    expect(types(await events(t.owner, loc.id))).toEqual(['booking.created', 'call.ended', 'lead.created']);
  });

  test('lenient analysis: unusable LLM values are dropped, not fatal', async () => {
    const loc = await voiceLocation(t.owner);
    const body = voiceFixture('booked', loc);
    Object.assign(body.call.call_analysis.custom_analysis_data, {
      urgency_level: '9', estimated_value: '$1,250.50', caller_email: 'not an email',
      appointment_date: '2026-02-30', appointment_time: '2:30 PM', outcome: 'Booked',
    });
    expect((await postVoice(t.baseUrl, 'post-call', body)).status).toBe(200);
    const c = await callRow(t.owner, loc.id, body.call.call_id);
    expect(c).toMatchObject({ urgency_level: 5, estimated_value: '1250.5', caller_email: null, appointment_date: null, appointment_time: '14:30', outcome: 'booked' });
    // booked without a valid date: a booked lead, no booking; urgency 5 → emergency.
    expect(types(await events(t.owner, loc.id))).toEqual(['call.emergency', 'call.ended', 'lead.created']);
  });

  test('10 concurrent identical call_analyzed → one call row, one lead, one call.ended', async () => {
    const loc = await voiceLocation(t.owner);
    const body = voiceFixture('booked', loc);
    const results = await Promise.all(Array.from({ length: 10 }, () => postVoice(t.baseUrl, 'post-call', body)));
    expect(results.map((r) => r.status)).toEqual(Array(10).fill(200));
    expect(await count(t.owner, 'select 1 from app.calls where location_id = $1', [loc.id])).toBe(1);
    expect(await count(t.owner, 'select 1 from app.leads where location_id = $1', [loc.id])).toBe(1);
    expect(await count(t.owner, 'select 1 from app.customers where location_id = $1 and call_count = 1', [loc.id])).toBe(1);
    expect(types(await events(t.owner, loc.id))).toEqual(['booking.created', 'call.ended', 'lead.created']);
  });

  test('a call first seen already analysed is written once, settled; a known call is finalised by one update', async () => {
    // Row versions one transaction writes to app.calls: the change of its pg_stat_xact_user_tables
    // counters across the call (read as a difference: counts not yet flushed may include earlier ones).
    const writes = async (payload: unknown) => {
      const c = await t.owner.connect();
      const counters = () => c.query(
        `select n_tup_ins::int as ins, n_tup_upd::int as upd from pg_stat_xact_user_tables where relid = 'app.calls'::regclass`)
        .then((r) => r.rows[0] as { ins: number; upd: number });
      try {
        await c.query('begin');
        const before = await counters();
        await c.query('select app.voice_post_call($1)', [payload]);
        const after = await counters();
        await c.query('commit');
        return { ins: after.ins - before.ins, upd: after.upd - before.upd };
      } finally {
        c.release();
      }
    };
    const loc = await voiceLocation(t.owner);
    const fresh = voiceFixture('booked', loc);
    expect(await writes(fresh)).toEqual({ ins: 1, upd: 0 });
    const row = await callRow(t.owner, loc.id, fresh.call.call_id);
    expect(row).toMatchObject({ outcome: 'booked', platform_status: 'analyzed' });
    expect(row.finalized_at).not.toBeNull();

    // call_ended without analysis stores the call; call_analyzed then updates its facts and settles it.
    const known = voiceFixture('booked', loc);
    expect(await writes(voiceFixture('analysis-missing-call-ended', loc, { callId: known.call.call_id }))).toEqual({ ins: 1, upd: 0 });
    expect(await writes(known)).toEqual({ ins: 0, upd: 2 });
  });

  test('a call for no known location → 404, nothing stored', async () => {
    const loc = await voiceLocation(t.owner);
    const body = voiceFixture('booked', loc);
    body.call.to_number = '+15125550001';
    body.call.metadata = {};
    const res = await postVoice(t.baseUrl, 'post-call', body);
    expect(res.status).toBe(404);
    expect(await count(t.owner, 'select 1 from app.calls where platform_call_id = $1', [body.call.call_id])).toBe(0);
  });

  test('metadata.location_id routes the call even when the number changed; same call id in two locations stays apart', async () => {
    const a = await voiceLocation(t.owner);
    const b = await voiceLocation(t.owner);
    const ba = voiceFixture('dropped', a);
    const bb = voiceFixture('dropped', b, { callId: ba.call.call_id });
    ba.call.to_number = '+15125550002';
    await postVoice(t.baseUrl, 'post-call', ba);
    await postVoice(t.baseUrl, 'post-call', bb);
    expect(await callRow(t.owner, a.id, ba.call.call_id)).toBeDefined();
    expect(await callRow(t.owner, b.id, ba.call.call_id)).toBeDefined();
    expect(types(await events(t.owner, a.id))).toEqual(['call.ended']);
    expect(types(await events(t.owner, b.id))).toEqual(['call.ended']);
  });
});

describe('blocklist', () => {
  test('a blocked caller is rejected, recorded as spam at once; its post-call attaches without a second call.ended', async () => {
    const loc = await voiceLocation(t.owner);
    await t.owner.query(`update app.agent_settings set blocked_numbers = '{+15125550666}' where location_id = $1`, [loc.id]);
    const res = await postVoice(t.baseUrl, 'inbound', voiceFixture('spam-inbound', loc));
    expect(res.status).toBe(200);
    expect(res.body.call_inbound.dynamic_variables).toEqual({ reject_call: 'true' });
    const rowId = res.body.call_inbound.metadata.call_row_id;
    expect(res.body.call_inbound.metadata.location_id).toBe(loc.id);

    const { rows: [row] } = await t.owner.query(`select *, app.call_summary_json(c) as summary from app.calls c where id = $1`, [rowId]);
    expect(row).toMatchObject({ outcome: 'spam', platform_status: 'rejected', caller_phone: '+15125550666' });
    expect(row.finalized_at).not.toBeNull();
    let evs = await events(t.owner, loc.id);
    expect(types(evs)).toEqual(['call.ended', 'spam.blocked']);
    expect(evs.find((e) => e.type === 'spam.blocked')!.data).toEqual({
      call_id: rowId, caller_phone: '***-***-0666', reason: 'blocklisted', blocked_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
    });
    expect(evs.find((e) => e.type === 'call.ended')!.data).toEqual(row.summary);

    const post = voiceFixture('spam-blocked-call-ended', loc, { rowId });
    expect((await postVoice(t.baseUrl, 'post-call', post)).status).toBe(200);
    const analyzed = { ...post, event: 'call_analyzed', call: { ...post.call, call_analysis: { call_summary: 'Rejected.', custom_analysis_data: {} } } };
    const ar = await postVoice(t.baseUrl, 'post-call', analyzed);
    expect(ar.body).toMatchObject({ data: expect.anything() });
    evs = await events(t.owner, loc.id);
    expect(evs).toHaveLength(2);
    expect(await count(t.owner, 'select 1 from app.calls where location_id = $1', [loc.id])).toBe(1);
    const { rows: [after] } = await t.owner.query(`select * from app.calls where id = $1`, [rowId]);
    expect(after).toMatchObject({ platform_call_id: post.call.call_id, outcome: 'spam', platform_status: 'rejected', disconnection_reason: 'call_rejected' });
    expect(await jobsFor(rowId)).toHaveLength(0);
    // A caller not on the list gets the normal answer.
    const ok = await postVoice(t.baseUrl, 'inbound', voiceFixture('inbound', loc));
    expect(ok.body.call_inbound.dynamic_variables.reject_call).toBeUndefined();
  });
});

describe('finalisation when call_analyzed never comes', () => {
  test('call_ended schedules finalize_call in 10 minutes (one job per call); the job settles the call', async () => {
    const loc = await voiceLocation(t.owner);
    const body = voiceFixture('analysis-missing-call-ended', loc);
    const res = await postVoice(t.baseUrl, 'post-call', body);
    expect(res.body.data).toMatchObject({ platform_status: 'ended', finalized: false });
    const c0 = await callRow(t.owner, loc.id, body.call.call_id);
    expect(c0.duration_sec).toBe(62);
    expect((await events(t.owner, loc.id)).length).toBe(0);

    const [job] = await jobsFor(c0.id);
    expect(job.task_identifier).toBe('finalize_call');
    expect(job.payload).toEqual({ call_id: c0.id });
    const { rows: [delay] } = await t.owner.query(`select extract(epoch from $1::timestamptz - now()) as s`, [job.run_at]);
    expect(Number(delay.s)).toBeGreaterThan(9 * 60);
    expect(Number(delay.s)).toBeLessThanOrEqual(10 * 60);

    // A replayed call_ended neither adds nor moves the job.
    await postVoice(t.baseUrl, 'post-call', body);
    const jobs = await jobsFor(c0.id);
    expect(jobs).toHaveLength(1);
    expect(jobs[0].run_at.getTime()).toBe(job.run_at.getTime());

    // Ten minutes later: run the worker once with the job made due.
    await t.owner.query(`update graphile_worker._private_jobs set run_at = now() - interval '1 minute' where key = $1`, [`finalize_call:${c0.id}`]);
    // A real worker (every task in tasks/) polls until the job is done.
    const taskList = await loadTasks({ cfg: t.cfg, log: testLog, pool: t.owner });
    const runner = await run({ pgPool: t.owner, taskList, noHandleSignals: true, pollInterval: 100, logger: new Logger(() => () => undefined) });
    try {
      for (let i = 0; i < 100 && (await jobsFor(c0.id)).length > 0; i++) await new Promise((r) => setTimeout(r, 100));
    } finally {
      await runner.stop();
    }
    expect(await jobsFor(c0.id)).toHaveLength(0);
    const c = await callRow(t.owner, loc.id, body.call.call_id);
    expect(c.outcome).toBe('other');
    expect(c.finalized_at).not.toBeNull();
    expect(types(await events(t.owner, loc.id))).toEqual(['call.ended']);
    expect(await count(t.owner, 'select 1 from app.customers where location_id = $1', [loc.id])).toBe(1);

    // A late call_analyzed or a second run of the task changes nothing.
    const late = voiceFixture('booked', loc, { callId: body.call.call_id });
    await postVoice(t.baseUrl, 'post-call', late);
    await finalizeCall({ cfg: t.cfg, log: testLog, pool: t.owner })({ call_id: c0.id }, {} as never);
    expect(types(await events(t.owner, loc.id))).toEqual(['call.ended']);
    expect((await callRow(t.owner, loc.id, body.call.call_id)).outcome).toBe('other');
  });

  test('outcome from disconnection_reason: call_transfer → transferred (lead + emergency); voicemail_reached → lead', async () => {
    const loc = await voiceLocation(t.owner);
    const transfer = voiceFixture('analysis-missing-call-ended', loc);
    transfer.call.disconnection_reason = 'call_transfer';
    const vm = voiceFixture('analysis-missing-call-ended', loc);
    vm.call.disconnection_reason = 'voicemail_reached';
    vm.call.from_number = '+15125550111';
    for (const b of [transfer, vm]) await postVoice(t.baseUrl, 'post-call', b);
    const task = finalizeCall({ cfg: t.cfg, log: testLog, pool: t.owner });
    const ct = await callRow(t.owner, loc.id, transfer.call.call_id);
    const cv = await callRow(t.owner, loc.id, vm.call.call_id);
    await task({ call_id: ct.id }, {} as never);
    await task({ call_id: cv.id }, {} as never);
    expect((await callRow(t.owner, loc.id, transfer.call.call_id))).toMatchObject({ outcome: 'transferred', is_emergency: true });
    expect((await callRow(t.owner, loc.id, vm.call.call_id)).outcome).toBe('lead');
    const evs = await events(t.owner, loc.id);
    expect(types(evs)).toEqual(['call.emergency', 'call.ended', 'call.ended', 'lead.created', 'lead.created']);
    expect(evs.find((e) => e.type === 'call.emergency')!.data.reason).toBe('warm_transfer');
  });

  test('call_analyzed before the job runs: the queued finalize_call job is removed (it would be a no-op)', async () => {
    const loc = await voiceLocation(t.owner);
    const ended = voiceFixture('analysis-missing-call-ended', loc);
    await postVoice(t.baseUrl, 'post-call', ended);
    const c0 = await callRow(t.owner, loc.id, ended.call.call_id);
    expect(c0.finalized_at).toBeNull();
    expect(await jobsFor(c0.id)).toHaveLength(1);
    const analyzed = voiceFixture('booked', loc, { callId: ended.call.call_id });
    const res = await postVoice(t.baseUrl, 'post-call', analyzed);
    expect(res.body.data).toMatchObject({ finalized: true, outcome: 'booked' });
    const c = await callRow(t.owner, loc.id, ended.call.call_id);
    expect(c.finalized_at).not.toBeNull();
    expect(await jobsFor(c.id)).toHaveLength(0);
    // Had a job survived (e.g. already taken by a worker), running it is still harmless.
    expect(await callFn(t.owner, 'app.voice_finalize_overdue', [c.id])).toEqual({ finalized: false, reason: 'already_final' });
    expect(types(await events(t.owner, loc.id))).toEqual(['booking.created', 'call.ended', 'lead.created']);
  });

  test('call_ended carrying the analysis finalises at once, no job', async () => {
    const loc = await voiceLocation(t.owner);
    const body = voiceFixture('voicemail', loc);
    body.event = 'call_ended';
    await postVoice(t.baseUrl, 'post-call', body);
    const c = await callRow(t.owner, loc.id, body.call.call_id);
    expect(c.finalized_at).not.toBeNull();
    expect(await jobsFor(c.id)).toHaveLength(0);
  });

  test('the task refuses a malformed payload', async () => {
    const task = finalizeCall({ cfg: t.cfg, log: testLog, pool: t.owner });
    await expect(task({ call_id: 'nope' }, {} as never)).rejects.toThrow(/payload/);
  });
});

describe('ingestion functions are not reachable by API tokens', () => {
  test('switchboard_api cannot execute the SECURITY DEFINER voice functions', async () => {
    for (const fn of ['app.voice_post_call($1::jsonb)', 'app.voice_inbound($1::jsonb)']) {
      await expect(t.apiPool.query(`select ${fn}`, ['{}'])).rejects.toThrow(/permission denied/);
    }
    await expect(t.apiPool.query(`select app.voice_finalize_overdue(gen_random_uuid())`)).rejects.toThrow(/permission denied/);
  });

  test('app.dequeue (job removal) is executable only by switchboard_system', async () => {
    const { rows } = await t.owner.query(`
      select r, has_function_privilege(r, 'app.dequeue(text)', 'execute') as ok
        from unnest(array['switchboard_api', 'switchboard_staff_admin', 'switchboard_system', 'public']) r`);
    expect(rows).toEqual([
      { r: 'switchboard_api', ok: false }, { r: 'switchboard_staff_admin', ok: false },
      { r: 'switchboard_system', ok: true }, { r: 'public', ok: false },
    ]);
    await expect(t.apiPool.query(`select app.dequeue('finalize_call:x')`)).rejects.toThrow(/permission denied/);
  });
});

import { useTestApi } from '../support/harness.js';
import { instant, localDate, openEveryDay } from '../support/scheduling.js';
import { callRow, count, events, finalizeJobs, postVoice, types, VOICE_SECRET, voiceFixture, voiceLocation } from './support.js';

const t = useTestApi({ VOICE_WEBHOOK_SECRET: VOICE_SECRET });
const jobsFor = (callId: string) => finalizeJobs(t.owner, callId);

describe('POST /api/voice/post-call outcomes', () => {
  test('booked: the booking takes the open window holding the promised time; a full window or a closed hour leaves it without one', async () => {
    // Windows of 120 minutes from 08:00, capacity 1 (the defaults). The window lookup runs from one
    // plan kept for the session (migration 000032): more calls than the plan cache's five custom
    // plans, each checked against the window it must land in.
    const loc = await voiceLocation(t.owner);
    await openEveryDay(t.owner, loc.id);
    const booked = async (date: string, time: string) => {
      const body = voiceFixture('booked', loc);
      Object.assign(body.call.call_analysis.custom_analysis_data, { appointment_date: date, appointment_time: time });
      body.call.from_number = `+1512555${String(1000 + Math.floor(Math.random() * 9000))}`;
      expect((await postVoice(t.baseUrl, 'post-call', body)).status).toBe(200);
      const { rows } = await t.owner.query(
        `select app.iso(b.window_start) as s, app.iso(b.window_end) as e from app.bookings b join app.calls c on c.id = b.call_id
          where c.location_id = $1 and c.platform_call_id = $2`, [loc.id, body.call.call_id]);
      expect(rows).toHaveLength(1);
      return rows[0];
    };
    for (let d = 2; d <= 5; d++) {
      const date = await localDate(t.owner, 'America/Chicago', d);
      const w = async (hhmm: string) => instant(t.owner, 'America/Chicago', date, hhmm);
      expect(await booked(date, '09:30')).toEqual({ s: await w('08:00'), e: await w('10:00') });
      expect(await booked(date, '09:45')).toEqual({ s: null, e: null }); // that window is full now
      expect(await booked(date, '16:00')).toEqual({ s: await w('16:00'), e: await w('18:00') });
      expect(await booked(date, '19:30')).toEqual({ s: null, e: null }); // after hours
    }
  });

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

  test('metadata.call_row_id attaches only to a blocklisted call\'s row: any other call, in this location or another, is never written', async () => {
    const a = await voiceLocation(t.owner);
    const b = await voiceLocation(t.owner);
    const theirs = voiceFixture('dropped', b);
    expect((await postVoice(t.baseUrl, 'post-call', theirs)).status).toBe(200);
    const target = await callRow(t.owner, b.id, theirs.call.call_id);
    const before = (await t.owner.query('select to_jsonb(c) as j from app.calls c where id = $1', [target.id])).rows[0].j;

    // No number of ours, B's ordinary call named by its row id: nothing routes the call.
    const crafted = voiceFixture('dropped', a);
    crafted.call.metadata = { call_row_id: target.id };
    crafted.call.to_number = '+15125550003';
    crafted.call.transcript = 'Written over';
    expect((await postVoice(t.baseUrl, 'post-call', crafted)).status).toBe(404);
    // A's own number beside B's row id: a new call of A's, as before.
    const own = voiceFixture('dropped', a);
    own.call.metadata = { call_row_id: target.id };
    expect((await postVoice(t.baseUrl, 'post-call', own)).status).toBe(200);
    expect(await callRow(t.owner, a.id, own.call.call_id)).toBeDefined();
    // An ordinary call of A's named by row id from another platform call: a call of its own too.
    const first = await callRow(t.owner, a.id, own.call.call_id);
    const second = voiceFixture('dropped', a);
    second.call.metadata = { call_row_id: first.id };
    expect((await postVoice(t.baseUrl, 'post-call', second)).status).toBe(200);
    expect((await callRow(t.owner, a.id, second.call.call_id)).id).not.toBe(first.id);
    expect((await callRow(t.owner, a.id, own.call.call_id)).platform_call_id).toBe(own.call.call_id);

    const after = (await t.owner.query('select to_jsonb(c) as j from app.calls c where id = $1', [target.id])).rows[0].j;
    expect(after).toEqual(before);
    expect(await count(t.owner, 'select 1 from app.calls where location_id = $1', [b.id])).toBe(1);
  });
});


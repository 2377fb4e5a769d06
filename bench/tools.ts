/**
 * BENCH_ONLY=tools (bench/run.ts): the agent's live-call tools (docs/voice-integration.md).
 * - check_availability latency (p99 of sequential signed requests) on a location holding 10,000
 *   bookings: at rest, then while 2,000 signed post-calls (call_analyzed, a new call each) are
 *   ingested by 20 senders into the same location.
 * - book_appointment from 50 concurrent calls on one window of capacity 2: bookings made,
 *   answers with alternatives, p99.
 * Requests are signed with retell-sdk before the clock starts.
 */
import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { sign } from 'retell-sdk';
import type { BenchRow } from './common.js';

export interface ToolsBenchCtx {
  owner: pg.Pool;
  base: string;
  voiceSecret: string;
  progress: (msg: string) => void;
}

const TZ = 'America/Chicago';
const BOOKINGS = 10_000;
const POST_CALLS = 2_000;
const SENDERS = 20;

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] ?? 0;
};

/** A location with its own service phone, open 06:00-22:00 every day, hourly windows. */
async function toolsLocation(owner: pg.Pool, slug: string, phone: string, capacity: number): Promise<string> {
  await owner.query('delete from app.locations where slug = $1', [slug]);
  const id = (await owner.query(`select admin.location_create($1) ->> 'id' as id`, [{ name: slug, slug, timezone: TZ, service_phone: phone }])).rows[0].id;
  await owner.query(`insert into app.business_hours (location_id, day, open, close) select $1, d, '06:00', '22:00' from generate_series(0, 6) d`, [id]);
  await owner.query('insert into app.scheduling_settings (location_id, window_minutes, capacity) values ($1, 60, $2)', [id, capacity]);
  return id;
}

/** 10,000 bookings: every open window of the horizon holds 20, the rest completed in the past year. */
async function seedBookings(owner: pg.Pool, id: string): Promise<void> {
  const c = await owner.connect();
  try {
    await c.query('begin');
    await c.query(`select set_config('app.location_id', $1, true), set_config('app.seeding', 'on', true)`, [id]);
    const { rowCount } = await c.query(
      `insert into app.bookings (location_id, status, scheduled_date, window_start, window_end, source, service_type)
       select $1, 'scheduled', current_date, w.window_start, w.window_end, 'api', 'Bench'
         from app.scheduling_windows($1, (now() at time zone $2)::date, 15) w, generate_series(1, 20)`, [id, TZ]);
    await c.query(
      `insert into app.bookings (location_id, status, scheduled_date, window_start, window_end, source, service_type)
       select $1, 'completed', current_date, ws, ws + interval '1 hour', 'api', 'Bench'
         from (select ((current_date - 1 - (i % 365)) + make_time(6 + (i / 365) % 16, 0, 0)) at time zone $2 as ws
                 from generate_series(0, $3::int - 1) i) x`, [id, TZ, BOOKINGS - (rowCount ?? 0)]);
    await c.query('commit');
  } finally {
    c.release();
  }
  await owner.query('analyze app.bookings; analyze app.booking_windows');
}

export async function runToolsBench(ctx: ToolsBenchCtx): Promise<BenchRow[]> {
  const { owner, base, voiceSecret, progress } = ctx;
  const rows: BenchRow[] = [];
  const phone = '+13125550400';
  const id = await toolsLocation(owner, 'tools', phone, 30);
  await seedBookings(owner, id);
  const held = Number((await owner.query('select count(*) n from app.bookings where location_id = $1', [id])).rows[0].n);

  const tool = async (name: string, args: unknown, call: Record<string, unknown>) => {
    const raw = JSON.stringify({ name, call: { call_status: 'ongoing', to_number: phone, from_number: '+13125550123', ...call }, args });
    const headers = { 'content-type': 'application/json', 'x-retell-signature': await sign(raw, voiceSecret) };
    const s = performance.now();
    const res = await fetch(`${base}/api/voice/tools/${name}`, { method: 'POST', headers, body: raw });
    const body = (await res.json()) as { ok?: boolean; alternatives?: unknown[] };
    if (res.status !== 200) throw new Error(`${name}: ${res.status} ${JSON.stringify(body)}`);
    return { ms: performance.now() - s, body };
  };
  const check = () => tool('check_availability', { days: 14 }, { call_id: `bench_${randomUUID()}` });
  // The reference: the pre-call route on the same location (one signed request, one SQL call),
  // interleaved request by request so the machine's load hits both alike.
  const inbound = async () => {
    const raw = JSON.stringify({ event: 'call_inbound', call_inbound: { agent_id: 'agent_bench', from_number: '+13125550123', to_number: phone } });
    const headers = { 'content-type': 'application/json', 'x-retell-signature': await sign(raw, voiceSecret) };
    const s = performance.now();
    const res = await fetch(`${base}/api/voice/inbound`, { method: 'POST', headers, body: raw });
    await res.arrayBuffer();
    if (res.status !== 200) throw new Error(`inbound: ${res.status}`);
    return performance.now() - s;
  };

  for (let i = 0; i < 30; i++) await check();
  progress(`check_availability at rest: ${held.toLocaleString('en')} bookings, 500 sequential requests`);
  const rest: number[] = [];
  const pre: number[] = [];
  for (let i = 0; i < 500; i++) {
    rest.push((await check()).ms);
    pre.push(await inbound());
  }
  rows.push({ name: `check_availability at rest (${held.toLocaleString('en')} bookings) p99`, value: pct(rest, 99), unit: 'ms', target: '< 50 ms',
    baseline: pct(pre, 99), ratio: pct(pre, 99) / pct(rest, 99),
    note: `median ${pct(rest, 50).toFixed(1)} ms; baseline: the pre-call route, interleaved (median ${pct(pre, 50).toFixed(1)} ms)` });

  // The same, while 2,000 post-calls are ingested into the same location.
  progress(`check_availability while ${POST_CALLS} post-calls are ingested by ${SENDERS} senders`);
  let sent = 0;
  let failed = 0;
  const runId = randomUUID().slice(0, 8);
  const sender = async () => {
    while (sent < POST_CALLS) {
      const n = ++sent;
      const start = Date.now() - 240_000;
      const raw = JSON.stringify({ event: 'call_analyzed', call: {
        call_id: `bench_tools_${runId}_${n}`, agent_id: 'agent_bench', direction: 'inbound', to_number: phone,
        from_number: `+1312${String(2_000_000 + ((n * 7919) % 7_000_000)).padStart(7, '0')}`,
        start_timestamp: start, end_timestamp: start + 180_000, disconnection_reason: 'agent_hangup',
        transcript: 'Agent: Thanks for calling.\nUser: My AC is out.',
        call_analysis: { call_summary: 'AC out.', custom_analysis_data: { outcome: 'lead', urgency_level: 3, caller_name: 'Bench Caller', service_type: 'AC repair' } },
      } });
      const res = await fetch(`${base}/api/voice/post-call`, { method: 'POST', body: raw,
        headers: { 'content-type': 'application/json', 'x-retell-signature': await sign(raw, voiceSecret) } });
      await res.arrayBuffer();
      if (res.status !== 200) failed++;
    }
  };
  const t0 = Date.now();
  const ingesting = Promise.all(Array.from({ length: SENDERS }, sender));
  let done = false;
  void ingesting.then(() => { done = true; });
  const loaded: number[] = [];
  while (!done) loaded.push((await check()).ms);
  await ingesting;
  const ingestS = (Date.now() - t0) / 1000;
  rows.push({ name: `check_availability while ${POST_CALLS.toLocaleString('en')} post-calls are ingested p99`, value: pct(loaded, 99), unit: 'ms', target: '< 300 ms',
    note: `${loaded.length} requests, median ${pct(loaded, 50).toFixed(1)} ms; ingestion ${(POST_CALLS / ingestS).toFixed(0)} calls/s, ${failed} failed` });

  // 50 calls race for one window of capacity 2.
  const raceId = await toolsLocation(owner, 'tools-race', '+13125550401', 2);
  const ws = (await owner.query(`select app.iso(window_start) as s from app.scheduling_open($1, now(), 1)`, [raceId])).rows[0].s as string;
  progress('book_appointment: 50 concurrent calls on one window of capacity 2');
  const race = await Promise.all(Array.from({ length: 50 }, async (_, i) => {
    const raw = JSON.stringify({ name: 'book_appointment', args: { window_start: ws, name: `Caller ${i}` }, call: {
      call_id: `bench_race_${randomUUID()}`, call_status: 'ongoing', to_number: '+13125550401',
      from_number: `+1312555${String(100 + i).padStart(4, '0')}` } });
    const headers = { 'content-type': 'application/json', 'x-retell-signature': await sign(raw, voiceSecret) };
    return { raw, headers };
  }).map(async (p) => {
    const { raw, headers } = await p;
    const s = performance.now();
    const res = await fetch(`${base}/api/voice/tools/book_appointment`, { method: 'POST', headers, body: raw });
    const body = (await res.json()) as { ok?: boolean; alternatives?: unknown[] };
    return { ms: performance.now() - s, status: res.status, body };
  }));
  const booked = Number((await owner.query(
    `select count(*) n from app.bookings where location_id = $1 and window_start = $2 and status in ('scheduled', 'confirmed')`, [raceId, ws])).rows[0].n);
  const withAlternatives = race.filter((r) => r.status === 200 && r.body.ok === false && (r.body.alternatives?.length ?? 0) > 0).length;
  rows.push({ name: 'book_appointment, 50 concurrent calls on one window of capacity 2: bookings', value: booked, unit: 'bookings', target: 'exactly 2',
    note: `${race.filter((r) => r.body.ok === true).length} answered ok; ${withAlternatives} answered with alternatives (target 48); ${race.filter((r) => r.status !== 200).length} non-200` });
  rows.push({ name: 'book_appointment, 50 concurrent calls p99', value: pct(race.map((r) => r.ms), 99), unit: 'ms', target: '< 500 ms',
    note: `median ${pct(race.map((r) => r.ms), 50).toFixed(1)} ms` });
  return rows;
}

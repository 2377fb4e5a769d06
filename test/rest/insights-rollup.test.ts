/**
 * Insights from the rollup (app.insights_json, what api.insights answers) against the direct
 * computation over calls and leads (app.insights_direct): a seeded property test over random
 * histories, plus the after-hours rule, the timezone rebuild and the no-waiting property of the
 * live path.
 *
 * A history is one location (random zone: DST, half- and quarter-hour offsets) and a random
 * sequence of what happens to calls in production: post-call webhooks through
 * app.voice_post_call (start recorded, analysis arriving later, transfers, start corrections,
 * inbound and outbound), blocked callers through app.voice_inbound, the demo seeder's bulk path,
 * staff edits and deletions of calls and leads, business-hours and timezone changes through the
 * API functions, forced journal compactions, and transactions with a rolled-back savepoint. Then
 * the full JSON of both computations is compared for several windows, and every call's stored
 * after-hours flag is checked against the business hours the model says were in force when it
 * was last judged.
 */
import fc from 'fast-check';
import type pg from 'pg';
import { callOutcomes } from '../../src/allowed-values.js';
import { seedBatch, type ForeignKeyChecks } from '../../src/cli/demo-seed.js';
import { callFn } from '../../src/db/pools.js';
import { hashToken } from '../../src/auth/tokens.js';
import { createLocation, mintKey, startTestApi, type TestApi } from '../support/harness.js';

let t: TestApi;
beforeAll(async () => {
  t = await startTestApi();
});
afterAll(() => t.close());

const ZONES = [
  'America/New_York', // DST (2025-03-09, 2025-11-02)
  'Asia/Kolkata', // +05:30
  'America/St_Johns', // -03:30 with DST
  'Asia/Kathmandu', // +05:45
  'Australia/Lord_Howe', // +10:30, half-hour DST
  'Europe/London',
  'Pacific/Chatham', // +12:45 with DST
  'UTC',
];
// Windows around DST changes in most of the zones above (UTC noon).
const ANCHORS = ['2025-11-05T12:00:00Z', '2025-03-12T12:00:00Z', '2025-10-08T12:00:00Z'].map(Date.parse);
const DAY = 86_400_000;
const OUTCOMES = [...callOutcomes];
const SERVICES = ['AC repair', 'Furnace', 'Water heater'];
const BLOCKED = '+13125550666';

interface Hours { day: number; open: string; close: string }
type Instant = { day: number; quarter: number; jitter: number };
type Op =
  | { kind: 'post'; k: number; event: string; at: Instant | null; outbound: boolean; analysis: Record<string, unknown> | null; voicemail: boolean }
  | { kind: 'blocked' }
  | { kind: 'edit'; k: number; field: 'outcome' | 'estimated_value' | 'is_emergency' | 'service_type' | 'started_at' | 'direction'; value: unknown }
  | { kind: 'deleteCall'; k: number }
  | { kind: 'lead'; k: number }
  | { kind: 'deleteLead'; n: number }
  | { kind: 'moveLead'; n: number; k: number }
  | { kind: 'hours'; hours: Hours[] }
  | { kind: 'tz'; zone: string }
  | { kind: 'seed'; n: number; checks: ForeignKeyChecks }
  | { kind: 'seedFinish' }
  | { kind: 'compact' }
  | { kind: 'txn'; ops: Op[]; rollback: number };

// Instants: a day before the anchor, a UTC quarter hour (every zone's local hours and midnights
// start on one), and a jitter that hits the boundary itself, just before or just after it.
const instant = fc.record({
  day: fc.integer({ min: -1, max: 95 }),
  quarter: fc.integer({ min: 0, max: 95 }),
  jitter: fc.oneof(fc.constantFrom(-1000, 0, 0, 1000), fc.integer({ min: 0, max: 899_999 })),
});
const money = fc.oneof(fc.constantFrom(0, 149.99, 350, 1800), fc.integer({ min: 1, max: 5000 }));
const analysis = fc.record(
  {
    outcome: fc.constantFrom(...OUTCOMES),
    urgency_level: fc.integer({ min: 0, max: 5 }),
    service_type: fc.constantFrom(...SERVICES),
    estimated_value: money,
    is_emergency: fc.boolean(),
    caller_name: fc.constant('Pat Caller'),
  },
  { requiredKeys: [] },
);
const hhmm = (m: number) => `${String(Math.floor(m / 60)).padStart(2, '0')}:${String(m % 60).padStart(2, '0')}`;
const ALL_WEEK: Hours[] = [0, 1, 2, 3, 4, 5, 6].map((day) => ({ day, open: '00:00', close: '23:59' }));
const hoursArb: fc.Arbitrary<Hours[]> = fc.oneof(
  fc.constant([] as Hours[]), // closed: every call after hours
  fc.constant(ALL_WEEK), // open but for the last minute of each day
  fc.uniqueArray(fc.integer({ min: 0, max: 6 }), { maxLength: 7 })
    .chain((days) =>
      fc.tuple(...days.map((day) =>
        fc.tuple(fc.integer({ min: 0, max: 1400 }), fc.integer({ min: 1, max: 900 }))
          .map(([open, len]) => ({ day, open: hhmm(open), close: hhmm(Math.min(open + len, 1439)) })))))
    .map((h) => h as Hours[]),
);
const callK = fc.integer({ min: 0, max: 5 });

const simpleOp: fc.Arbitrary<Op> = fc.oneof(
  { weight: 10, arbitrary: fc.record({
    kind: fc.constant('post' as const), k: callK,
    event: fc.constantFrom('call_started', 'call_ended', 'call_analyzed', 'call_analyzed', 'transfer_started'),
    at: fc.option(instant, { freq: 6 }), outbound: fc.integer({ min: 0, max: 9 }).map((x) => x < 2), analysis: fc.option(analysis, { freq: 4 }),
    voicemail: fc.boolean(),
  }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'blocked' as const }) },
  { weight: 3, arbitrary: fc.oneof(
    fc.record({ kind: fc.constant('edit' as const), k: callK, field: fc.constant('outcome' as const), value: fc.constantFrom(...OUTCOMES) }),
    fc.record({ kind: fc.constant('edit' as const), k: callK, field: fc.constant('estimated_value' as const), value: fc.option(money) }),
    fc.record({ kind: fc.constant('edit' as const), k: callK, field: fc.constant('is_emergency' as const), value: fc.boolean() }),
    fc.record({ kind: fc.constant('edit' as const), k: callK, field: fc.constant('service_type' as const), value: fc.option(fc.constantFrom(...SERVICES)) }),
    fc.record({ kind: fc.constant('edit' as const), k: callK, field: fc.constant('started_at' as const), value: fc.option(instant, { freq: 8 }) }),
    fc.record({ kind: fc.constant('edit' as const), k: callK, field: fc.constant('direction' as const), value: fc.constantFrom('inbound', 'outbound') }),
  ) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('deleteCall' as const), k: callK }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('lead' as const), k: callK }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('deleteLead' as const), n: fc.nat(20) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('moveLead' as const), n: fc.nat(20), k: callK }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('compact' as const) }) },
);
const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 20, arbitrary: simpleOp },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('hours' as const), hours: hoursArb }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('tz' as const), zone: fc.constantFrom(...ZONES) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('seed' as const), n: fc.integer({ min: 1, max: 30 }), checks: fc.constantFrom<ForeignKeyChecks>('per_row', 'per_batch') }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'seedFinish' as const }) },
  { weight: 3, arbitrary: fc.record({
    kind: fc.constant('txn' as const), ops: fc.array(simpleOp, { minLength: 1, maxLength: 4, size: 'max' }), rollback: fc.integer({ min: -1, max: 3 }),
  }) },
);
// A call whose start is recorded, then the hours change, then its analysis settles it.
const settledLater: fc.Arbitrary<Op[]> = fc
  .tuple(callK, instant, hoursArb, analysis)
  .map(([k, i, hours, a]) => [
    { kind: 'post', k, event: 'call_started', at: i, outbound: false, analysis: null, voicemail: false },
    { kind: 'hours', hours },
    { kind: 'post', k, event: 'call_analyzed', at: i, outbound: false, analysis: a, voicemail: false },
  ]);
const history = fc.record({
  zone: fc.constantFrom(...ZONES),
  anchor: fc.constantFrom(...ANCHORS),
  hours: hoursArb,
  ops: fc.array(fc.oneof({ weight: 12, arbitrary: op.map((o) => [o]) }, { weight: 1, arbitrary: settledLater }),
                { minLength: 10, maxLength: 40, size: 'max' }).map((chunks) => chunks.flat()),
});

/** The business hours and zone each call was last judged by, keyed by call row id. */
interface Judged { hours: Hours[]; zone: string }

interface Run {
  loc: { id: string; slug: string };
  phone: string;
  token: string;
  anchor: number;
  zone: string;
  hours: Hours[];
  judged: Map<string, Judged>;
}

const at = (run: Run, i: Instant) => run.anchor - (run.anchor % DAY) - i.day * DAY + i.quarter * 900_000 + i.jitter;

async function snapshot(c: pg.PoolClient, loc: string): Promise<Map<string, string>> {
  const { rows } = await c.query(
    `select id, coalesce(started_at::text, '-') || '|' || (finalized_at is not null) as s from app.calls where location_id = $1`, [loc]);
  return new Map(rows.map((r) => [r.id as string, r.s as string]));
}

async function rowOf(c: pg.PoolClient, run: Run, k: number): Promise<string | null> {
  const { rows } = await c.query('select id from app.calls where location_id = $1 and platform_call_id = $2', [run.loc.id, `c${k}`]);
  return rows[0]?.id ?? null;
}

/** Runs one operation on client c (inside the caller's transaction, if any). */
async function apply(c: pg.PoolClient, run: Run, o: Op): Promise<void> {
  switch (o.kind) {
    case 'post': {
      const ours = run.phone;
      const them = '+13125550142';
      const call: Record<string, unknown> = {
        call_id: `c${o.k}`, direction: o.outbound ? 'outbound' : 'inbound',
        from_number: o.outbound ? ours : them, to_number: o.outbound ? them : ours,
        disconnection_reason: o.voicemail ? 'voicemail_reached' : 'agent_hangup',
      };
      if (o.at) {
        call.start_timestamp = at(run, o.at);
        call.end_timestamp = at(run, o.at) + 95_000;
      }
      if (o.analysis && o.event !== 'call_started') call.call_analysis = { call_summary: 'Summary', custom_analysis_data: o.analysis };
      await c.query('select app.voice_post_call($1)', [JSON.stringify({ event: o.event, call })]);
      return;
    }
    case 'blocked':
      await c.query('select app.voice_inbound($1)', [JSON.stringify({ event: 'call_inbound', call_inbound: { from_number: BLOCKED, to_number: run.phone } })]);
      return;
    case 'edit': {
      const id = await rowOf(c, run, o.k);
      if (!id) return;
      const value = o.field === 'started_at' ? (o.value ? new Date(at(run, o.value as Instant)).toISOString() : null) : o.value;
      await c.query('savepoint staff');
      await c.query('set local role switchboard_staff_admin');
      await c.query(`update app.calls set ${o.field} = $2 where id = $1`, [id, value]);
      await c.query('release savepoint staff');
      await c.query('reset role');
      return;
    }
    case 'deleteCall': {
      const id = await rowOf(c, run, o.k);
      if (id) await c.query('delete from app.calls where id = $1', [id]);
      return;
    }
    case 'lead': {
      const id = await rowOf(c, run, o.k);
      if (id) await c.query("insert into app.leads (location_id, call_id, name) values ($1, $2, 'Staff lead')", [run.loc.id, id]);
      return;
    }
    case 'deleteLead':
      await c.query(
        `delete from app.leads where id = (
           select id from app.leads where location_id = $1 and call_id is not null order by id
           offset $2 % greatest((select count(*) from app.leads where location_id = $1 and call_id is not null), 1) limit 1)`,
        [run.loc.id, o.n]);
      return;
    case 'moveLead': {
      const id = await rowOf(c, run, o.k);
      await c.query(
        `update app.leads set call_id = $3 where id = (
           select id from app.leads where location_id = $1 order by id
           offset $2 % greatest((select count(*) from app.leads where location_id = $1), 1) limit 1)`,
        [run.loc.id, o.n, id]);
      return;
    }
    case 'hours':
      await callFn(c, 'api.business_hours_put', [hashToken(run.token), run.loc.id, JSON.stringify(o.hours)]);
      run.hours = o.hours;
      return;
    case 'tz':
      await callFn(c, 'api.location_patch', [hashToken(run.token), run.loc.id, { timezone: o.zone }]);
      run.zone = o.zone;
      return;
    case 'seed': {
      // prepare gives a location without hours the demo's hours
      const { first_number: first } = await callFn<{ first_number: number }>(c, 'admin.demo_seed_prepare', [run.loc.slug]);
      const { rows } = await c.query('select day, open, close from app.business_hours where location_id = $1', [run.loc.id]);
      run.hours = rows;
      // the batch's calls with their customers, leads and bookings, in one statement, as `demo seed`
      // runs it: foreign keys checked per row, or in the replica role (the rollup's bulk triggers fire)
      await seedBatch(c, o.checks, [run.loc.slug, o.n, first, 0, 3, Math.min(2, o.n)]);
      return;
    }
    case 'seedFinish': // the finishing step: each resource's demo rows
      await callFn(c, 'admin.demo_seed_finish', [run.loc.slug]);
      return;
    case 'compact':
      await c.query('select app_private.insights_compact($1)', [run.loc.id]);
      return;
    case 'txn':
      throw new Error('nested transactions are not generated');
  }
}

/** One operation as its own transaction (txn: several, one of them rolled back to a savepoint). */
async function step(c: pg.PoolClient, run: Run, o: Op): Promise<void> {
  const before = await snapshot(c, run.loc.id);
  await c.query('begin');
  try {
    if (o.kind === 'txn') {
      for (const [i, sub] of o.ops.entries()) {
        await c.query('savepoint s');
        await apply(c, run, sub);
        await c.query(i === o.rollback ? 'rollback to savepoint s' : 'release savepoint s');
      }
    } else {
      await apply(c, run, o);
    }
    await c.query('commit');
  } catch (e) {
    await c.query('rollback');
    throw e;
  }
  // A call is judged again when its start is recorded or changes, and when it is finalised.
  const after = await snapshot(c, run.loc.id);
  for (const [id, s] of after) {
    const prev = before.get(id);
    const [start, fin] = s.split('|');
    const [pStart, pFin] = prev ? prev.split('|') : ['-', 'false'];
    if (start !== pStart || (fin === 'true' && pFin === 'false')) run.judged.set(id, { hours: run.hours, zone: run.zone });
  }
}

async function compare(c: pg.PoolClient, run: Run) {
  const { rows } = await c.query(
    `select d, a, app.insights_json($1, d, a) as rollup, app.insights_direct($1, d, a) as direct
       from unnest(array[1, 7, 31, 90]) d,
            unnest(array[$2::timestamptz, $2::timestamptz + interval '13 hours', $2::timestamptz - interval '30 days', now()]) a`,
    [run.loc.id, new Date(run.anchor).toISOString()]);
  for (const r of rows) expect({ days: r.d, as_of: r.a, insights: r.rollup }).toEqual({ days: r.d, as_of: r.a, insights: r.direct });
  // Stored flags: the hours (as minutes of the week) and zone of the model, through the
  // multirange form of the rule (the trigger uses the other form).
  const { rows: flags } = await c.query(
    `select c.id, c.after_hours as stored,
            app_private.after_hours(
              (select coalesce(range_agg(int4range(h.day * 1440 + extract(hour from h.open::time)::int * 60 + extract(minute from h.open::time)::int,
                                                   h.day * 1440 + extract(hour from h.close::time)::int * 60 + extract(minute from h.close::time)::int)), '{}')
                 from jsonb_to_recordset(j -> 'hours') h(day int, open text, close text)),
              c.started_at at time zone (j ->> 'zone')) as expected
       from app.calls c join jsonb_each($2::jsonb) m(id, j) on m.id::uuid = c.id
      where c.location_id = $1 and c.started_at is not null`,
    [run.loc.id, JSON.stringify(Object.fromEntries(run.judged))]);
  for (const f of flags) expect({ call: f.id, after_hours: f.stored }).toEqual({ call: f.id, after_hours: f.expected });
  const counted = await c.query(
    `select count(*)::int n from app.calls where location_id = $1 and started_at is not null`, [run.loc.id]);
  expect(flags).toHaveLength(counted.rows[0].n);
  return rows.reduce((n, r) => n + Number(r.direct.calls_answered) + Number(r.direct.spam_blocked), 0);
}

test('rollup and direct computation agree on random histories (seeded)', async () => {
  let seen = 0;
  let runs = 0;
  await fc.assert(
    fc.asyncProperty(history, async (h) => {
      runs += 1;
      const phone = `+1415${String(5_000_000 + runs).padStart(7, '0')}`;
      const loc = await createLocation(t.owner, { timezone: h.zone, service_phone: phone });
      const { token } = await mintKey(t.owner, loc.id, ['settings:write', 'locations:write']);
      const run: Run = { loc, phone, token, anchor: h.anchor, zone: h.zone, hours: [], judged: new Map() };
      const c = await t.owner.connect();
      try {
        await c.query('update app.agent_settings set blocked_numbers = $2 where location_id = $1', [loc.id, [BLOCKED]]);
        await step(c, run, { kind: 'hours', hours: h.hours });
        for (const o of h.ops) await step(c, run, o);
        seen += await compare(c, run);
      } finally {
        c.release();
      }
    }),
    { seed: 20261122, numRuns: 40, endOnFailure: true },
  );
  expect(seen).toBeGreaterThan(0); // the histories put calls into the compared windows
}, 240_000);

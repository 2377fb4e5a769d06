/**
 * Staff GraphQL rows of `npm run bench` (BENCH_ONLY section `staff`; docs/staff.md):
 *
 * 1. The API's `GET calls` (page of 50, c=BENCH_CONNECTIONS) p99 with and without a staff aggregate
 *    query over a location of BENCH_BIG_CALLS (1,000,000) calls running against the service's
 *    admin port at the same time (one staff client sending it back to back, as someone re-running
 *    it in Ruru would, only faster), alternating quiet and busy halves so drift hits both alike.
 *    Target: busy p99 within 20 % of quiet p99.
 * 2. The audit write on a small staff query: two staff GraphQL servers in this process on the same
 *    database, one with the audit and one without (the `audit: false` switch exists for this
 *    only), both without the admission's pacing; median latency of sequential requests, interleaved
 *    one by one. Target: < 10 % added. Throughput at c=10 is reported beside it.
 */
import autocannon from 'autocannon';
import type pg from 'pg';
import { startStaffGraphql } from '../src/admin/graphql.js';
import { mintToken } from '../src/auth/tokens.js';
import { createLogger } from '../src/log.js';
import { median, type BenchRow } from './common.js';


export interface StaffBenchContext {
  owner: pg.Pool;
  databaseUrl: string;
  /** The service's API and admin base URLs. */
  apiUrl: string;
  adminUrl: string;
  /** Authorization header of a key of the `mid` location. */
  apiAuth: Record<string, string>;
  /** Id of the location with BENCH_BIG_CALLS calls. */
  bigLocationId: string;
  bigCalls: number;
  seconds: number;
  connections: number;
  progress(msg: string): void;
}

const AGGREGATE = `query StaffAggregate($loc: UUID!) {
  allCalls(condition: { locationId: $loc }) {
    totalCount
    aggregates { sum { durationSec estimatedValue } average { durationSec urgencyLevel } distinctCount { serviceType outcome } }
  }
}`;
const SMALL = 'query Small { allLocations(first: 5) { totalCount nodes { rowId slug } } }';

async function member(owner: pg.Pool, role: string): Promise<string> {
  const { token, hash } = mintToken();
  await owner.query('select admin.staff_create($1, $2, $3)', [`bench-${role}-${Date.now()}@staff.example`, role, hash]);
  return token;
}

async function gql(url: string, token: string, query: string, variables?: Record<string, unknown>): Promise<void> {
  const res = await fetch(`${url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ query, variables }),
  });
  const body = (await res.json()) as { errors?: { message: string }[] };
  if (res.status !== 200 || body.errors) throw new Error(`staff query: ${res.status} ${JSON.stringify(body).slice(0, 300)}`);
}

async function p99Of(url: string, headers: Record<string, string>, connections: number, duration: number): Promise<{ p99: number; rps: number; bad: number }> {
  const r = await autocannon({ url, headers, connections, duration });
  return { p99: r.latency.p99, rps: r.requests.total / duration, bad: r.non2xx + r.errors + r.timeouts };
}

async function medianMs(fn: () => Promise<void>, runs: number): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const s = performance.now();
    await fn();
    times.push(performance.now() - s);
  }
  return median(times);
}

export async function runStaffBench(ctx: StaffBenchContext): Promise<BenchRow[]> {
  const rows: BenchRow[] = [];
  const admin = await member(ctx.owner, 'admin');
  const callsUrl = `${ctx.apiUrl}/api/v1/locations/mid/calls`;

  // ---- 1. GET calls p99, quiet vs with staff aggregates over the big location -------------------
  ctx.progress(`staff: aggregate over ${ctx.bigCalls.toLocaleString('en')} calls (first run builds the schema)`);
  const s0 = performance.now();
  await gql(ctx.adminUrl, admin, AGGREGATE, { loc: ctx.bigLocationId });
  const aggMs = await medianMs(() => gql(ctx.adminUrl, admin, AGGREGATE, { loc: ctx.bigLocationId }), 3);
  ctx.progress(`staff: aggregate ${aggMs.toFixed(0)} ms (first ${(performance.now() - s0).toFixed(0)} ms in all); GET calls ${ctx.seconds} s quiet / busy, c=${ctx.connections}`);
  await p99Of(callsUrl, ctx.apiAuth, ctx.connections, 1); // warm-up
  const half = Math.max(1, Math.round(ctx.seconds / 2));
  let busy = false;
  let aggregates = 0;
  let aggregateErrors = 0;
  const staffLoop = async () => {
    while (busy) {
      await gql(ctx.adminUrl, admin, AGGREGATE, { loc: ctx.bigLocationId }).then(() => aggregates++, () => aggregateErrors++);
    }
  };
  const busyRun = async () => {
    busy = true;
    const loops = [staffLoop()];
    const r = await p99Of(callsUrl, ctx.apiAuth, ctx.connections, half);
    busy = false;
    await Promise.all(loops);
    return r;
  };
  const q1 = await p99Of(callsUrl, ctx.apiAuth, ctx.connections, half);
  const b1 = await busyRun();
  const b2 = await busyRun();
  const q2 = await p99Of(callsUrl, ctx.apiAuth, ctx.connections, half);
  const quiet = Math.max(q1.p99, q2.p99);
  const loaded = Math.max(b1.p99, b2.p99);
  rows.push({
    name: `GET calls p99 with staff aggregates over ${(ctx.bigCalls / 1e6).toFixed(2)} M calls`, value: loaded, unit: 'ms', baseline: quiet,
    ratio: quiet / loaded, target: 'within 20 % of the run without (ratio ≥ 83 %)',
    note: `${aggregates} aggregates (${aggMs.toFixed(0)} ms each alone, ${aggregateErrors} failed) in ${2 * half} s; req/s ${((b1.rps + b2.rps) / 2).toFixed(0)} vs ${((q1.rps + q2.rps) / 2).toFixed(0)} quiet; ${b1.bad + b2.bad + q1.bad + q2.bad} failed`,
  });

  // ---- 2. The audit write on a small staff query -----------------------------------------------
  ctx.progress('staff: small query with and without the audit write');
  const log = createLogger('warn', 2);
  // Without the admission's time share (docs/staff.md, "Admission"): back to back, each request
  // would also wait for the pause after its predecessor's turn, three times that turn by default,
  // and the row would time the pause, which is the same with the audit or without.
  const unpaced = { timeShare: 1 };
  const withAudit = await startStaffGraphql(ctx.databaseUrl, '127.0.0.1', 0, { log, limits: unpaced });
  const without = await startStaffGraphql(ctx.databaseUrl, '127.0.0.1', 0, { log, audit: false, limits: unpaced });
  try {
    const viewer = await member(ctx.owner, 'viewer');
    for (const s of [withAudit, without]) for (let i = 0; i < 20; i++) await gql(s.url, viewer, SMALL);
    ctx.progress('staff: both servers warm; sequential requests, interleaved one by one');
    // Interleaved request by request, in pairs whose order alternates (on, off, then off, on).
    // Timed in rounds of two blocks of 50, whichever server each round began with answered 5–8 %
    // slower, audited or not (docs/staff.md, "Measured (bench/staff.ts)").
    const runs = 200;
    const on: number[] = [];
    const off: number[] = [];
    const timed = async (url: string, into: number[]) => {
      const s = performance.now();
      await gql(url, viewer, SMALL);
      into.push(performance.now() - s);
    };
    for (let pair = 0; pair < runs; pair++) {
      if (pair % 2 === 0) { await timed(withAudit.url, on); await timed(without.url, off); }
      else { await timed(without.url, off); await timed(withAudit.url, on); }
    }
    const body = JSON.stringify({ query: SMALL });
    const cannon = (url: string) => autocannon({ url: `${url}/graphql`, method: 'POST', body, connections: 10, duration: half,
      headers: { 'content-type': 'application/json', authorization: `Bearer ${viewer}` } });
    const tOff = await cannon(without.url);
    const tOn = await cannon(withAudit.url);
    await withAudit.flushAudit();
    rows.push({
      name: 'small staff query latency with the audit write', value: median(on), unit: 'ms', baseline: median(off), ratio: median(off) / median(on),
      target: 'audit adds < 10 % (ratio ≥ 91 %)',
      note: `median of ${runs} sequential requests per side, interleaved one by one; c=10: ${(tOn['2xx'] / half).toFixed(0)} vs ${(tOff['2xx'] / half).toFixed(0)} answered req/s without the audit (${tOn.non2xx} and ${tOff.non2xx} refused by the admission's queue)`,
    });
  } finally {
    await withAudit.close();
    await without.close();
  }
  return rows;
}

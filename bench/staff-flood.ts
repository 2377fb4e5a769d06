/**
 * Staff floods against the API (`BENCH_ONLY=staff-flood npm run bench`; docs/staff.md "Bounds"):
 * `GET /api/v1/locations` p99 (autocannon, c=BENCH_CONNECTIONS) idle, then while four viewers
 * send the worst document the staff bounds allow back to back for BENCH_STAFF_FLOOD_SECONDS (20).
 * Target: flood p99 within 25 % of idle.
 *
 * "Worst allowed": STAFF_MAX_ALIASES (20) aliases of the heaviest selection a viewer may make
 * over the `mid` location's calls (run with BENCH_MID_CALLS=2000 for the reported case):
 * candidates are groupedAggregates by several keys and a full page of rows, each as 20 aliases;
 * the one with the largest answer that is still answered (not refused by a bound) is the flood.
 */
import autocannon from 'autocannon';
import type pg from 'pg';
import { mintToken } from '../src/auth/tokens.js';

interface Row {
  name: string;
  value: number;
  unit: string;
  target?: string;
  note?: string;
}

export interface StaffFloodContext {
  owner: pg.Pool;
  apiUrl: string;
  adminUrl: string;
  apiAuth: Record<string, string>;
  midLocationId: string;
  seconds: number;
  connections: number;
  progress(msg: string): void;
}

const ALIASES = 20;
const aliased = (field: string) => `query Flood($loc: UUID!) { ${Array.from({ length: ALIASES }, (_, i) => `a${i}: ${field}`).join(' ')} }`;
const grouped = (key: string) => aliased(`allCalls(condition: { locationId: $loc }) { groupedAggregates(groupBy: [${key}]) { keys distinctCount { outcome serviceType } sum { durationSec } average { durationSec } } }`);
const CANDIDATES: Record<string, string> = {
  'groupedAggregates by caller phone': grouped('CALLER_PHONE'),
  'groupedAggregates by hour': grouped('STARTED_AT_TRUNCATED_TO_HOUR'),
  'groupedAggregates by day': grouped('STARTED_AT_TRUNCATED_TO_DAY'),
  'groupedAggregates by row id': grouped('ROW_ID'),
  'pages of 1,000 calls': aliased('allCalls(condition: { locationId: $loc }, first: 1000) { nodes { rowId callerPhone callerName outcome serviceType durationSec startedAt endedAt urgencyLevel estimatedValue } }'),
  'pages of 200 calls': aliased('allCalls(condition: { locationId: $loc }, first: 200) { nodes { rowId callerPhone callerName outcome serviceType durationSec startedAt endedAt urgencyLevel estimatedValue } }'),
};

async function post(url: string, token: string, query: string, variables: Record<string, unknown>): Promise<{ status: number; bytes: number }> {
  const res = await fetch(`${url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ query, variables }),
  });
  const text = await res.text();
  return { status: res.status, bytes: Buffer.byteLength(text) };
}

async function p99Of(url: string, headers: Record<string, string>, connections: number, duration: number) {
  const r = await autocannon({ url, headers, connections, duration });
  return { p99: r.latency.p99, p50: r.latency.p50, rps: r.requests.total / duration, bad: r.non2xx + r.errors + r.timeouts };
}

export async function runStaffFloodBench(ctx: StaffFloodContext): Promise<Row[]> {
  // The admin listener opens after the API (its staff thread starts first).
  for (let i = 0; ; i++) {
    const ok = await fetch(`${ctx.adminUrl}/healthz`).then((r) => r.ok, () => false);
    if (ok) break;
    if (i > 300) throw new Error('the admin listener did not open');
    await new Promise((r) => setTimeout(r, 200));
  }
  const { token, hash } = mintToken();
  await ctx.owner.query('select admin.staff_create($1, $2, $3)', [`bench-flood-${Date.now()}@staff.example`, 'viewer', hash]);
  const vars = { loc: ctx.midLocationId };
  // The heaviest candidate that the bounds still answer.
  let worst: { name: string; query: string; bytes: number } | null = null;
  const tried: string[] = [];
  for (const [name, query] of Object.entries(CANDIDATES)) {
    const r = await post(ctx.adminUrl, token, query, vars);
    tried.push(`${name}: ${r.status}, ${(r.bytes / 1e6).toFixed(2)} MB`);
    if (r.status === 200 && (!worst || r.bytes > worst.bytes)) worst = { name, query, bytes: r.bytes };
  }
  ctx.progress(`staff-flood: candidates ${tried.join('; ')}`);
  if (!worst) throw new Error('no flood candidate was answered');
  const url = `${ctx.apiUrl}/api/v1/locations`;
  await p99Of(url, ctx.apiAuth, ctx.connections, 2); // warm-up
  ctx.progress(`staff-flood: GET /api/v1/locations idle ${ctx.seconds} s, then with 4 viewer floods of "${worst.name}"`);
  const idle = await p99Of(url, ctx.apiAuth, ctx.connections, ctx.seconds);
  let flooding = true;
  let answered = 0;
  let refused = 0;
  const flood = async () => {
    while (flooding) {
      const r = await post(ctx.adminUrl, token, worst!.query, vars).catch(() => ({ status: 0, bytes: 0 }));
      if (r.status === 200) answered++;
      else refused++;
    }
  };
  const floods = [flood(), flood(), flood(), flood()];
  const busy = await p99Of(url, ctx.apiAuth, ctx.connections, ctx.seconds);
  flooding = false;
  await Promise.all(floods);
  const ratio = busy.p99 / Math.max(1, idle.p99);
  return [
    { name: 'GET /api/v1/locations p99, idle', value: idle.p99, unit: 'ms', note: `p50 ${idle.p50} ms, ${idle.rps.toFixed(0)} req/s, c=${ctx.connections}, ${idle.bad} non-2xx` },
    {
      name: 'GET /api/v1/locations p99, four viewer floods of the worst allowed staff document', value: busy.p99, unit: 'ms', target: '≤ 1.25 × idle',
      note: `${(ratio * 100).toFixed(0)} % of idle; p50 ${busy.p50} ms, ${busy.rps.toFixed(0)} req/s, ${busy.bad} non-2xx; flood "${worst.name}" `
        + `(${ALIASES} aliases, ${(worst.bytes / 1e6).toFixed(2)} MB per answer): ${answered} answered, ${refused} refused in ${ctx.seconds} s`,
    },
  ];
}

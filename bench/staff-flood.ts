/**
 * Staff floods against the API (`BENCH_ONLY=staff-flood npm run bench`; docs/staff.md "Bounds"):
 * `GET /api/v1/locations` p99 (autocannon, c=BENCH_CONNECTIONS) idle, then while four viewers
 * send the worst document the staff bounds allow back to back for BENCH_STAFF_FLOOD_SECONDS (20).
 * Target: flood p99 within 25 % of idle; the ratio is a row of its own, and each phase is broken
 * down (bench/staff-flood-probe.ts: CPU per thread and database application, the API's event-loop
 * delay, the API backends' waits). The viewers run in a child process (startFloods).
 *
 * "Worst allowed": STAFF_MAX_ALIASES (20) aliases of the heaviest selection a viewer may make
 * over the `mid` location's calls (run with BENCH_MID_CALLS=2000 for the reported case):
 * candidates are groupedAggregates by several keys and a full page of rows, each as 20 aliases;
 * the one with the largest answer that is still answered (not refused by a bound) is the flood.
 */
import { spawn } from 'node:child_process';
import autocannon from 'autocannon';
import type pg from 'pg';
import { mintToken } from '../src/auth/tokens.js';
import { describe, startPhaseProbe } from './staff-flood-probe.js';

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
  /** The service's process (npm start), for the CPU breakdown. */
  servicePid: number;
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

const FLOODS = 4;

/**
 * The viewers' clients, in a process of their own: reading 1.7 MB answers on the bench's event
 * loop would delay autocannon's own reads and show up as API latency (the first measurements did).
 * It sends the document back to back on `n` connections until told to stop on stdin, then prints
 * its counts.
 */
const FLOOD_CLIENT = `
const { url, token, query, variables, n } = JSON.parse(process.env.FLOOD);
let on = true;
const statuses = {};
const one = async () => {
  while (on) {
    let status = 0;
    try {
      const r = await fetch(url + '/graphql', { method: 'POST', body: JSON.stringify({ query, variables }),
        headers: { 'content-type': 'application/json', accept: 'application/json', authorization: 'Bearer ' + token } });
      await r.arrayBuffer();
      status = r.status;
      if (status === 503) await new Promise((res) => setTimeout(res, 100));
    } catch { await new Promise((res) => setTimeout(res, 100)); }
    statuses[status] = (statuses[status] ?? 0) + 1;
  }
};
const all = Array.from({ length: n }, one);
process.stdin.once('data', async () => { on = false; await Promise.all(all); process.stdout.write(JSON.stringify(statuses) + '\\n'); process.exit(0); });
`;

function startFloods(adminUrl: string, token: string, query: string, variables: Record<string, unknown>, n: number) {
  const child = spawn(process.execPath, ['-e', FLOOD_CLIENT], {
    stdio: ['pipe', 'pipe', 'inherit'], env: { PATH: process.env.PATH, FLOOD: JSON.stringify({ url: adminUrl, token, query, variables, n }) },
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  return {
    pid: child.pid,
    stop: () =>
      new Promise<{ answered: number; refused: number; statuses: Record<string, number> }>((resolve, reject) => {
        child.once('exit', () => {
          try {
            const statuses = JSON.parse(out) as Record<string, number>;
            const answered = statuses['200'] ?? 0;
            resolve({ answered, refused: Object.values(statuses).reduce((a, b) => a + b, 0) - answered, statuses });
          } catch (err) {
            reject(err as Error);
          }
        });
        child.stdin.write('stop\n');
      }),
  };
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
  const probe = () => startPhaseProbe({ owner: ctx.owner, servicePid: ctx.servicePid, adminUrl: ctx.adminUrl });
  const idleProbe = await probe();
  const idle = await p99Of(url, ctx.apiAuth, ctx.connections, ctx.seconds);
  const idleWhere = await idleProbe.stop();
  const floods = startFloods(ctx.adminUrl, token, worst.query, vars, FLOODS);
  const floodProbe = await startPhaseProbe({ owner: ctx.owner, servicePid: ctx.servicePid, adminUrl: ctx.adminUrl, clientPid: () => floods.pid });
  const busy = await p99Of(url, ctx.apiAuth, ctx.connections, ctx.seconds);
  const floodWhere = await floodProbe.stop();
  const { answered, refused, statuses } = await floods.stop();
  const ratio = busy.p99 / Math.max(1, idle.p99);
  ctx.progress(`staff-flood: idle: ${describe(idleWhere)}`);
  ctx.progress(`staff-flood: flood: ${describe(floodWhere)}`);
  ctx.progress(`staff-flood: GET /api/v1/locations p99 ${idle.p99} ms idle, ${busy.p99} ms under the floods: ${(ratio * 100).toFixed(0)} % of idle (target ≤ 125 %)`);
  return [
    { name: 'GET /api/v1/locations p99, idle', value: idle.p99, unit: 'ms', note: `p50 ${idle.p50} ms, ${idle.rps.toFixed(0)} req/s, c=${ctx.connections}, ${idle.bad} non-2xx` },
    {
      name: 'GET /api/v1/locations p99, four viewer floods of the worst allowed staff document', value: busy.p99, unit: 'ms', target: '≤ 1.25 × idle',
      note: `${(ratio * 100).toFixed(0)} % of idle; p50 ${busy.p50} ms, ${busy.rps.toFixed(0)} req/s, ${busy.bad} non-2xx; flood "${worst.name}" `
        + `(${ALIASES} aliases, ${(worst.bytes / 1e6).toFixed(2)} MB per answer): ${answered} answered, ${refused} refused (${JSON.stringify(statuses)}) in ${ctx.seconds} s`,
    },
    { name: 'staff floods: API p99 under the floods / idle p99', value: Math.round(ratio * 100), unit: '%', target: '≤ 125 %',
      note: ratio <= 1.25 ? 'met' : 'NOT met' },
    { name: 'staff floods: where the time goes, idle', value: idle.p99, unit: 'ms', note: describe(idleWhere) },
    { name: 'staff floods: where the time goes, under the floods', value: busy.p99, unit: 'ms', note: describe(floodWhere) },
  ];
}

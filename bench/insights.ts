/**
 * Insights: days=90 on 1,000,000 calls (warm, sequential) and days=30 on 50,000 calls under load;
 * GET calls by date and by outcome and emergency together in the 1,000,000 calls (warm, sequential).
 */
import type autocannon from 'autocannon';
import { CONNECTIONS, MID_CALLS, progress, type BenchContext, type BenchRow } from './common.js';
import { pair, probe, sequential } from './load.js';

export async function runInsightsBench({ base, bbase, auth, owner, big }: BenchContext): Promise<BenchRow[]> {
  const rows: BenchRow[] = [];
  if (!big) return rows;
  const get = (url: string, headers: Record<string, string> = {}): autocannon.Options => ({ url, headers, connections: CONNECTIONS });
  progress('insights?days=90 on 1,000,000 calls: warm, sequential');
  const trivial = await sequential(`${bbase}/one`, {}, 50, 5_000);
  const ms90 = await sequential(`${base}/api/v1/locations/big/insights?days=90`, auth('big'), 7, 30_000);
  const callsIn90 = Number((await owner.query(
    `select count(*) n from app.calls where location_id = $1 and started_at >= now() - interval '90 days'`, [big.id])).rows[0].n);
  rows.push({ name: `insights?days=90 (${(callsIn90 / 1e6).toFixed(2)} M calls) latency`, value: ms90, unit: 'ms', baseline: trivial,
    ratio: trivial / ms90, target: '< 50 ms', note: 'median of sequential warm requests; baseline: bare trivial query' });

  // Calls by date in the same location: a window far back (the newer calls outnumber it), a
  // month far back, and a recent day (docs/performance.md, "Calls by date"); then filters in
  // combination: no spam call of the demo seed is an emergency (docs/performance.md, "Filters in
  // combination").
  const { rows: [span] } = await owner.query('select max(started_at) as last from app.calls where location_id = $1', [big.id]);
  const day = 86_400_000;
  const at = (daysBack: number) => new Date(new Date(span.last).getTime() - daysBack * day).toISOString();
  const lists: [string, string][] = [
    ['from=&to=, a day 60 days back', `from=${at(60)}&to=${at(59)}`], ['from=&to=, a month 60 days back', `from=${at(60)}&to=${at(30)}`],
    ['from=&to=, the last day', `from=${at(1)}`], ['outcome=spam&is_emergency=true, none', 'outcome=spam&is_emergency=true'],
    ['is_emergency=true', 'is_emergency=true'],
  ];
  for (const [label, query] of lists) {
    progress(`GET calls?${label}, in 1,000,000 calls: warm, sequential`);
    const ms = await sequential(`${base}/api/v1/locations/big/calls?${query}`, auth('big'), 7, 30_000);
    rows.push({ name: `GET calls?${label} (1 M calls) latency`, value: ms, unit: 'ms', baseline: trivial, ratio: trivial / ms,
      target: label.includes('a month') ? '' : '< 50 ms', note: 'median of sequential warm requests, first page of 50; baseline: bare trivial query' });
  }

  await probe(`${base}/api/v1/locations/mid/insights?days=30`, { headers: auth('mid') });
  progress(`insights?days=30 on ${MID_CALLS.toLocaleString('en')} calls: c=${CONNECTIONS}`);
  const [b, s] = await pair(get(`${bbase}/one`), get(`${base}/api/v1/locations/mid/insights?days=30`, auth('mid')));
  rows.push({ name: `insights?days=30 (${(MID_CALLS / 1e3).toFixed(0)} k calls) req/s`, value: s.rps, unit: 'req/s', baseline: b.rps,
    ratio: s.rps / b.rps, target: 'from the rollup (today 12 req/s, p99 4.5 s)', note: `p99 ${s.p99} ms; baseline: bare trivial query` });
  return rows;
}

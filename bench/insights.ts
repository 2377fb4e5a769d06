/** Insights: days=90 on 1,000,000 calls (warm, sequential) and days=30 on 50,000 calls under load. */
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

  await probe(`${base}/api/v1/locations/mid/insights?days=30`, { headers: auth('mid') });
  progress(`insights?days=30 on ${MID_CALLS.toLocaleString('en')} calls: c=${CONNECTIONS}`);
  const [b, s] = await pair(get(`${bbase}/one`), get(`${base}/api/v1/locations/mid/insights?days=30`, auth('mid')));
  rows.push({ name: `insights?days=30 (${(MID_CALLS / 1e3).toFixed(0)} k calls) req/s`, value: s.rps, unit: 'req/s', baseline: b.rps,
    ratio: s.rps / b.rps, target: 'from the rollup (today 12 req/s, p99 4.5 s)', note: `p99 ${s.p99} ms; baseline: bare trivial query` });
  return rows;
}

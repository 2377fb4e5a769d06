/** List reads and GET /me: the service vs the bare baseline returning the same rows. */
import type autocannon from 'autocannon';
import { CONNECTIONS, progress, SECONDS, type BenchContext, type BenchRow } from './common.js';
import { pair, probe } from './load.js';

export async function runListsBench({ base, bbase, auth }: BenchContext): Promise<BenchRow[]> {
  const rows: BenchRow[] = [];
  const get = (url: string, headers: Record<string, string> = {}): autocannon.Options => ({ url, headers, connections: CONNECTIONS });
  const targets: [string, string, string, string][] = [
    ['GET /me', '/api/v1/me', '/one', '≥ 90 % of bare express + one trivial query'],
    ['GET calls (page of 50)', '/api/v1/locations/mid/calls', '/calls', '≥ 80 % of bare express + pg, same 50 rows'],
    ['GET leads (page of 50)', '/api/v1/locations/mid/leads', '/leads', '≥ 80 % of bare express + pg, same 50 rows'],
  ];
  for (const [name, svcPath, basePath, target] of targets) {
    await probe(base + svcPath, { headers: auth('mid') });
    await probe(bbase + basePath);
    progress(`${name}: ${SECONDS} s each, c=${CONNECTIONS}`);
    const [b, s] = await pair(get(bbase + basePath), get(base + svcPath, auth('mid')));
    rows.push({ name: `${name} req/s`, value: s.rps, unit: 'req/s', baseline: b.rps, ratio: s.rps / b.rps, target,
      note: `p99 ${s.p99} ms (baseline ${b.p99} ms)${s.bad + b.bad ? `; ${s.bad}/${b.bad} failed` : ''}` });
  }
  return rows;
}

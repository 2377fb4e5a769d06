/**
 * List reads, GET /me, and a refused request (another location's list: a 404 raised by
 * app.authorize): the service vs the bare baseline returning the same rows.
 */
import type autocannon from 'autocannon';
import { CONNECTIONS, progress, SECONDS, type BenchContext, type BenchRow } from './common.js';
import { pair, probe } from './load.js';

export async function runListsBench({ base, bbase, auth }: BenchContext): Promise<BenchRow[]> {
  const rows: BenchRow[] = [];
  const get = (url: string, headers: Record<string, string> = {}): autocannon.Options => ({ url, headers, connections: CONNECTIONS });
  const targets: [string, string, string, string, number][] = [
    ['GET /me', '/api/v1/me', '/one', '≥ 90 % of bare express + one trivial query', 200],
    ['GET calls (page of 50)', '/api/v1/locations/mid/calls', '/calls', '≥ 80 % of bare express + pg, same 50 rows', 200],
    ['GET leads (page of 50)', '/api/v1/locations/mid/leads', '/leads', '≥ 80 % of bare express + pg, same 50 rows', 200],
    // The mid location's key naming another location: the database refuses it (404).
    // No target of an issue: it shows that a refusal costs a request, not a new backend (docs/performance.md).
    ['GET another location\'s leads (404)', '/api/v1/locations/ingest/leads', '/one', '', 404],
  ];
  for (const [name, svcPath, basePath, target, status] of targets) {
    await probe(base + svcPath, { headers: auth('mid') }, status);
    await probe(bbase + basePath);
    progress(`${name}: ${SECONDS} s each, c=${CONNECTIONS}`);
    const [b, s] = await pair(get(bbase + basePath), get(base + svcPath, auth('mid')));
    // A refused request's answers are all non-2xx by design: count what was not refused instead.
    const failed = status === 200 ? s.bad : s.requests - s.bad;
    rows.push({ name: `${name} req/s`, value: s.rps, unit: 'req/s', baseline: b.rps, ratio: s.rps / b.rps, target,
      note: `p99 ${s.p99} ms (baseline ${b.p99} ms)${failed + b.bad ? `; ${failed}/${b.bad} failed` : ''}` });
  }
  return rows;
}

/**
 * BENCH_ONLY=idempotency (bench/run.ts): what an Idempotency-Key costs a POST. The same running
 * service takes `POST /locations/{loc}/leads` with and without the header (a distinct key per
 * request, so every request runs and stores its answer).
 * - Latency: sequential requests, with and without the header interleaved one by one (so load from
 *   anything else on the machine hits both alike), median of each.
 * - Throughput at c=10: autocannon, alternating A B B A in halves.
 */
import { randomUUID } from 'node:crypto';
import autocannon from 'autocannon';
import { median, type BenchRow } from './common.js';

export interface IdempotencyBenchCtx {
  base: string;
  /** A token of `location` with leads:write. */
  token: string;
  location: string;
  seconds: number;
  connections: number;
  progress: (msg: string) => void;
}

interface Side {
  requests: number;
  latencyMs: number;
  p99: number;
  bad: number;
}

/** Median latency of sequential POSTs, with and without a key, interleaved request by request. */
async function interleaved(url: string, token: string, body: () => string, seconds: number): Promise<{ bare: number[]; keyed: number[] }> {
  const times = { bare: [] as number[], keyed: [] as number[] };
  const once = async (withKey: boolean) => {
    const headers: Record<string, string> = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    if (withKey) headers['idempotency-key'] = randomUUID();
    const s = performance.now();
    const res = await fetch(url, { method: 'POST', headers, body: body() });
    await res.arrayBuffer();
    if (res.status !== 201) throw new Error(`POST leads: ${res.status}`);
    return performance.now() - s;
  };
  for (let i = 0; i < 20; i++) await once(i % 2 === 0);
  const until = Date.now() + seconds * 1000;
  for (let i = 0; Date.now() < until || i < 50; i++) {
    // Alternate which goes first, so neither always follows the other.
    const first = i % 2 === 0;
    const a = await once(first);
    const b = await once(!first);
    times[first ? 'keyed' : 'bare'].push(a);
    times[first ? 'bare' : 'keyed'].push(b);
  }
  return times;
}

export async function runIdempotencyBench(ctx: IdempotencyBenchCtx): Promise<BenchRow[]> {
  const url = `${ctx.base}/api/v1/locations/${ctx.location}/leads`;
  let n = 0;
  const body = () => JSON.stringify({ name: `Bench Lead ${++n}`, phone: '+13125550142', service_type: 'No heat', urgency_level: 3 });
  ctx.progress(`POST leads latency with and without Idempotency-Key: sequential, interleaved, ${ctx.seconds} s`);
  const seq = await interleaved(url, ctx.token, body, ctx.seconds);
  const seqBare = median(seq.bare);
  const seqKeyed = median(seq.keyed);
  const latencyRow: BenchRow = {
    name: 'POST leads with Idempotency-Key, median latency',
    value: seqKeyed,
    unit: 'ms',
    baseline: seqBare,
    ratio: seqBare / seqKeyed,
    target: '< 10 % added (ratio ≥ 91 %)',
    note: `${((seqKeyed / seqBare - 1) * 100).toFixed(1)} % added; ${seq.keyed.length} requests each, sequential, interleaved; baseline: the same POST without the header`,
  };
  const run = async (withKey: boolean, duration: number): Promise<Side> => {
    const r = await autocannon({
      url, connections: ctx.connections, duration,
      requests: [{ method: 'POST', setupRequest: (req) => ({
        ...req,
        body: body(),
        headers: {
          authorization: `Bearer ${ctx.token}`, 'content-type': 'application/json',
          ...(withKey ? { 'idempotency-key': randomUUID() } : {}),
        },
      }) }],
    });
    return { requests: r.requests.total, latencyMs: r.latency.mean, p99: r.latency.p99, bad: r.non2xx + r.errors + r.timeouts };
  };
  const half = Math.max(1, ctx.seconds / 2);
  ctx.progress(`POST leads with and without Idempotency-Key: ${ctx.seconds} s each, c=${ctx.connections}`);
  await run(false, 1);
  await run(true, 1);
  const a1 = await run(false, half);
  const b1 = await run(true, half);
  const b2 = await run(true, half);
  const a2 = await run(false, half);
  const merge = (x: Side, y: Side): Side => ({
    requests: x.requests + y.requests,
    latencyMs: (x.latencyMs * x.requests + y.latencyMs * y.requests) / Math.max(1, x.requests + y.requests),
    p99: Math.max(x.p99, y.p99),
    bad: x.bad + y.bad,
  });
  const bare = merge(a1, a2);
  const keyed = merge(b1, b2);
  const added = keyed.latencyMs / bare.latencyMs - 1;
  return [latencyRow, {
    name: `POST leads with Idempotency-Key at c=${ctx.connections}, mean latency`,
    value: keyed.latencyMs,
    unit: 'ms',
    baseline: bare.latencyMs,
    ratio: bare.latencyMs / keyed.latencyMs,
    note: `${(added * 100).toFixed(1)} % added under load; ${(keyed.requests / (2 * half)).toFixed(0)} vs ${(bare.requests / (2 * half)).toFixed(0)} req/s; `
      + `p99 ${keyed.p99} vs ${bare.p99} ms; baseline: the same POST without the header${keyed.bad + bare.bad ? `; ${keyed.bad}/${bare.bad} failed` : ''}`,
  }];
}

/**
 * BENCH_ONLY=idempotency (bench/run.ts): what an Idempotency-Key costs a POST. The same running
 * service takes `POST /locations/{loc}/leads` with and without the header (a distinct key per
 * request, so every request runs and stores its answer), alternating A B B A in halves so drift on
 * a shared machine hits both alike. Latency is autocannon's mean over every request of each side.
 */
import { randomUUID } from 'node:crypto';
import autocannon from 'autocannon';

export interface IdempotencyBenchRow {
  name: string;
  value: number;
  unit: string;
  baseline?: number;
  ratio?: number;
  target?: string;
  note?: string;
}

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

export async function runIdempotencyBench(ctx: IdempotencyBenchCtx): Promise<IdempotencyBenchRow[]> {
  const url = `${ctx.base}/api/v1/locations/${ctx.location}/leads`;
  let n = 0;
  const body = () => JSON.stringify({ name: `Bench Lead ${++n}`, phone: '+13125550142', service_type: 'No heat', urgency_level: 3 });
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
  return [{
    name: 'POST leads with Idempotency-Key, mean latency',
    value: keyed.latencyMs,
    unit: 'ms',
    baseline: bare.latencyMs,
    ratio: bare.latencyMs / keyed.latencyMs,
    target: '< 10 % added (ratio ≥ 91 %)',
    note: `${(added * 100).toFixed(1)} % added; ${(keyed.requests / (2 * half)).toFixed(0)} vs ${(bare.requests / (2 * half)).toFixed(0)} req/s; `
      + `p99 ${keyed.p99} vs ${bare.p99} ms; baseline: the same POST without the header${keyed.bad + bare.bad ? `; ${keyed.bad}/${bare.bad} failed` : ''}`,
  }];
}

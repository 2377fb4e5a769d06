/**
 * Bench section `redaction` (docs/privacy.md "Redaction at ingestion", docs/performance.md):
 * what redaction costs per ingested call, measured in the same run as ingestion.
 *
 * Realistic Retell post-call bodies (call_analyzed with transcript, turns and word timings; the
 * shapes of test/fixtures/voice/booked.json and card-payment.json, one call in ten reading out a
 * card number, its expiry and code, and an SSN) are posted by BENCH_SENDERS senders to a location
 * of its own, with the location's redaction on and off in alternating halves (on, off, off, on).
 * The scan runs in the voice route either way (the setting is only known inside the SQL function),
 * so the cost is measured where it is spent: the CPU time of redactCall() on the same bodies in this process, against the service's
 * CPU per ingested call (its node process tree + the cluster) during the load with redaction on.
 * The on/off loads are reported beside it (CPU per call and calls/s of each).
 */
import { createHmac, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import autocannon from 'autocannon';
import type pg from 'pg';
import { projectRoot } from '../src/db/migrate.js';
import { redactCall } from '../src/privacy/call.js';
import { clusterCpuMs, treeCpuMs } from './proc.js';
import type { BenchRow } from './common.js';

export interface RedactionBenchContext {
  base: string;
  owner: pg.Pool;
  servicePid: number;
  pgDir: string;
  voiceSecret: string;
  senders: number;
  seconds: number;
  progress: (msg: string) => void;
}

const PHONE = '+13125550177';
const fixture = (name: string) => JSON.parse(fs.readFileSync(path.join(projectRoot, 'test', 'fixtures', 'voice', `${name}.json`), 'utf8'));

/** Body n of the mix: a new call each, one in ten with a card number read out. */
export function benchBodies(runId: string): (n: number) => string {
  const booked = fixture('booked');
  const card = fixture('card-payment');
  return (n: number) => {
    const body = structuredClone(n % 10 === 0 ? card : booked);
    const start = Date.now() - 240_000;
    Object.assign(body.call, {
      call_id: `redact_${runId}_${n}`, to_number: PHONE, metadata: {},
      from_number: `+1312${String(2_000_000 + ((n * 7919) % 7_000_000)).padStart(7, '0')}`,
      start_timestamp: start, end_timestamp: start + 180_000,
    });
    return JSON.stringify(body);
  };
}

const signed = (secret: string, body: string) => {
  const ts = Date.now();
  return `v=${ts},d=${createHmac('sha256', secret).update(body + ts).digest('hex')}`;
};

/** CPU ms of redactCall per body over the mix, after a warm-up (this process, one core). */
function redactorCpuMs(bodyAt: (n: number) => string): { ms: number; found: number } {
  const calls = Array.from({ length: 200 }, (_, i) => JSON.parse(bodyAt(i)).call);
  for (let r = 0; r < 5; r++) for (const c of calls) redactCall(c);
  let found = 0;
  let runs = 0;
  const t0 = process.cpuUsage();
  const until = performance.now() + 2000;
  while (performance.now() < until) {
    for (const c of calls) if (redactCall(c)) found++;
    runs += calls.length;
  }
  const used = process.cpuUsage(t0);
  return { ms: (used.user + used.system) / 1000 / runs, found: found / (runs / calls.length) };
}

export async function runRedactionBench(ctx: RedactionBenchContext): Promise<BenchRow[]> {
  const { owner, base } = ctx;
  const found = await owner.query('select id from app.locations where slug = $1', ['redact']);
  const locId: string = found.rows[0]?.id
    ?? (await owner.query(`select admin.location_create($1) ->> 'id' as id`, [{ name: 'redact', slug: 'redact', timezone: 'America/Chicago', service_phone: PHONE }])).rows[0].id;
  const bodyAt = benchBodies(randomUUID().slice(0, 8));
  let seq = 0;
  const load = (seconds: number) => autocannon({
    url: `${base}/api/voice/post-call`, connections: ctx.senders, duration: seconds,
    requests: [{ method: 'POST', setupRequest: (req) => {
      const body = bodyAt(++seq);
      return { ...req, body, headers: { 'content-type': 'application/json', 'x-retell-signature': signed(ctx.voiceSecret, body) } };
    } }],
  });
  const settled = async () => Number((await owner.query(
    'select count(*) n from app.calls where location_id = $1 and finalized_at is not null', [locId])).rows[0].n);

  const half = Math.max(1, ctx.seconds / 2);
  const measure = async (redact: boolean) => {
    await owner.query('update app.privacy_settings set redact_sensitive_data = $2 where location_id = $1', [locId, redact]);
    const before = await settled();
    const cpu0 = treeCpuMs(ctx.servicePid) + clusterCpuMs(ctx.pgDir);
    const r = await load(half);
    return { calls: (await settled()) - before, cpu: treeCpuMs(ctx.servicePid) + clusterCpuMs(ctx.pgDir) - cpu0, bad: r.non2xx + r.errors + r.timeouts };
  };
  const merge = (a: Awaited<ReturnType<typeof measure>>, b: Awaited<ReturnType<typeof measure>>) => ({
    cpu: (a.cpu + b.cpu) / Math.max(1, a.calls + b.calls), perSecond: (a.calls + b.calls) / (2 * half), bad: a.bad + b.bad,
  });

  ctx.progress(`redaction: warm-up, then ${ctx.seconds} s with redaction on and ${ctx.seconds} s off in alternating halves (${ctx.senders} senders, realistic transcripts)`);
  await load(Math.min(3, ctx.seconds));
  await owner.query('analyze app.calls');
  // On, off, off, on: drift on a shared machine (and the growing table) hits both alike.
  const on1 = await measure(true);
  const off1 = await measure(false);
  const off2 = await measure(false);
  const on2 = await measure(true);
  const on = merge(on1, on2);
  const off = merge(off1, off2);
  const redactor = redactorCpuMs(bodyAt);
  const share = (100 * redactor.ms) / on.cpu;
  const stored = (await owner.query(
    `select count(*) filter (where transcript like '%[card ending 4242]%')::int as redacted,
            count(*) filter (where transcript like '%4 2 4 2 4 2 4 2%')::int as spoken
       from app.calls where location_id = $1`, [locId])).rows[0];
  return [
    {
      name: 'redaction CPU per ingested call (share of the service CPU per call)', value: share, unit: '%', target: '< 5 %',
      note: `redactCall ${(redactor.ms * 1000).toFixed(0)} µs per call over the mix (${((redactor.found * 100) / 200).toFixed(0)} % of calls have something to redact) vs the service's ${on.cpu.toFixed(2)} ms CPU per call (node + postgres) with redaction on`,
    },
    {
      name: 'ingestion with realistic transcripts, redaction on (baseline: off) calls/s', value: on.perSecond, unit: 'calls/s', baseline: off.perSecond,
      ratio: on.perSecond / off.perSecond, target: 'on ≈ off',
      note: `CPU per call on ${on.cpu.toFixed(2)} ms, off ${off.cpu.toFixed(2)} ms; ${on.bad + off.bad} failed; card calls stored redacted ${stored.redacted}, as spoken (off) ${stored.spoken}; the scan runs in both, the setting picks the stored copy in SQL; bodies of 10–27 kB with word timings, so fewer calls/s than the ingestion row (whose ≥ 400/s target it is)`,
    },
  ];
}

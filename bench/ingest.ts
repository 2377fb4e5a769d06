/**
 * Signed post-call ingestion with full fan-out (two webhook endpoints, SMS, e-mail and Slack
 * notifications; the worker runs) vs the baseline inserting each body with one INSERT; the CPU per
 * finalised call, the RSS of the service's tree, the backlog it left and the emergency SMS latency.
 * BENCH_INGEST_FANOUT=off measures the same without any fan-out (see below).
 */
import { createHmac, randomUUID } from 'node:crypto';
import path from 'node:path';
import type autocannon from 'autocannon';
import { verify } from 'retell-sdk';
import {
  DRAIN_SECONDS, INGEST_SECONDS, progress, SECONDS, SENDERS, SERVICE_PHONE, sleep, VOICE_SECRET, WARMUP_SECONDS,
  type BenchContext, type BenchRow,
} from './common.js';
import { cannon, probe, treeRss } from './load.js';
import { clusterCpuMs, treeCpuMs } from './proc.js';

export async function runIngestBench(ctx: BenchContext): Promise<BenchRow[]> {
  const { base, bbase, auth, owner, ingest, https, smtp, dataDir, servicePid } = ctx;
  const rows: BenchRow[] = [];
  const h = { ...auth('ingest'), 'content-type': 'application/json' };
  for (const label of ['bench-a', 'bench-b']) {
    await probe(`${base}/api/v1/locations/ingest/webhook-endpoints`, { method: 'POST', headers: h,
      body: JSON.stringify({ label, url: `${https.url}/hook/${label}`, events: ['call.ended', 'call.emergency', 'lead.created', 'lead.updated', 'booking.created', 'booking.updated', 'spam.blocked'] }) });
  }
  await probe(`${base}/api/v1/locations/ingest/integrations`, { method: 'POST', headers: h,
    body: JSON.stringify({ provider: 'slack', webhook_url: `${https.url}/slack`, label: 'bench' }) });

  const { next: nextBody, headers: headersFor } = postCallBodies();
  const first = nextBody();
  if (!(await verify(first, VOICE_SECRET, headersFor(first)['x-retell-signature']))) throw new Error('bench signature does not verify with retell-sdk');
  await probe(`${base}/api/voice/post-call`, { method: 'POST', headers: headersFor(first), body: first });
  const postOpts = (url: string, duration: number): autocannon.Options => ({
    url, connections: SENDERS, duration,
    requests: [{ method: 'POST', setupRequest: (req) => {
      const body = nextBody();
      return { ...req, body, headers: headersFor(body) };
    } }],
  });

  // BENCH_INGEST_FANOUT=off: the events' two fan-out triggers (webhook attempts, notifications)
  // are disabled for the warm-up and the measured seconds, so the rows show what intake costs
  // with no fan-out at all (docs/performance.md, "The twenty-ninth round"). The state is set
  // either way first, so a kept cluster (BENCH_DATA_DIR) that an interrupted run left without
  // them gets them back.
  const fanout = (process.env.BENCH_INGEST_FANOUT ?? 'on') !== 'off';
  const fanoutTriggers = (on: boolean) => owner.query(
    `alter table app.events ${on ? 'enable' : 'disable'} trigger _500_webhook_fanout, ${on ? 'enable' : 'disable'} trigger _600_notify`);
  await fanoutTriggers(fanout);

  // Baseline: the same bodies, one INSERT each.
  progress(`ingestion baseline: bare express + one INSERT, ${SENDERS} senders`);
  await cannon(postOpts(`${bbase}/insert`, 1));
  const bIns = await cannon(postOpts(`${bbase}/insert`, Math.max(2, SECONDS / 2)));

  // The service gets a warm-up too, then the ANALYZE autovacuum would run after its first pass:
  // without it the measured seconds run on plans made while the ingestion tables were empty
  // (foreign-key checks as sequential scans of a growing app.events, for one), a state a running
  // installation leaves within its first minute.
  if (WARMUP_SECONDS > 0) {
    progress(`ingestion warm-up: ${WARMUP_SECONDS} s of the same load, then ANALYZE`);
    await cannon(postOpts(`${base}/api/voice/post-call`, WARMUP_SECONDS));
    await owner.query('analyze');
  }

  const finalised = async () => Number((await owner.query(
    'select count(*) n from app.calls where location_id = $1 and finalized_at is not null', [ingest.id])).rows[0].n);
  const before = await finalised();
  let peak = treeRss(servicePid);
  let sampling = true;
  const samples: number[] = [];
  const sampler = (async () => {
    while (sampling) {
      const r = treeRss(servicePid);
      samples.push(r.total);
      if (r.total > peak.total) peak = r;
      await sleep(250);
    }
  })();
  progress(`ingestion: signed call_analyzed, ${SENDERS} senders, ${INGEST_SECONDS} s`);
  const pgDir = path.join(dataDir, 'pg');
  const cpu0 = { node: treeCpuMs(servicePid), pg: clusterCpuMs(pgDir), self: process.cpuUsage() };
  const loadStart = new Date();
  const ing = await cannon(postOpts(`${base}/api/voice/post-call`, INGEST_SECONDS));
  const loadEnd = new Date();
  if (!fanout) await fanoutTriggers(true);
  const after = await finalised();
  const selfCpu = process.cpuUsage(cpu0.self);
  const cpuPer = {
    node: (treeCpuMs(servicePid) - cpu0.node) / Math.max(1, after - before),
    pg: (clusterCpuMs(pgDir) - cpu0.pg) / Math.max(1, after - before),
    bench: (selfCpu.user + selfCpu.system) / 1000 / Math.max(1, after - before),
  };
  const perSecond = (after - before) / INGEST_SECONDS;
  const underLoadPeak = peak.total;
  rows.push({ name: `post-call ingestion, ${fanout ? 'full fan-out' : 'no fan-out (BENCH_INGEST_FANOUT=off)'} (${SENDERS} senders) finalised calls/s`, value: perSecond, unit: 'calls/s',
    baseline: bIns.rps, ratio: perSecond / bIns.rps, target: fanout ? '≥ 400/s' : undefined,
    note: `p99 ${ing.p99} ms; ${ing.bad} failed; baseline: bare express + one INSERT per body` });
  rows.push({ name: 'CPU per finalised call during the load', value: cpuPer.node + cpuPer.pg, unit: 'ms',
    note: `service node (API + worker) ${cpuPer.node.toFixed(2)} ms + postgres ${cpuPer.pg.toFixed(2)} ms; senders and receivers (this process) ${cpuPer.bench.toFixed(2)} ms` });

  // The backlog the load left (webhook attempts, notifications), drained by the worker.
  // Webhook attempts and notifications are pending rows (the engines' queues); the rest are jobs.
  const backlog = async () => Number((await owner.query(
    `select (select count(*) from graphile_worker.jobs) + (select count(*) from app.webhook_deliveries where status = 'pending')
            + (select count(*) from app.notifications where status = 'pending') as n`)).rows[0].n);
  const left = await backlog();
  const drainStart = Date.now();
  let remaining = left;
  while (remaining > 0 && Date.now() - drainStart < DRAIN_SECONDS * 1000) {
    await sleep(1000);
    remaining = await backlog();
  }
  sampling = false;
  await sampler;
  const drained = (Date.now() - drainStart) / 1000;
  const baseRss = treeRss(ctx.baselinePid).total;
  rows.push({ name: 'RSS of the service process tree under ingestion (peak)', value: peak.total, unit: 'MB', baseline: baseRss,
    ratio: baseRss / peak.total, target: '≤ 300 MB',
    note: `${peak.parts.map((p) => `${p.cmd.split(' ').slice(0, 2).join(' ')} ${p.mb.toFixed(0)}`).join(' + ')}; peak during the load ${underLoadPeak.toFixed(0)} MB; idle ${ctx.idleRss.toFixed(0)} MB; baseline: the bare baseline process` });
  const counts = Object.fromEntries(https.counts);
  rows.push({ name: 'fan-out backlog after the load (pending webhook attempts, notifications, jobs)', value: left, unit: 'items',
    note: `${remaining === 0 ? `drained in ${drained.toFixed(0)} s` : `${remaining} left after ${DRAIN_SECONDS} s`}; received: webhooks ${(counts['/hook/bench-a'] ?? 0) + (counts['/hook/bench-b'] ?? 0)}, slack ${counts['/slack'] ?? 0}, sms ${counts['/sms'] ?? 0}, e-mail ${smtp.count()}` });

  // Emergencies of the measured seconds: from the ingestion transaction to the SMS receiver's
  // answer (the 'sent' log entry), while intake had the CPU first (docs/performance.md).
  const em = (await owner.query(
    `select count(*)::int as n, count(s.at)::int as sent,
            percentile_cont(0.5) within group (order by s.ms) as p50, percentile_cont(0.99) within group (order by s.ms) as p99
       from app.notifications n
       left join lateral (select l.at, extract(epoch from l.at - n.created_at) * 1000 as ms from app.notification_log l
                           where l.location_id = n.location_id and l.notification_id = n.id and l.status = 'sent' limit 1) s on true
      where n.location_id = $1 and n.event = 'call.emergency' and n.channel = 'sms'
        and n.created_at >= $2 and n.created_at < $3`, [ingest.id, loadStart, loadEnd])).rows[0];
  rows.push({ name: 'emergency SMS during the ingestion load (call to SMS sent, p99)', value: Math.round(em.p99 ?? 0), unit: 'ms',
    note: `${em.n} emergency SMS of the measured seconds, ${em.sent} sent; median ${Math.round(em.p50 ?? 0)} ms; counted from the ingestion transaction` });
  return rows;
}

/**
 * Signed `call_analyzed` post-calls, a new call each, in a mix like real traffic (60 % leads,
 * 20 % bookings, 10 % emergencies, 10 % other) to SERVICE_PHONE, or to each of `phones` in turn
 * ten calls at a time, so that each gets the whole mix (the dialled number routes a call to its
 * location): `next()` is the next body, `headers(body)` its signed headers.
 */
export function postCallBodies(phones: string[] = [SERVICE_PHONE]): { next(): string; headers(body: string): Record<string, string> } {
  const runId = randomUUID().slice(0, 8);
  let seq = 0;
  const signed = (body: string) => {
    const ts = Date.now();
    return `v=${ts},d=${createHmac('sha256', VOICE_SECRET).update(body + ts).digest('hex')}`;
  };
  const nextBody = () => {
    const n = ++seq;
    const kind = n % 10;
    const start = Date.now() - 240_000;
    const analysis: Record<string, unknown> = kind === 0
      ? { outcome: 'lead', urgency_level: 5, service_type: 'No heat', caller_name: 'Dana Bench', issue_summary: 'Furnace out' }
      : kind <= 2
        ? { outcome: 'booked', urgency_level: 2, service_type: 'AC repair', caller_name: 'Sam Bench', caller_address: '1 Oak St',
            appointment_date: new Date(Date.now() + 2 * 86400_000).toISOString().slice(0, 10), appointment_time: '10:00', estimated_value: 350 }
        : kind <= 7
          ? { outcome: 'lead', urgency_level: 3, service_type: 'Water heater', caller_name: 'Lee Bench', caller_email: `lee${n % 997}@bench.example` }
          : { outcome: 'other', urgency_level: 1 };
    return JSON.stringify({
      event: 'call_analyzed',
      call: {
        call_id: `bench_${runId}_${n}`, agent_id: 'agent_bench', direction: 'inbound',
        from_number: `+1312${String(2_000_000 + ((n * 7919) % 7_000_000)).padStart(7, '0')}`, to_number: phones[Math.floor(n / 10) % phones.length],
        start_timestamp: start, end_timestamp: start + 180_000, disconnection_reason: 'agent_hangup',
        transcript: 'Agent: Thanks for calling Bench HVAC.\nUser: My system needs work.\nAgent: I can help with that.',
        call_analysis: { call_summary: 'Caller asked for service.', user_sentiment: 'Positive', custom_analysis_data: analysis },
      },
    });
  };
  return { next: nextBody, headers: (body: string) => ({ 'content-type': 'application/json', 'x-retell-signature': signed(body) }) };
}

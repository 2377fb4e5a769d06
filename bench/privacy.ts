/**
 * Caller-data lifecycle rows of `npm run bench` (BENCH_ONLY section `privacy`; docs/privacy.md,
 * docs/performance.md), on the `big` location the insights rows use (1,000,000 demo calls):
 *   - erasure of one caller with 1,000 calls (BENCH_PRIVACY_CALLER_CALLS) among them: wall time of
 *     the one erasure transaction (admin.erasure_create, what POST erasures runs) → target < 2 s;
 *   - the content-retention prune clearing every transcript of that location (a 1-day window over
 *     90 days of calls) while signed post-call ingestion runs on another location: finalised
 *     calls/s during the prune vs the same load without it (before and after) → target ≥ 80 %.
 * The rows leave what they change as they found it where it matters (the window is unset again);
 * counts and insights do not change by design.
 */
import { createHmac, randomUUID } from 'node:crypto';
import autocannon from 'autocannon';
import type pg from 'pg';
import { PRIVACY_BATCH } from '../src/privacy/retention.js';
import type { BenchRow } from './common.js';

export interface PrivacyBenchContext {
  owner: pg.Pool;
  /** The running service (npm start). */
  base: string;
  voiceSecret: string;
  /** Service phone of the ingestion location. */
  servicePhone: string;
  /** The location with the big seeded history. */
  bigId: string;
  bigSlug: string;
  seconds: number;
  senders: number;
  progress: (msg: string) => void;
}

const CALLER_CALLS = Number(process.env.BENCH_PRIVACY_CALLER_CALLS ?? 1000);

/** Gives one customer of the location `n` calls (its own plus others re-pointed at it), with its phone and name on them. */
async function callerWithCalls(owner: pg.Pool, loc: string, n: number): Promise<{ phone: string; calls: number }> {
  const c = await owner.connect();
  try {
    await c.query('begin');
    await c.query("select set_config('app.location_id', $1, true), set_config('app.seeding', 'on', true)", [loc]);
    const { rows: [cust] } = await c.query(
      'select id, phone from app.customers where location_id = $1 and anonymised_at is null and phone is not null order by call_count desc limit 1', [loc]);
    await c.query(
      `update app.calls k set customer_id = $2, caller_phone = $3, caller_name = 'Bench Erasure Caller'
        where k.location_id = $1 and k.id in (
          select id from app.calls where location_id = $1 and customer_id is distinct from $2 and anonymised_at is null
           limit greatest(0, $4 - (select count(*) from app.calls where location_id = $1 and customer_id = $2)))`,
      [loc, cust.id, cust.phone, n]);
    await c.query('commit');
    const calls = Number((await owner.query('select count(*) n from app.calls where location_id = $1 and customer_id = $2', [loc, cust.id])).rows[0].n);
    return { phone: cust.phone, calls };
  } catch (err) {
    await c.query('rollback');
    throw err;
  } finally {
    c.release();
  }
}

/** Signed call_analyzed bodies, one new call each (a lead, so the full record path runs). */
function ingestionLoad(ctx: PrivacyBenchContext) {
  const run = randomUUID().slice(0, 8);
  let seq = 0;
  const body = () => {
    const n = ++seq;
    const start = Date.now() - 240_000;
    return JSON.stringify({
      event: 'call_analyzed',
      call: {
        call_id: `privacy_${run}_${n}`, agent_id: 'agent_bench', direction: 'inbound',
        from_number: `+1312${String(2_000_000 + ((n * 7919) % 7_000_000)).padStart(7, '0')}`, to_number: ctx.servicePhone,
        start_timestamp: start, end_timestamp: start + 180_000, disconnection_reason: 'agent_hangup',
        transcript: 'Agent: Thanks for calling.\nUser: My water heater is leaking.\nAgent: I can help with that.',
        call_analysis: { call_summary: 'Water heater leak.', custom_analysis_data: { outcome: 'lead', urgency_level: 3, service_type: 'Water heater', caller_name: 'Lee Bench' } },
      },
    });
  };
  const headers = (b: string) => {
    const ts = Date.now();
    return { 'content-type': 'application/json', 'x-retell-signature': `v=${ts},d=${createHmac('sha256', ctx.voiceSecret).update(b + ts).digest('hex')}` };
  };
  return async (seconds: number): Promise<{ rate: number; failed: number }> => {
    const result = await new Promise<autocannon.Result>((resolve, reject) => {
      autocannon({
        url: `${ctx.base}/api/voice/post-call`, connections: ctx.senders, duration: seconds,
        requests: [{ method: 'POST', setupRequest: (req) => {
          const b = body();
          return { ...req, body: b, headers: headers(b) };
        } }],
      }, (err, r) => (err ? reject(err) : resolve(r)));
    });
    return { rate: result['2xx'] / seconds, failed: result.non2xx + result.errors };
  };
}

export async function runPrivacyBench(ctx: PrivacyBenchContext): Promise<BenchRow[]> {
  const { owner } = ctx;
  const rows: BenchRow[] = [];
  const total = Number((await owner.query('select count(*) n from app.calls where location_id = $1', [ctx.bigId])).rows[0].n);

  // ---- Erasure of one caller with 1,000 calls --------------------------------------------------
  const caller = await callerWithCalls(owner, ctx.bigId, CALLER_CALLS);
  await owner.query('analyze app.calls, app.customers, app.leads, app.bookings');
  ctx.progress(`privacy: erasure of a caller with ${caller.calls.toLocaleString('en')} calls among ${total.toLocaleString('en')}`);
  const t0 = process.hrtime.bigint();
  const erasure = (await owner.query('select admin.erasure_create($1, $2, null, null, false) as e', [ctx.bigSlug, caller.phone])).rows[0].e;
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  const m = erasure.matched;
  rows.push({ name: `erasure of a caller with ${caller.calls.toLocaleString('en')} calls (${(total / 1e6).toFixed(2)} M calls in the location)`, value: ms, unit: 'ms',
    target: '< 2 s', note: `one transaction: ${m.customers} customer, ${m.calls} calls, ${m.leads} leads, ${m.bookings} bookings, ${m.events} events cleared` });

  // ---- Content retention while ingestion runs --------------------------------------------------
  // A kept cluster (BENCH_DATA_DIR) has them cleared already: put transcripts back first.
  const purged = Number((await owner.query('select count(*) n from app.calls where location_id = $1 and content_purged_at is not null', [ctx.bigId])).rows[0].n);
  if (purged > caller.calls) {
    ctx.progress(`privacy: restoring ${purged.toLocaleString('en')} transcripts of a kept cluster`);
    await owner.query(`update app.calls set content_purged_at = null, transcript = 'Agent: Thanks for calling.' where location_id = $1 and content_purged_at is not null and anonymised_at is null`, [ctx.bigId]);
    await owner.query('vacuum analyze app.calls');
  }
  const toClear = Number((await owner.query(
    `select count(*) n from app.calls where location_id = $1 and content_purged_at is null and created_at < now() - interval '1 day'`, [ctx.bigId])).rows[0].n);
  const load = ingestionLoad(ctx);
  ctx.progress(`privacy: ingestion alone, ${ctx.senders} senders, ${ctx.seconds} s`);
  await load(2);
  const alone = await load(ctx.seconds);

  await owner.query(`insert into app.privacy_settings (location_id, content_retention_days) values ($1, 1)
                     on conflict (location_id) do update set content_retention_days = 1`, [ctx.bigId]);
  ctx.progress(`privacy: content prune of ${toClear.toLocaleString('en')} transcripts, ingestion alongside for ${ctx.seconds} s`);
  let cleared = 0;
  let batches = 0;
  let pruning = true;
  const p0 = Date.now();
  // The hourly task's loop (src/privacy/retention.ts): one batch per autocommitted statement.
  const prune = (async () => {
    for (;;) {
      const n = Number((await owner.query("select app.retention_prune('privacy_content', 1, $1) as n", [PRIVACY_BATCH])).rows[0].n);
      cleared += n;
      batches += 1;
      if (n < PRIVACY_BATCH) break;
    }
    pruning = false;
  })();
  const during = await load(ctx.seconds);
  const clearedDuring = cleared;
  const stillPruning = pruning;
  await prune;
  const pruneSeconds = (Date.now() - p0) / 1000;
  await owner.query('update app.privacy_settings set content_retention_days = null where location_id = $1', [ctx.bigId]);
  // The load without the prune again, after it: the baseline is the mean of before and after, so
  // neither a cold start nor a busier machine later on favours one side.
  ctx.progress(`privacy: ingestion alone again, ${ctx.seconds} s`);
  const after = await load(ctx.seconds);
  const baseline = (alone.rate + after.rate) / 2;
  rows.push({ name: 'post-call ingestion while the retention prune clears transcripts (finalised calls/s)', value: during.rate, unit: 'calls/s',
    baseline, ratio: during.rate / baseline, target: '≥ 80 % of the same load without the prune',
    note: `prune ${stillPruning ? 'ran through the whole load' : 'ended before the load did'}: ${clearedDuring.toLocaleString('en')} cleared during it; `
      + `all ${cleared.toLocaleString('en')} in ${pruneSeconds.toFixed(0)} s, ${batches} batches of ≤ ${PRIVACY_BATCH}; ${during.failed + alone.failed + after.failed} failed requests; `
      + `baseline: the same load without the prune, mean of before (${alone.rate.toFixed(0)}/s) and after (${after.rate.toFixed(0)}/s)` });
  return rows;
}

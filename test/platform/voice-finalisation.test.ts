import { Logger, run } from 'graphile-worker';
import { callFn } from '../../src/db/pools.js';
import { loadTasks } from '../../src/worker/index.js';
import finalizeCall from '../../tasks/finalize_call.js';
import { useTestApi, testLog } from '../support/harness.js';
import { callRow, count, events, finalizeJobs, postVoice, types, VOICE_SECRET, voiceFixture, voiceLocation } from './support.js';

const t = useTestApi({ VOICE_WEBHOOK_SECRET: VOICE_SECRET });
const jobsFor = (callId: string) => finalizeJobs(t.owner, callId);

describe('finalisation when call_analyzed never comes', () => {
  test('call_ended schedules finalize_call in 10 minutes (one job per call); the job settles the call', async () => {
    const loc = await voiceLocation(t.owner);
    const body = voiceFixture('analysis-missing-call-ended', loc);
    const res = await postVoice(t.baseUrl, 'post-call', body);
    expect(res.body.data).toMatchObject({ platform_status: 'ended', finalized: false });
    const c0 = await callRow(t.owner, loc.id, body.call.call_id);
    expect(c0.duration_sec).toBe(62);
    expect((await events(t.owner, loc.id)).length).toBe(0);

    const [job] = await jobsFor(c0.id);
    expect(job.task_identifier).toBe('finalize_call');
    expect(job.payload).toEqual({ call_id: c0.id });
    const { rows: [delay] } = await t.owner.query(`select extract(epoch from $1::timestamptz - now()) as s`, [job.run_at]);
    expect(Number(delay.s)).toBeGreaterThan(9 * 60);
    expect(Number(delay.s)).toBeLessThanOrEqual(10 * 60);

    // A replayed call_ended neither adds nor moves the job.
    await postVoice(t.baseUrl, 'post-call', body);
    const jobs = await jobsFor(c0.id);
    expect(jobs).toHaveLength(1);
    expect(jobs[0].run_at.getTime()).toBe(job.run_at.getTime());

    // Ten minutes later: run the worker once with the job made due.
    await t.owner.query(`update graphile_worker._private_jobs set run_at = now() - interval '1 minute' where key = $1`, [`finalize_call:${c0.id}`]);
    // A real worker (every task in tasks/) polls until the job is done.
    const taskList = await loadTasks({ cfg: t.cfg, log: testLog, pool: t.owner });
    const runner = await run({ pgPool: t.owner, taskList, noHandleSignals: true, pollInterval: 100, logger: new Logger(() => () => undefined) });
    try {
      for (let i = 0; i < 100 && (await jobsFor(c0.id)).length > 0; i++) await new Promise((r) => setTimeout(r, 100));
    } finally {
      await runner.stop();
    }
    expect(await jobsFor(c0.id)).toHaveLength(0);
    const c = await callRow(t.owner, loc.id, body.call.call_id);
    expect(c.outcome).toBe('other');
    expect(c.finalized_at).not.toBeNull();
    expect(types(await events(t.owner, loc.id))).toEqual(['call.ended']);
    expect(await count(t.owner, 'select 1 from app.customers where location_id = $1', [loc.id])).toBe(1);

    // A late call_analyzed or a second run of the task changes nothing.
    const late = voiceFixture('booked', loc, { callId: body.call.call_id });
    await postVoice(t.baseUrl, 'post-call', late);
    await finalizeCall({ cfg: t.cfg, log: testLog, pool: t.owner })({ call_id: c0.id }, {} as never);
    expect(types(await events(t.owner, loc.id))).toEqual(['call.ended']);
    expect((await callRow(t.owner, loc.id, body.call.call_id)).outcome).toBe('other');
  });

  test('outcome from disconnection_reason: call_transfer → transferred (lead + emergency); voicemail_reached → lead', async () => {
    const loc = await voiceLocation(t.owner);
    const transfer = voiceFixture('analysis-missing-call-ended', loc);
    transfer.call.disconnection_reason = 'call_transfer';
    const vm = voiceFixture('analysis-missing-call-ended', loc);
    vm.call.disconnection_reason = 'voicemail_reached';
    vm.call.from_number = '+15125550111';
    for (const b of [transfer, vm]) await postVoice(t.baseUrl, 'post-call', b);
    const task = finalizeCall({ cfg: t.cfg, log: testLog, pool: t.owner });
    const ct = await callRow(t.owner, loc.id, transfer.call.call_id);
    const cv = await callRow(t.owner, loc.id, vm.call.call_id);
    await task({ call_id: ct.id }, {} as never);
    await task({ call_id: cv.id }, {} as never);
    expect((await callRow(t.owner, loc.id, transfer.call.call_id))).toMatchObject({ outcome: 'transferred', is_emergency: true });
    expect((await callRow(t.owner, loc.id, vm.call.call_id)).outcome).toBe('lead');
    const evs = await events(t.owner, loc.id);
    expect(types(evs)).toEqual(['call.emergency', 'call.ended', 'call.ended', 'lead.created', 'lead.created']);
    expect(evs.find((e) => e.type === 'call.emergency')!.data.reason).toBe('warm_transfer');
  });

  test('call_analyzed before the job runs: the queued finalize_call job is removed (it would be a no-op)', async () => {
    const loc = await voiceLocation(t.owner);
    const ended = voiceFixture('analysis-missing-call-ended', loc);
    await postVoice(t.baseUrl, 'post-call', ended);
    const c0 = await callRow(t.owner, loc.id, ended.call.call_id);
    expect(c0.finalized_at).toBeNull();
    expect(await jobsFor(c0.id)).toHaveLength(1);
    const analyzed = voiceFixture('booked', loc, { callId: ended.call.call_id });
    const res = await postVoice(t.baseUrl, 'post-call', analyzed);
    expect(res.body.data).toMatchObject({ finalized: true, outcome: 'booked' });
    const c = await callRow(t.owner, loc.id, ended.call.call_id);
    expect(c.finalized_at).not.toBeNull();
    expect(await jobsFor(c.id)).toHaveLength(0);
    // Had a job survived (e.g. already taken by a worker), running it is still harmless.
    expect(await callFn(t.owner, 'app.voice_finalize_overdue', [c.id])).toEqual({ finalized: false, reason: 'already_final' });
    expect(types(await events(t.owner, loc.id))).toEqual(['booking.created', 'call.ended', 'lead.created']);
  });

  test('call_ended carrying the analysis finalises at once, no job', async () => {
    const loc = await voiceLocation(t.owner);
    const body = voiceFixture('voicemail', loc);
    body.event = 'call_ended';
    await postVoice(t.baseUrl, 'post-call', body);
    const c = await callRow(t.owner, loc.id, body.call.call_id);
    expect(c.finalized_at).not.toBeNull();
    expect(await jobsFor(c.id)).toHaveLength(0);
  });

  test('the task refuses a malformed payload', async () => {
    const task = finalizeCall({ cfg: t.cfg, log: testLog, pool: t.owner });
    await expect(task({ call_id: 'nope' }, {} as never)).rejects.toThrow(/payload/);
  });
});

describe('ingestion functions are not reachable by API tokens', () => {
  test('switchboard_api cannot execute the SECURITY DEFINER voice functions', async () => {
    for (const fn of ['app.voice_post_call($1::jsonb)', 'app.voice_inbound($1::jsonb)']) {
      await expect(t.apiPool.query(`select ${fn}`, ['{}'])).rejects.toThrow(/permission denied/);
    }
    await expect(t.apiPool.query(`select app.voice_finalize_overdue(gen_random_uuid())`)).rejects.toThrow(/permission denied/);
  });

  test('app.dequeue (job removal) is executable only by switchboard_system', async () => {
    const { rows } = await t.owner.query(`
      select r, has_function_privilege(r, 'app.dequeue(text)', 'execute') as ok
        from unnest(array['switchboard_api', 'switchboard_staff_admin', 'switchboard_system', 'public']) r`);
    expect(rows).toEqual([
      { r: 'switchboard_api', ok: false }, { r: 'switchboard_staff_admin', ok: false },
      { r: 'switchboard_system', ok: true }, { r: 'public', ok: false },
    ]);
    await expect(t.apiPool.query(`select app.dequeue('finalize_call:x')`)).rejects.toThrow(/permission denied/);
  });
});

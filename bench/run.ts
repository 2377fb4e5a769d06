/**
 * `npm run bench`: throughput of hot API paths on a throwaway embedded cluster, printed as ratios
 * against a baseline measured in the same run (GET /healthz: HTTP stack only, no database), so
 * numbers compare across machines. Options: BENCH_SECONDS (default 5), BENCH_CALLS (default 20000).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import autocannon from 'autocannon';
import { sign } from 'retell-sdk';
import { loadConfig } from '../src/config.js';
import { callFn, createOwnerPool } from '../src/db/pools.js';
import { hashToken } from '../src/http/route.js';
import { createLogger } from '../src/log.js';
import { startService } from '../src/service.js';

const seconds = Number(process.env.BENCH_SECONDS ?? 5);
const calls = Number(process.env.BENCH_CALLS ?? 20000);
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'sb-bench-'));
const log = createLogger('warn', 2);
const VOICE_SECRET = 'bench_voice_secret';
const cfg = loadConfig({ VOICE_WEBHOOK_SECRET: VOICE_SECRET, DATA_DIR: dataDir, PORT: '0', ADMIN_PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'warn', RATE_LIMIT_PER_MINUTE: '100000000' });
const svc = await startService(cfg, log, 'api');
const owner = createOwnerPool(svc.db.url, 2);
try {
  const loc = await callFn<{ id: string; slug: string }>(owner, 'admin.location_create', [{ name: 'Bench HVAC', slug: 'bench', timezone: 'America/Chicago', service_phone: '+13125550100' }]);
  const token = randomUUID();
  const scopes = (await owner.query('select app.known_scopes() as s')).rows[0].s;
  await callFn(owner, 'admin.key_create', ['bench', 'bench', scopes, hashToken(token), token.slice(0, 8)]);
  process.stderr.write(`seeding ${calls} calls…\n`);
  await callFn(owner, 'admin.demo_seed_prepare', ['bench', Math.ceil(calls * 0.7)]);
  for (let done = 0; done < calls; done += 20000) await callFn(owner, 'admin.demo_seed_calls', ['bench', Math.min(20000, calls - done), 30]);
  await callFn(owner, 'admin.demo_seed_finish', ['bench']);
  await owner.query('analyze');

  const base = `http://127.0.0.1:${svc.api!.port}`;
  const headers = { authorization: `Bearer ${token}` };
  const targets: [string, string][] = [
    ['baseline GET /healthz', '/healthz'],
    ['GET /me', '/api/v1/me'],
    ['GET /locations/{id}', `/api/v1/locations/${loc.id}`],
    ['GET calls (50)', '/api/v1/locations/bench/calls'],
    ['GET leads?status=new', '/api/v1/locations/bench/leads?status=new'],
    ['GET insights?days=30', '/api/v1/locations/bench/insights?days=30'],
  ];
  // The voice platform's pre-call webhook (signed once; valid for the run) and a post-call replay
  // (idempotent: the same call again changes nothing).
  const inbound = JSON.stringify({ event: 'call_inbound', call_inbound: { from_number: '+13125550199', to_number: '+13125550100' } });
  const postCall = JSON.stringify({
    event: 'call_analyzed',
    call: {
      call_id: 'bench_call_1', from_number: '+13125550199', to_number: '+13125550100', direction: 'inbound',
      start_timestamp: Date.now() - 120_000, end_timestamp: Date.now() - 60_000, disconnection_reason: 'agent_hangup',
      call_analysis: { call_summary: 'Bench call', custom_analysis_data: { outcome: 'lead', urgency_level: 2, service_type: 'AC repair' } },
    },
  });
  const posts: [string, string, string][] = [
    ['POST /api/voice/inbound', '/api/voice/inbound', inbound],
    ['POST post-call (replay)', '/api/voice/post-call', postCall],
  ];
  const rows: { name: string; rps: number; p99: number; status: string }[] = [];
  const cases = [
    ...targets.map(([name, url]) => ({ name, url, method: 'GET' as const, headers, body: undefined as string | undefined })),
    ...(await Promise.all(posts.map(async ([name, url, body]) => ({
      name, url, method: 'POST' as const, body,
      headers: { 'content-type': 'application/json', 'x-retell-signature': await sign(body, VOICE_SECRET) },
    })))),
  ];
  for (const { name, url, method, headers: h, body } of cases) {
    const probe = await fetch(base + url, { method, headers: h, body });
    if (probe.status !== 200) {
      rows.push({ name, rps: 0, p99: 0, status: `skipped (${probe.status})` });
      continue;
    }
    const r = await autocannon({ url: base + url, method, headers: h, body, connections: 10, duration: seconds });
    rows.push({ name, rps: r.requests.average, p99: r.latency.p99, status: `${r.non2xx} non-2xx` });
  }
  const baseline = rows[0].rps;
  console.log(`\n${'endpoint'.padEnd(26)} ${'req/s'.padStart(9)} ${'vs baseline'.padStart(12)} ${'p99 ms'.padStart(8)}  notes`);
  for (const r of rows) {
    console.log(`${r.name.padEnd(26)} ${r.rps.toFixed(0).padStart(9)} ${(r.rps / baseline).toFixed(3).padStart(12)} ${String(r.p99).padStart(8)}  ${r.status}`);
  }
} finally {
  await owner.end();
  await svc.stop();
  fs.rmSync(dataDir, { recursive: true, force: true });
}

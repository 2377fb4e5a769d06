/**
 * Erasure at the voice platform (docs/privacy.md "Erasure"): with VOICE_API_KEY set, each erased
 * call is deleted at the platform by the erasure_platform_delete job (retell-sdk's
 * call.delete against VOICE_API_BASE_URL), here a real HTTPS stand-in with a CA made at test time.
 * A 500 is retried by graphile-worker, 404 counts as deleted, another 4xx fails the call; the
 * erasure record shows each call's status and attempts. The SSRF rule holds for it too.
 */
import { Logger, run, type Runner } from 'graphile-worker';
import type { ServerResponse } from 'node:http';
import { platformRound } from '../../src/privacy/platform.js';
import { loadTasks } from '../../src/worker/index.js';
import { VOICE_SECRET, voiceLocation, type VoiceLocation } from '../platform/support.js';
import { makePki, startHttpsReceiver, type HttpsReceiver, type Received, type TestPki } from '../support/https.js';
import { mintKey, request, startTestApi, testConfig, testLog, type TestApi } from '../support/harness.js';
import { waitFor } from '../webhooks/support.js';
import { bookedCall, type Caller } from './support.js';

const KEY = 'key_platform_3f9a1c77e2';
let pki: TestPki;
let platform: HttpsReceiver;
let t: TestApi;
let A: VoiceLocation;
let token: string;
let runner: Runner | undefined;

const ivy: Caller = { phone: '+15125550133', name: 'Ivy Chen', address: '5 Aspen Ct, Austin, TX 78750', email: 'ivy@example.com' };
const jon: Caller = { phone: '+15125550134', name: 'Jon Park', address: '6 Aspen Ct, Austin, TX 78750', email: 'jon@example.com' };

beforeAll(async () => {
  pki = makePki();
  platform = await startHttpsReceiver(pki, { path: '' });
  t = await startTestApi({ VOICE_WEBHOOK_SECRET: VOICE_SECRET, VOICE_API_KEY: KEY, VOICE_API_BASE_URL: `https://127.0.0.1:${platform.port}` });
  A = await voiceLocation(t.owner);
  token = (await mintKey(t.owner, A.id)).token;
}, 60_000);
afterAll(async () => {
  await runner?.stop();
  await platform.close();
  await t.close();
});

const erasure = async (id: string) => (await request(t.baseUrl, 'GET', `/api/v1/locations/${A.id}/erasures/${id}`, { token })).body.data;

test('each erased call is deleted at the platform: a 500 is retried, 404 counts as deleted, 403 fails', async () => {
  const calls = [await bookedCall(t.baseUrl, A, ivy), await bookedCall(t.baseUrl, A, ivy), await bookedCall(t.baseUrl, A, ivy)];
  const [retried, gone, refused] = calls;
  const seen = new Map<string, number>();
  platform.respond((r: Received, res: ServerResponse) => {
    const id = r.path.split('/').pop()!;
    const n = (seen.get(id) ?? 0) + 1;
    seen.set(id, n);
    const status = id === retried ? (n === 1 ? 500 : 204) : id === gone ? 404 : id === refused ? 403 : 204;
    res.writeHead(status, status === 204 ? {} : { 'content-type': 'application/json' });
    res.end(status === 204 ? undefined : JSON.stringify({ error_message: `status ${status}` }));
  });

  const created = await request(t.baseUrl, 'POST', `/api/v1/locations/${A.id}/erasures`, { token, body: { phone: ivy.phone } });
  expect(created.status).toBe(202);
  const e = created.body.data;
  expect(e).toMatchObject({ status: 'processing', completed_at: null, platform_deletions: { pending: 3, deleted: 0, failed: 0 } });
  expect(e.platform_calls.map((p: { platform_call_id: string }) => p.platform_call_id).sort()).toEqual([...calls].sort());
  expect(e.platform_calls.every((p: { status: string; attempts: number }) => p.status === 'pending' && p.attempts === 0)).toBe(true);
  // Our own copy is already cleared while the platform's deletions are pending.
  expect(e.matched).toMatchObject({ customers: 1, calls: 3 });

  runner = await run({
    pgPool: t.owner, noHandleSignals: true, pollInterval: 100, concurrency: 1, parsedCronItems: [],
    taskList: await loadTasks({ cfg: t.cfg, log: testLog, pool: t.owner, ca: pki.caPem }),
    logger: new Logger(() => () => undefined),
  });
  const done = await waitFor(async () => {
    const now = await erasure(e.id);
    return now.status !== 'processing' && now;
  }, 'platform deletions settled', 30_000);

  expect(done.status).toBe('completed_with_failures');
  expect(done.completed_at).toMatch(/Z$/);
  expect(done.platform_deletions).toEqual({ pending: 0, deleted: 2, failed: 1 });
  const byId = Object.fromEntries(done.platform_calls.map((p: { platform_call_id: string }) => [p.platform_call_id, p]));
  expect(byId[retried]).toMatchObject({ status: 'deleted', attempts: 2, response_status: 204, last_error: null });
  expect(byId[gone]).toMatchObject({ status: 'deleted', attempts: 1, response_status: 404, last_error: null });
  expect(byId[refused]).toMatchObject({ status: 'failed', attempts: 1, response_status: 403, last_error: 'HTTP 403' });

  // Exactly the requests Retell's delete-call expects, and nothing else.
  const got = platform.received.map((r) => `${r.method} ${r.path} ${r.headers.authorization}`).sort();
  expect(got).toEqual([
    ...calls.map((c) => `DELETE /v2/delete-call/${c} Bearer ${KEY}`),
    `DELETE /v2/delete-call/${retried} Bearer ${KEY}`,
  ].sort());
  // The retry came after the failure (order of arrival for the retried call: 500 first, then 204).
  expect(platform.received.filter((r) => r.path.endsWith(retried))).toHaveLength(2);
  expect(seen.get(retried)).toBe(2);
  await runner.stop();
  runner = undefined;
}, 60_000);

test('the SSRF rule applies: a private platform address is refused unless private targets are allowed', async () => {
  await bookedCall(t.baseUrl, A, jon);
  const e = (await request(t.baseUrl, 'POST', `/api/v1/locations/${A.id}/erasures`, { token, body: { phone: jon.phone } })).body.data;
  expect(e.platform_deletions.pending).toBe(1);
  const before = platform.received.length;
  const strict = testConfig({ VOICE_API_KEY: KEY, VOICE_API_BASE_URL: `https://127.0.0.1:${platform.port}`, WEBHOOK_ALLOW_PRIVATE_TARGETS: 'false' });
  // A refused target cannot become allowed by retrying: the call fails at its first try (not the last).
  expect(await platformRound({ cfg: strict, pool: t.owner, ca: pki.caPem }, e.id, A.id, false)).toBe(0);
  const now = await erasure(e.id);
  expect(now.platform_calls[0]).toMatchObject({ status: 'failed', attempts: 1, response_status: null });
  expect(now.platform_calls[0].last_error).toMatch(/^Refused: .*(non-public|loopback)/i);
  expect(now).toMatchObject({ status: 'completed_with_failures', platform_deletions: { pending: 0, deleted: 0, failed: 1 } });
  // Nothing ever reached the address.
  expect(platform.received.length).toBe(before);
});

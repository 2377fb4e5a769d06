/**
 * Fixes from the review: each test fails on the code before its fix.
 */
import dns from 'node:dns';
import { callFn } from '../../src/db/pools.js';
import { hashToken } from '../../src/auth/tokens.js';
import { isPublicAddress } from '../../src/net/ssrf.js';
import { callRow, events, postVoice, types, VOICE_SECRET, voiceFixture, voiceLocation } from '../platform/support.js';
import { createLocation, mintKey, request, startTestApi, useTenant, useTestApi } from '../support/harness.js';

const t = useTestApi({ VOICE_WEBHOOK_SECRET: VOICE_SECRET });
const A = useTenant(t, { service_phone: '+15125550170' });
const B = useTenant(t);
const V = '/api/v1';

const req = (method: string, path: string, body?: unknown, token = A.token) => request(t.baseUrl, method, path, { token, body });

test('1. integrations never show webhook_url (a Slack webhook URL is a secret)', async () => {
  const secretUrl = 'https://hooks.slack.com/services/T000/B000/XXXXSECRET';
  const made = await req('POST', `${V}/locations/${A.id}/integrations`, { provider: 'slack', webhook_url: secretUrl, label: '#ops' });
  expect(made.status).toBe(201);
  expect(made.body.data.label).toBe('#ops');
  expect(made.body.data).not.toHaveProperty('webhook_url');
  const list = await req('GET', `${V}/locations/${A.id}/integrations`);
  expect(list.body.data[0]).not.toHaveProperty('webhook_url');
  const del = await req('DELETE', `${V}/locations/${A.id}/integrations/slack`);
  expect(del.body.data).not.toHaveProperty('webhook_url');
  for (const res of [made, list, del]) expect(JSON.stringify(res.body)).not.toContain('XXXXSECRET');
});

test('2. is_emergency from the analysis alone marks the call but fires no call.emergency', async () => {
  const loc = await voiceLocation(t.owner);
  const body = voiceFixture('booked', loc);
  body.call.call_analysis.custom_analysis_data.is_emergency = true; // urgency_level stays 2, no transfer
  expect((await postVoice(t.baseUrl, 'post-call', body)).status).toBe(200);
  expect(await callRow(t.owner, loc.id, body.call.call_id)).toMatchObject({ urgency_level: 2, is_emergency: true, outcome: 'booked' });
  expect(types(await events(t.owner, loc.id))).not.toContain('call.emergency');
});

test('3. service_phone is operator-only: PATCH refuses it, the SQL function ignores it', async () => {
  const res = await req('PATCH', `${V}/locations/${A.id}`, { service_phone: '+15125550199' });
  expect(res.status).toBe(400);
  expect(res.body.error.code).toBe('validation_error');
  // Straight to the SQL function (as if the HTTP check were bypassed): the number does not move.
  const out = await callFn<any>(t.owner, 'api.location_patch', [hashToken(A.token), A.id, { service_phone: '+15125550199', name: 'Renamed' }]);
  expect(out).toMatchObject({ name: 'Renamed', service_phone: '+15125550170' });
  const { rows } = await t.owner.query('select service_phone from app.locations where id = $1', [A.id]);
  expect(rows[0].service_phone).toBe('+15125550170');
});

describe('4. job queueing', () => {
  test('app.enqueue is not executable by the API role, staff or PUBLIC', async () => {
    const { rows } = await t.owner.query(`
      select r, has_function_privilege(r, 'app.enqueue(text, jsonb, timestamptz, text, int, int)', 'execute') as ok
        from unnest(array['switchboard_api', 'switchboard_staff_admin', 'public']) r`);
    expect(rows).toEqual([
      { r: 'switchboard_api', ok: false }, { r: 'switchboard_staff_admin', ok: false }, { r: 'public', ok: false },
    ]);
    const c = await t.owner.connect();
    try {
      await c.query('begin');
      await c.query('set local role switchboard_api');
      await expect(c.query(`select app.enqueue('finalize_call', '{}'::jsonb)`)).rejects.toMatchObject({ code: '42501' });
    } finally {
      await c.query('rollback');
      c.release();
    }
  });

  test('app.webhook_enqueue schedules only a pending delivery of the caller’s tenant', async () => {
    // The pending delivery row is the queue entry; webhook_enqueue sets when it is due.
    const due = (id: string) =>
      t.owner.query('select next_attempt_at <= now() as now, next_attempt_at from app.webhook_deliveries where id = $1', [id]).then((r) => r.rows[0]);
    const later = new Date('2099-01-01T00:00:00Z');
    await t.owner.query(
      `insert into app.webhook_endpoints (location_id, url, events, secret) values ($1, 'https://93.184.215.14/h', '{lead.created}', app.webhook_new_secret())`,
      [B.id]);
    const c = await t.owner.connect();
    let delivery: string;
    try {
      await c.query('begin');
      await c.query(`select set_config('app.location_id', $1, true)`, [B.id]);
      await c.query(`select app.emit($1, 'lead.created', '{}')`, [B.id]);
      await c.query('commit');
      delivery = (await c.query('select id from app.webhook_deliveries where location_id = $1', [B.id])).rows[0].id;
      expect((await due(delivery)).now).toBe(true); // the fan-out made it due at once

      /** The API role, as tenant `tenantId`, asking to reschedule B's delivery. */
      const enqueueAs = async (tenantId: string) => {
        await c.query('begin');
        await c.query('set local role switchboard_api');
        await c.query(`select set_config('app.location_id', $1, true)`, [tenantId]);
        await c.query('select app.webhook_enqueue($1, $2, $3)', [delivery, B.id, later]);
        await c.query('commit');
      };
      // Tenant A: nothing changes.
      await enqueueAs(A.id);
      expect((await due(delivery)).now).toBe(true);
      // Tenant B: rescheduled.
      await enqueueAs(B.id);
      expect((await due(delivery)).next_attempt_at).toEqual(later);
    } finally {
      c.release();
    }
  });
});

test('6. DELETE disconnects only the connected row; 404 when none is connected', async () => {
  const { token } = await mintKey(t.owner, B.id);
  await t.owner.query(`insert into app.integrations (location_id, provider, status, webhook_url) values ($1, 'zapier', 'error', 'https://hooks.zapier.com/1')`, [B.id]);
  const made = await req('POST', `${V}/locations/${B.id}/integrations`, { provider: 'zapier', webhook_url: 'https://hooks.zapier.com/2' }, token);
  expect(made.status).toBe(201);
  const del = await req('DELETE', `${V}/locations/${B.id}/integrations/zapier`, undefined, token);
  expect(del.status).toBe(200);
  expect(del.body.data).toMatchObject({ id: made.body.data.id, status: 'disconnected' });
  expect((await req('DELETE', `${V}/locations/${B.id}/integrations/zapier`, undefined, token)).status).toBe(404);
  const { rows } = await t.owner.query(`select status from app.integrations where location_id = $1 and provider = 'zapier' order by created_at`, [B.id]);
  expect(rows.map((r) => r.status)).toEqual(['error', 'disconnected']);
});

test('7. POST integrations refuses a hostname that resolves to a private address', async () => {
  // `localhost` is a name (not an IP literal) that every machine resolves to loopback.
  const host = 'localhost';
  const addrs = await dns.promises.lookup(host, { all: true });
  expect(addrs.some((a) => !isPublicAddress(a.address))).toBe(true);
  const strict = await startTestApi({ WEBHOOK_ALLOW_PRIVATE_TARGETS: 'false' });
  try {
    const loc = await createLocation(strict.owner);
    const { token } = await mintKey(strict.owner, loc.id);
    const res = await request(strict.baseUrl, 'POST', `${V}/locations/${loc.id}/integrations`, { token, body: { provider: 'n8n', webhook_url: `https://${host}/hook` } });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('validation_error');
    expect(res.body.error.details.issues[0].path).toBe('webhook_url');
  } finally {
    await strict.close();
  }
});

describe('8. post-call routing: the dialled number wins over metadata', () => {
  test('metadata.location_id of another location is ignored when to_number matches', async () => {
    const mine = await voiceLocation(t.owner);
    const other = await voiceLocation(t.owner);
    const body = voiceFixture('booked', mine);
    body.call.metadata = { location_id: other.id };
    expect((await postVoice(t.baseUrl, 'post-call', body)).status).toBe(200);
    expect(await callRow(t.owner, mine.id, body.call.call_id)).toBeTruthy();
    const { rowCount } = await t.owner.query('select 1 from app.calls where location_id = $1', [other.id]);
    expect(rowCount).toBe(0);
  });

  test('metadata.call_row_id of another location’s call is not attached', async () => {
    const mine = await voiceLocation(t.owner);
    const other = await voiceLocation(t.owner);
    const { rows } = await t.owner.query(
      `insert into app.calls (location_id, platform_call_id, outcome, platform_status) values ($1, 'rejected:x', 'spam', 'rejected') returning id`, [other.id]);
    const foreign = rows[0].id;
    const body = voiceFixture('booked', mine);
    body.call.metadata = { location_id: other.id, call_row_id: foreign };
    expect((await postVoice(t.baseUrl, 'post-call', body)).status).toBe(200);
    const c = await callRow(t.owner, mine.id, body.call.call_id);
    expect(c.id).not.toBe(foreign);
    const untouched = await t.owner.query('select platform_call_id, outcome from app.calls where id = $1', [foreign]);
    expect(untouched.rows[0]).toEqual({ platform_call_id: 'rejected:x', outcome: 'spam' });
  });
});

test('15. the API role reaches no other tenant through the queue doors it may call: webhook_enqueue, integration_sync_requeue', async () => {
  // B's pending attempt, and a sync of B's (rows written as the owner, as the fan-out would).
  const { rows: [ep] } = await t.owner.query(
    `insert into app.webhook_endpoints (location_id, url, events, secret) values ($1, 'https://hooks.example.net/b', '{lead.created}', 'whsec_c3RhZmYtdGVzdC1zZWNyZXQtdmFsdWUtMzItYnl0ZXM=') returning id`, [B.id]);
  const { rows: [ev] } = await t.owner.query(`insert into app.events (location_id, type, data) values ($1, 'lead.created', '{}') returning id`, [B.id]);
  const { rows: [d] } = await t.owner.query(`select id, next_attempt_at from app.webhook_deliveries where event_id = $1 and endpoint_id = $2`, [ev.id, ep.id]);
  const { rows: [integ] } = await t.owner.query(`insert into app.integrations (location_id, provider, access_token, refresh_token) values ($1, 'jobber', 'a', 'r') returning id`, [B.id]);
  const { rows: [sync] } = await t.owner.query(
    `insert into app.integration_syncs (location_id, integration_id, provider, record_type, record_id, action)
     values ($1, $2, 'jobber', 'lead', gen_random_uuid(), 'create') returning id`, [B.id, integ.id]);
  const jobs = async () => (await t.owner.query(`select count(*)::int as n from graphile_worker.jobs where key = $1`, [`integration_sync:${sync.id}`])).rows[0].n;

  const asApi = async (pinned: string | null, sql: string, params: unknown[]) => {
    const c = await t.apiPool.connect();
    try {
      await c.query('begin');
      if (pinned) await c.query(`select set_config('app.location_id', $1, true)`, [pinned]);
      await c.query(sql, params);
      await c.query('commit');
    } finally {
      c.release();
    }
  };
  for (const pinned of [null, A.id]) {
    await asApi(pinned, `select app.webhook_enqueue($1, $2, now() + interval '30 days')`, [d.id, B.id]);
    await asApi(pinned, `select app.integration_sync_requeue($1, $2)`, [sync.id, integ.id]);
  }
  const { rows: [after] } = await t.owner.query(`select next_attempt_at from app.webhook_deliveries where id = $1`, [d.id]);
  expect(after.next_attempt_at).toEqual(d.next_attempt_at);
  expect(await jobs()).toBe(0);
  // B's own transaction may, and so may the worker's (no role, no tenant).
  await asApi(B.id, `select app.integration_sync_requeue($1, $2)`, [sync.id, integ.id]);
  expect(await jobs()).toBe(1);
  await t.owner.query(`select app.webhook_enqueue($1, $2, now() + interval '1 hour')`, [d.id, B.id]);
  expect((await t.owner.query(`select next_attempt_at > now() + interval '50 minutes' as later from app.webhook_deliveries where id = $1`, [d.id])).rows[0].later).toBe(true);
});

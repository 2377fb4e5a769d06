/**
 * Idempotency-Key on token-API POSTs (docs/rest-api.md "Idempotency-Key"): concurrent duplicates
 * make one lead, one lead.created and one webhook attempt; a replay is the first answer byte for
 * byte with Idempotent-Replayed: true; another request under the key is 422, one while the first
 * holds the key 409, a malformed key 400; keys are per location, errors are not stored, answers
 * expire after 24 h and the retention job prunes them.
 */
import { randomUUID } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { pruneIdempotency } from '../../src/idempotency/retention.js';
import { mintKey, request, useTenant, useTestApi } from '../support/harness.js';

const t = useTestApi();
const A = useTenant(t, { name: 'Idem Heating' });
const B = useTenant(t, { name: 'Idem Plumbing' });
const V = '/api/v1';

beforeAll(async () => {
  // A subscriber, so each lead.created also queues one webhook attempt.
  const ep = await request(t.baseUrl, 'POST', `${V}/locations/${A.id}/webhook-endpoints`, {
    token: A.token, body: { url: 'https://127.0.0.1:9/hook', events: ['lead.created'] },
  });
  expect(ep.status).toBe(201);
});

/** Raw answer: the body as text too, to compare replays byte for byte. */
async function post(path: string, body: unknown, key?: string, token = A.token) {
  const headers: Record<string, string> = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
  if (key !== undefined) headers['idempotency-key'] = key;
  const res = await fetch(t.baseUrl + path, { method: 'POST', headers, body: JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, text, body: JSON.parse(text), replayed: res.headers.get('idempotent-replayed') };
}

const leadsOf = async (loc: string, name: string) =>
  (await t.owner.query('select id from app.leads where location_id = $1 and name = $2', [loc, name])).rows.map((r) => r.id as string);
const eventsFor = async (leadIds: string[]) =>
  (await t.owner.query("select count(*)::int n from app.events where type = 'lead.created' and (data ->> 'id') = any ($1)", [leadIds])).rows[0].n;
const attemptsFor = async (leadIds: string[]) =>
  (await t.owner.query(
    `select count(*)::int n from app.webhook_deliveries d join app.events e on e.id = d.event_id
      where e.type = 'lead.created' and (e.data ->> 'id') = any ($1)`, [leadIds])).rows[0].n;

const lead = (name: string) => ({ name, phone: '+15125550123', notes: 'retried after a time-out' });

test('concurrent duplicates: one lead, one lead.created, one webhook attempt; the others 409 or replay the same answer', async () => {
  const key = randomUUID();
  const body = lead('Concurrent Caller');
  const answers = await Promise.all(Array.from({ length: 12 }, () => post(`${V}/locations/${A.id}/leads`, body, key)));
  const ids = await leadsOf(A.id, 'Concurrent Caller');
  expect(ids).toHaveLength(1);
  expect(await eventsFor(ids)).toBe(1);
  expect(await attemptsFor(ids)).toBe(1);

  const first = answers.filter((a) => a.status === 201 && a.replayed === null);
  expect(first).toHaveLength(1);
  expect(first[0].body.data.id).toBe(ids[0]);
  for (const a of answers.filter((x) => x !== first[0])) {
    if (a.status === 409) expect(a.body.error.code).toBe('idempotency_key_in_use');
    else expect([a.status, a.replayed, a.text]).toEqual([201, 'true', first[0].text]);
  }
  // Once the first has committed, every retry is the stored answer.
  const again = await post(`${V}/locations/${A.id}/leads`, body, key);
  expect([again.status, again.replayed, again.text]).toEqual([201, 'true', first[0].text]);
  expect(await leadsOf(A.id, 'Concurrent Caller')).toHaveLength(1);
});

test('a replay is the first answer byte for byte, whatever the key order or spacing of the body', async () => {
  const key = randomUUID();
  const first = await post(`${V}/locations/${A.id}/leads`, lead('Replay Caller'), key);
  expect([first.status, first.replayed]).toEqual([201, null]);
  const headers = { authorization: `Bearer ${A.token}`, 'content-type': 'application/json', 'idempotency-key': `"${key}"` };
  const reordered = '{ "notes": "retried after a time-out", "phone": "+15125550123",  "name": "Replay Caller" }';
  const res = await fetch(`${t.baseUrl}/locations/${A.slug}/leads`, { method: 'POST', headers, body: reordered });
  expect([res.status, res.headers.get('idempotent-replayed'), await res.text()]).toEqual([201, 'true', first.text]);
  expect(await leadsOf(A.id, 'Replay Caller')).toHaveLength(1);
});

test('the same key for another request is 422 and changes nothing', async () => {
  const key = randomUUID();
  expect((await post(`${V}/locations/${A.id}/leads`, lead('Original Caller'), key)).status).toBe(201);
  const other = await post(`${V}/locations/${A.id}/leads`, lead('Different Caller'), key);
  expect([other.status, other.body.error.code]).toEqual([422, 'idempotency_key_reused']);
  const otherOp = await post(`${V}/locations/${A.id}/faqs`, { question: 'Open Sundays?', answer: 'No' }, key);
  expect([otherOp.status, otherOp.body.error.code]).toEqual([422, 'idempotency_key_reused']);
  expect(await leadsOf(A.id, 'Different Caller')).toEqual([]);
  expect((await t.owner.query("select count(*)::int n from app.faqs where question = 'Open Sundays?'")).rows[0].n).toBe(0);
});

test('keys are per location: the same key in another location is a new request there', async () => {
  const key = randomUUID();
  const a = await post(`${V}/locations/${A.id}/leads`, lead('Shared Key Caller'), key);
  const b = await post(`${V}/locations/${B.id}/leads`, lead('Shared Key Caller'), key, B.token);
  expect([a.status, a.replayed, b.status, b.replayed]).toEqual([201, null, 201, null]);
  expect(b.body.data.location_id).toBe(B.id);
  expect(await leadsOf(A.id, 'Shared Key Caller')).toHaveLength(1);
  expect(await leadsOf(B.id, 'Shared Key Caller')).toHaveLength(1);
  // B's token cannot reach A's answer: its location is not B's (404), not a replay.
  const cross = await post(`${V}/locations/${A.id}/leads`, lead('Shared Key Caller'), key, B.token);
  expect([cross.status, cross.body.error.code]).toEqual([404, 'not_found']);
});

test('another key of the same location replays (keys are per location), but only with the scope the operation needs', async () => {
  const key = randomUUID();
  const first = await post(`${V}/locations/${A.id}/leads`, lead('Second Token Caller'), key);
  const { token: other } = await mintKey(t.owner, A.id, ['leads:write']);
  const again = await post(`${V}/locations/${A.id}/leads`, lead('Second Token Caller'), key, other);
  expect([again.status, again.replayed, again.text]).toEqual([201, 'true', first.text]);
  const { token: readOnly } = await mintKey(t.owner, A.id, ['leads:read']);
  const denied = await post(`${V}/locations/${A.id}/leads`, lead('Second Token Caller'), key, readOnly);
  expect([denied.status, denied.body.error.code]).toEqual([403, 'forbidden']);
});

test('while the first request holds the key, a duplicate is 409 idempotency_key_in_use and runs nothing', async () => {
  const key = randomUUID();
  const holder = await t.owner.connect();
  try {
    // What app.idempotent takes for the duration of the first request's transaction.
    await holder.query('begin');
    await holder.query('select pg_advisory_xact_lock(7302, hashtext($1))', [`${A.id}/${key}`]);
    const res = await post(`${V}/locations/${A.id}/leads`, lead('In Flight Caller'), key);
    expect([res.status, res.body.error.code]).toEqual([409, 'idempotency_key_in_use']);
    await holder.query('commit');
  } finally {
    holder.release();
  }
  expect(await leadsOf(A.id, 'In Flight Caller')).toEqual([]);
  const after = await post(`${V}/locations/${A.id}/leads`, lead('In Flight Caller'), key);
  expect([after.status, after.replayed]).toEqual([201, null]);
});

test('a key released within the grace (a request that has answered and is ending) is taken, not 409', async () => {
  // The same lock as app.idempotency_begin takes (a session lock conflicts with its transaction
  // lock), held by a session that lets it go itself, inside PostgreSQL, the moment it sees the
  // request retrying: a watcher polling from here could miss the request's 40 ms under load.
  // Even that watcher can be kept off the CPU for the whole 40 ms on a busy machine, and then
  // the 409 is the right answer; so a try whose release came too late is made again, with a new
  // key, and must have created nothing.
  const tryOnce = async (name: string) => {
    const key = randomUUID();
    const holder = await t.owner.connect();
    try {
      await holder.query('select pg_advisory_lock(7302, hashtext($1))', [`${A.id}/${key}`]);
      const released = holder.query(
        `do $$ begin
           for i in 1..15000 loop
             perform pg_stat_clear_snapshot();
             exit when exists (select 1 from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()
                                and wait_event = 'PgSleep' and query like '%idempotency_begin%');
             perform pg_sleep(0.001);
           end loop;
           perform pg_advisory_unlock(7302, hashtext('${A.id}/${key}'));
         end $$`);
      const res = await post(`${V}/locations/${A.id}/leads`, lead(name), key);
      await released;
      return res;
    } finally {
      await holder.query('select pg_advisory_unlock_all()');
      holder.release();
    }
  };
  let res = await tryOnce('Quick Retry Caller 1');
  for (let n = 2; n <= 3 && res.status === 409; n++) {
    expect(res.body.error.code).toBe('idempotency_key_in_use');
    expect(await leadsOf(A.id, `Quick Retry Caller ${n - 1}`)).toEqual([]);
    res = await tryOnce(`Quick Retry Caller ${n}`);
  }
  expect([res.status, res.replayed]).toEqual([201, null]);
  expect(await leadsOf(A.id, res.body.data.name)).toHaveLength(1);
});

test('a malformed key is 400 invalid_idempotency_key after the token check, and nothing is created', async () => {
  const before = (await leadsOf(A.id, 'Malformed Key Caller')).length;
  for (const key of ['', '   ', 'x'.repeat(256), 'clé-é', '""']) {
    const res = await post(`${V}/locations/${A.id}/leads`, lead('Malformed Key Caller'), key);
    expect([key, res.status, res.body.error.code]).toEqual([key, 400, 'invalid_idempotency_key']);
  }
  expect((await post(`${V}/locations/${A.id}/leads`, lead('Malformed Key Caller'), 'k'.repeat(255))).status).toBe(201);
  // Two Idempotency-Key headers.
  const twice = await new Promise<{ status: number; body: any }>((resolve, reject) => {
    const r = httpRequest(`${t.baseUrl}${V}/locations/${A.id}/leads`, {
      method: 'POST',
      headers: { authorization: `Bearer ${A.token}`, 'content-type': 'application/json', 'idempotency-key': ['one', 'two'] },
    }, (res) => {
      let text = '';
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text) }));
    });
    r.on('error', reject);
    r.end(JSON.stringify(lead('Malformed Key Caller')));
  });
  expect([twice.status, twice.body.error.code]).toEqual([400, 'invalid_idempotency_key']);
  const unknown = await post(`${V}/locations/${A.id}/leads`, lead('Malformed Key Caller'), '', randomUUID());
  expect([unknown.status, unknown.body.error.code]).toEqual([401, 'unauthorized']);
  expect(await leadsOf(A.id, 'Malformed Key Caller')).toHaveLength(before + 1);
});

test('errors are not stored: after a 400 the same key runs again, and may carry a corrected body', async () => {
  const key = randomUUID();
  const badMember = await post(`${V}/locations/${A.id}/leads`, { ...lead('Error Caller'), assigned_to: randomUUID() }, key);
  expect([badMember.status, badMember.body.error.code]).toEqual([400, 'validation_error']);
  const badShape = await post(`${V}/locations/${A.id}/leads`, { ...lead('Error Caller'), phone: 'not a phone' }, key);
  expect(badShape.status).toBe(400);
  expect((await t.owner.query('select count(*)::int n from app_private.idempotency_keys where idempotency_key = $1', [key])).rows[0].n).toBe(0);
  const fixed = await post(`${V}/locations/${A.id}/leads`, lead('Error Caller'), key);
  expect([fixed.status, fixed.replayed]).toEqual([201, null]);
  expect(await leadsOf(A.id, 'Error Caller')).toHaveLength(1);
});

test('requests without the header are not deduplicated', async () => {
  expect((await post(`${V}/locations/${A.id}/leads`, lead('No Key Caller'))).status).toBe(201);
  expect((await post(`${V}/locations/${A.id}/leads`, lead('No Key Caller'))).status).toBe(201);
  expect(await leadsOf(A.id, 'No Key Caller')).toHaveLength(2);
});

test('every token-API POST honours the key: a webhook test send is queued once', async () => {
  const ep = (await t.owner.query('select id from app.webhook_endpoints where location_id = $1 limit 1', [A.id])).rows[0].id;
  const key = randomUUID();
  const paths = [`${V}/webhook-endpoints/${ep}/test`, `${V}/locations/${A.id}/webhook-endpoints/${ep}/test`];
  const first = await post(paths[0], {}, key);
  const second = await post(paths[1], {}, key);
  expect([first.status, second.status, second.replayed, second.text]).toEqual([202, 202, 'true', first.text]);
  const n = (await t.owner.query("select count(*)::int n from app.webhook_deliveries where endpoint_id = $1 and event = 'webhook.test'", [ep])).rows[0].n;
  expect(n).toBe(1);
});

test('answers expire after 24 hours: the key runs again, and the retention job prunes the old answer', async () => {
  const key = randomUUID();
  const first = await post(`${V}/locations/${A.id}/leads`, lead('Expiring Caller'), key);
  await t.owner.query("update app_private.idempotency_keys set created_at = now() - interval '24 hours 1 second' where idempotency_key = $1", [key]);
  const later = await post(`${V}/locations/${A.id}/leads`, lead('Expiring Caller'), key);
  expect([later.status, later.replayed]).toEqual([201, null]);
  expect(later.body.data.id).not.toBe(first.body.data.id);
  expect(await leadsOf(A.id, 'Expiring Caller')).toHaveLength(2);

  const stale = randomUUID();
  await post(`${V}/locations/${B.id}/leads`, lead('Pruned Caller'), stale, B.token);
  await t.owner.query("update app_private.idempotency_keys set created_at = now() - interval '25 hours' where idempotency_key = $1", [stale]);
  const count = async () => (await t.owner.query('select idempotency_key from app_private.idempotency_keys where idempotency_key = any ($1)', [[key, stale]])).rows;
  expect(await count()).toHaveLength(2);
  const r = await pruneIdempotency({ cfg: t.cfg, pool: t.owner });
  expect(r.idempotency_keys).toBe(1);
  expect((await count()).map((x) => x.idempotency_key)).toEqual([key]);
});

test('the API role sees only its own location\'s answers (RLS)', async () => {
  const c = await t.owner.connect();
  try {
    await c.query('begin');
    await c.query('set local role switchboard_api');
    await c.query("select set_config('app.location_id', $1, true)", [B.id]);
    const locs = (await c.query('select distinct location_id from app_private.idempotency_keys')).rows.map((r) => r.location_id);
    expect(locs).toEqual([B.id]);
  } finally {
    await c.query('rollback');
    c.release();
  }
});

/**
 * An erasure beside the worker's record steps (docs/privacy.md "Erasure"): the record functions
 * lock their attempts and notifications in id order, and the erasure takes the caller's rows in
 * the same order before it writes them, so the two wait for each other and never deadlock. Each
 * case sets the rows' physical order against their id order, holds the lower id as a record step
 * would, opens the erasure, then takes the higher id.
 */
import { useFanoutRig } from '../support/receivers.js';
import { mintKey, request } from '../support/harness.js';
import { sleep } from '../webhooks/support.js';
import { voiceLocation } from '../platform/support.js';
import { connectSlack } from '../notify/support.js';

const t = useFanoutRig('lockorder', {});
const caller = { name: 'Ottoline Quibble', phone: '+15125550166', email: 'ottoline@example.com', address: '9 Heron Row, Austin' };

/** A location whose lead of the caller left two pending webhook attempts and two notifications. */
async function pendingRows() {
  const loc = await voiceLocation(t.owner);
  const { token } = await mintKey(t.owner, loc.id);
  await connectSlack(t.apiPool, loc.id, t.rx.slack.url);
  for (const label of ['one', 'two']) {
    const ep = await request(t.baseUrl, 'POST', `/api/v1/locations/${loc.id}/webhook-endpoints`,
      { token, body: { url: `${t.rx.hooks.url}/${label}`, events: ['lead.created'] } });
    expect(ep.status).toBe(201);
  }
  const settings = await request(t.baseUrl, 'PATCH', `/api/v1/locations/${loc.id}/notification-settings`,
    { token, body: { email_recipients: ['dispatch@example.com'] } });
  expect(settings.status).toBe(200);
  expect((await request(t.baseUrl, 'POST', `/api/v1/locations/${loc.id}/leads`, { token, body: caller })).status).toBe(201);
  return loc;
}

/**
 * Ids of the table's two rows of the location, lower first, after the lower one was rewritten to
 * a new place in the heap and in every index (a changed indexed column: not a HOT update), so a
 * scan that follows the heap or an index meets the higher id first.
 */
async function reordered(table: 'webhook_deliveries' | 'notifications', locationId: string): Promise<[string, string]> {
  const { rows } = await t.owner.query(`select id from app.${table} where location_id = $1 order by id`, [locationId]);
  expect(rows).toHaveLength(2);
  const [low, high] = rows.map((r) => r.id as string);
  await t.owner.query(`update app.${table} set next_attempt_at = next_attempt_at + interval '1 millisecond' where id = $1`, [low]);
  return [low, high];
}

/** Holds `low` as a record step does, opens the erasure, then takes `high`: both must finish. */
async function lockBeside(table: string, locationId: string, [low, high]: [string, string]) {
  const recorder = await t.owner.connect();
  const eraser = await t.owner.connect();
  try {
    await recorder.query('begin');
    await recorder.query(`select 1 from app.${table} where id = $1 for no key update`, [low]);
    await eraser.query('begin');
    await eraser.query(`select set_config('app.location_id', $1, true)`, [locationId]);
    const erasure = eraser.query(`select app.erasure_perform($1, $2, null, null, 'api', null, false) as r`, [locationId, caller.phone])
      .then((r) => r.rows[0].r, (e: Error) => e);
    await sleep(300);
    const second = await recorder.query(`select 1 from app.${table} where id = $1 for no key update`, [high])
      .then(() => 'locked', (e: Error) => e);
    await recorder.query(second === 'locked' ? 'commit' : 'rollback');
    const erased = await erasure;
    await eraser.query(erased instanceof Error ? 'rollback' : 'commit');
    return { second, erased };
  } finally {
    recorder.release();
    eraser.release();
  }
}

async function expectBothFinish(table: 'webhook_deliveries' | 'notifications') {
  const loc = await pendingRows();
  const ids = await reordered(table, loc.id);
  const { second, erased } = await lockBeside(table, loc.id, ids);
  expect([second, erased instanceof Error ? erased.message : 'erased']).toEqual(['locked', 'erased']);
  const { rows } = await t.owner.query('select matched from app.erasures where location_id = $1', [loc.id]);
  expect(rows).toHaveLength(1);
  return rows[0].matched as Record<string, number>;
}

test('an erasure and a webhook record step take the attempts in the same order', async () => {
  expect(await expectBothFinish('webhook_deliveries')).toMatchObject({ webhook_attempts: 2 });
});

test('an erasure and a notification record step take the notifications in the same order', async () => {
  expect(await expectBothFinish('notifications')).toMatchObject({ notifications: 2 });
});

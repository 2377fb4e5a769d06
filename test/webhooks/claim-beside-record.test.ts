/**
 * A slot freed by a finished send is claimed for beside the record of that send, not after it
 * (src/worker/lease-engine.ts): with the record held up, the next attempt still goes out, and the
 * finished one's lease keeps counting against its endpoint's cap until the record ends it.
 * Order only: the engine's safety-net poll is a minute, so nothing but the freed slot can claim.
 */
import type pg from 'pg';
import { tenant } from '../support/harness.js';
import { reply, type Responder } from '../support/https.js';
import { createEndpoint, emit, startTestWorker, useWebhookRig, waitFor } from './support.js';

const t = useWebhookRig({}, { worker: false });

test('one slot: the second attempt is sent while the first one’s record waits on a row lock', async () => {
  const { loc, token } = await tenant(t);
  await createEndpoint(t, token, loc.id, { url: t.rx.url, events: ['lead.created'] });
  await createEndpoint(t, token, loc.id, { url: t.rx.url, events: ['booking.created'] });
  await emit(t.owner, loc.id, 'lead.created', { n: 1 });
  await emit(t.owner, loc.id, 'booking.created', { n: 2 });

  // The first attempt's row is locked (as a slow transaction might) before it is answered, so its
  // record cannot finish until the lock goes.
  let locker: pg.PoolClient | undefined;
  let firstId = '';
  const lockThenAnswer: Responder = (r, res) => {
    firstId = String(r.headers['svc-delivery-id']);
    void (async () => {
      locker = await t.owner.connect();
      await locker.query('begin');
      await locker.query('select 1 from app.webhook_deliveries where id = $1 for update', [firstId]);
      reply(200, 'ok')(r, res);
    })();
  };
  t.rx.respond(lockThenAnswer, reply(200, 'ok'));

  const w = await startTestWorker({ ...t.cfg, WEBHOOK_CONCURRENCY: 1 }, t.db.url, t.pki, { engine: { pollIntervalMs: 60_000 } });
  try {
    await waitFor(async () => t.rx.received.length >= 2, 'the second attempt sent', 10_000);
    expect(t.rx.received.map((r) => r.headers['svc-event'])).toEqual(['lead.created', 'booking.created']);
    // The first one's outcome is not recorded yet: its record is the one waiting on the lock.
    const status = async (id: string) => (await t.owner.query('select status from app.webhook_deliveries where id = $1', [id])).rows[0].status;
    expect(await status(firstId)).toBe('pending');
    await locker!.query('commit');
    locker!.release();
    locker = undefined;
    await waitFor(async () => (await status(firstId)) === 'delivered', 'the first outcome recorded');
    const secondId = String(t.rx.received[1].headers['svc-delivery-id']);
    await waitFor(async () => (await status(secondId)) === 'delivered', 'the second outcome recorded');
  } finally {
    if (locker) {
      await locker.query('rollback');
      locker.release();
    }
    await w.stop();
  }
});

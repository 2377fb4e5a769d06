/**
 * After a claim that leased fewer attempts than it had free slots for, a send that ends does not
 * ask for a claim of its own (src/worker/lease-engine.ts): its lease counts against its endpoint
 * until its record, so such a claim could only come back empty; the record claims when it ends.
 * One endpoint at its cap of two with a backlog is the burst's shape (docs/performance.md,
 * "Performance after a realistic history: the fifth round"). Counts only.
 */
import { createWorkerPool } from '../../src/db/pools.js';
import type { Claim } from '../../src/webhooks/deliver.js';
import { WebhookEngine } from '../../src/webhooks/engine.js';
import type { ClaimBatch } from '../../src/worker/lease-engine.js';
import { tenant, testLog } from '../support/harness.js';
import { createEndpoint, emitMany, useWebhookRig, waitFor } from './support.js';

const t = useWebhookRig({}, { worker: false });

/** The engine as the worker runs it, keeping how many attempts each of its claims leased. */
class CountingEngine extends WebhookEngine {
  readonly leased: number[] = [];

  protected override async claimBatch(free: number): Promise<ClaimBatch<Claim>> {
    const batch = await super.claimBatch(free);
    this.leased.push(batch.claims.length);
    return batch;
  }
}

test('one endpoint at its cap with a backlog: claims come from records, not from every ending send', async () => {
  const { loc, token } = await tenant(t);
  await createEndpoint(t, token, loc.id, { url: t.rx.url, events: ['lead.created'] });
  await emitMany(t.owner, loc.id, 'lead.created', 200);

  const pool = createWorkerPool(t.db.url, 4, 'test-ran-short');
  const engine = new CountingEngine({ cfg: t.cfg, log: testLog, pool, ca: t.pki.caPem }, { concurrency: 16, perEndpoint: 2, pollIntervalMs: 60_000 });
  try {
    await engine.start();
    await waitFor(async () => (await t.owner.query(
      `select count(*)::int as n from app.webhook_deliveries where location_id = $1 and status = 'delivered'`, [loc.id])).rows[0].n === 200,
    'all 200 delivered', 30_000);
    expect(t.rx.received).toHaveLength(200);
    expect(engine.leased.reduce((a, b) => a + b, 0)).toBe(200);
    // Every claim but the last few leased something: an ending send no longer asks for a claim
    // that its own lease makes come back empty (about one for each attempt before).
    const empty = engine.leased.filter((n) => n === 0).length;
    expect(empty).toBeLessThanOrEqual(10);
  } finally {
    await engine.stop();
    await pool.end();
  }
});

/**
 * The shared engine machinery (src/worker/lease-engine.ts) without a queue table: a send that
 * throws instead of returning an outcome gives its row back and frees its slot; an outcome the
 * database refuses is recorded without the receiver's reply; an engine that
 * stops leaves nothing of itself on the LISTEN connection it gives back to the pool.
 */
import pg from 'pg';
import { LeaseEngine, type ClaimBatch } from '../../src/worker/lease-engine.js';
import { testLog } from '../support/harness.js';
import { waitFor } from '../webhooks/support.js';

class ThrowingEngine extends LeaseEngine<{ id: string }, { id: string }> {
  claims: Array<Array<{ id: string }>>;
  released: string[] = [];
  recorded: string[] = [];
  /** Without a pool nothing is touched: start() (LISTEN) is not called; claims and records are in memory. */
  constructor(pool = {} as pg.Pool, claims = [[{ id: 'a' }, { id: 'b' }]]) {
    super(pool, testLog, { ownerPrefix: 'test', channel: 'test_channel', concurrency: 4, pollIntervalMs: 60_000, shutdownGraceMs: 100, sendTimeoutMs: 1000, leaseGraceMs: 30_000 });
    this.claims = claims;
  }
  protected async claimBatch(): Promise<ClaimBatch<{ id: string }>> {
    return { claims: this.claims.shift() ?? [], next_due_at: null };
  }
  protected keyOf(c: { id: string }) {
    return c.id;
  }
  protected resultKey(r: { id: string }) {
    return r.id;
  }
  protected async send(c: { id: string }) {
    if (c.id === 'a') throw new Error('bug in a sender');
    return c;
  }
  protected async recordBatch(rs: Array<{ id: string }>) {
    this.recorded.push(...rs.map((r) => r.id));
  }
  protected async recordOne(r: { id: string }) {
    this.recorded.push(r.id);
  }
  protected withoutReply(r: { id: string }) {
    return r;
  }
  protected async release(ids: string[]) {
    this.released.push(...ids);
  }
}

type Reply = { id: string; reply: string | null };

/** Records in memory, and refuses (as jsonb refuses a NUL) any outcome whose reply holds "\u0000". */
class RefusingEngine extends LeaseEngine<{ id: string }, Reply> {
  claims = [[{ id: 'fine' }, { id: 'refused' }]];
  recorded: Reply[] = [];
  tries = 0;
  constructor() {
    super({} as pg.Pool, testLog, { ownerPrefix: 'test', channel: 'test_channel', concurrency: 4, pollIntervalMs: 60_000, shutdownGraceMs: 100, sendTimeoutMs: 1000, leaseGraceMs: 30_000 });
  }
  protected async claimBatch(): Promise<ClaimBatch<{ id: string }>> {
    return { claims: this.claims.shift() ?? [], next_due_at: null };
  }
  protected keyOf(c: { id: string }) {
    return c.id;
  }
  protected resultKey(r: Reply) {
    return r.id;
  }
  protected async send(c: { id: string }) {
    return { id: c.id, reply: c.id === 'refused' ? 'ok \u0000' : 'ok' };
  }
  private store(rs: Reply[]) {
    this.tries += 1;
    if (rs.some((r) => r.reply?.includes('\u0000'))) throw Object.assign(new Error('unsupported Unicode escape sequence'), { code: '22P05' });
    this.recorded.push(...rs);
  }
  protected async recordBatch(rs: Reply[]) {
    this.store(rs);
  }
  protected async recordOne(r: Reply) {
    this.store([r]);
  }
  protected withoutReply(r: Reply) {
    return { ...r, reply: null };
  }
  protected async release() {}
}

test('an outcome the database refuses is recorded without its reply: the try counts, and is not sent again when its lease lapses', async () => {
  const engine = new RefusingEngine();
  engine.kick();
  await waitFor(async () => engine.recorded.length === 2 && engine.inFlightCount === 0, 'both outcomes recorded');
  await engine.stop();
  expect(engine.recorded.sort((a, b) => a.id.localeCompare(b.id))).toEqual([{ id: 'fine', reply: 'ok' }, { id: 'refused', reply: null }]);
  // The batch, then each alone (the fine one, the refused one), then the refused one without its reply.
  expect(engine.tries).toBe(4);
});

test('a send that throws releases its row and frees its slot; the others are recorded', async () => {
  const engine = new ThrowingEngine();
  engine.kick();
  await waitFor(async () => engine.released.length + engine.recorded.length === 2 && engine.inFlightCount === 0, 'both sends settled');
  await engine.stop();
  expect(engine.released).toEqual(['a']);
  expect(engine.recorded).toEqual(['b']);
  expect(engine.inFlightCount).toBe(0);
});

/**
 * A pool of one connection to the test cluster, ended after `fn`. Bounded: with a connection
 * still checked out, end() would wait for it until the test's time-out.
 */
async function onOneConnection(fn: (pool: pg.Pool) => Promise<void>): Promise<void> {
  const pool = new pg.Pool({ connectionString: process.env.SB_TEST_ADMIN_URL, max: 1 });
  try {
    await fn(pool);
  } finally {
    await Promise.race([pool.end(), new Promise((resolve) => setTimeout(resolve, 2000).unref())]);
  }
}

test('an engine that stops takes its error listener off the LISTEN connection it gives back to the pool', async () => {
  // One connection, so every engine listens on the same one, as a worker's engines restarted on one pool would.
  await onOneConnection(async (pool) => {
    const errorListeners = async () => {
      const c = await pool.connect();
      try {
        return c.listenerCount('error');
      } finally {
        c.release();
      }
    };
    const before = await errorListeners();
    for (let i = 0; i < 12; i++) {
      const engine = new ThrowingEngine(pool, []);
      await engine.start();
      await engine.stop();
    }
    expect(await errorListeners()).toBe(before);
  });
});

test('an engine stopped while its LISTEN connection is still being opened gives that connection back too', async () => {
  await onOneConnection(async (pool) => {
    const engine = new ThrowingEngine(pool, []);
    // Not awaited: the connection is still being opened when stop() begins, as when a worker is
    // stopped right after a database outage, while its engines connect again.
    const started = engine.start();
    await engine.stop();
    await started;
    // Left checked out, the connection would keep the pool's end() (and the service's shutdown) waiting.
    await waitFor(async () => pool.totalCount === 1 && pool.idleCount === 1, 'the connection back in the pool', 3000);
  });
});

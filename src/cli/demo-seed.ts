/**
 * `demo seed` (docs/api-contract.md §4): a location's demo history. The calls are cut into batches
 * by day (a batch covers a run of days, most recent first), each batch is one transaction of
 * admin.demo_seed_calls writing its own customers, calls, leads and bookings, and `--jobs` batches
 * run at once on their own connections (docs/performance.md, "Seeding in batches").
 */
import { availableParallelism } from 'node:os';
import { SingleBar, Presets } from 'cli-progress';
import type { Command } from 'commander';
import type pg from 'pg';
import { z } from 'zod';
import { callFn, type StatementBound } from '../db/pools.js';

type Parse = <T>(schema: z.ZodType<T>, name: string, value: unknown) => T;
type WithDb = (fn: (pool: pg.Pool) => Promise<unknown>, connections?: number, bound?: StatementBound) => Promise<void>;

/** A batch (up to 100,000 calls in one statement) and the finishing step may run long. */
export const SEED_BOUND: StatementBound = { statementTimeoutMs: 30 * 60_000 };

/** One transaction of the seed: `calls` calls that started from `dayTo` to `dayFrom` days ago. */
export interface SeedBatch { calls: number; dayFrom: number; dayTo: number }

/**
 * The batches for `calls` calls spread evenly over the last `days` days: consecutive days share a
 * batch up to `size` calls; a day with more than `size` calls gets batches of its own.
 */
export function planSeedBatches(calls: number, days: number, size: number): SeedBatch[] {
  const batches: SeedBatch[] = [];
  let open: SeedBatch | null = null;
  for (let d = 0; d < days; d++) {
    let left = Math.floor((calls * (d + 1)) / days) - Math.floor((calls * d) / days);
    if (open && open.calls + left > size) {
      batches.push(open);
      open = null;
    }
    while (left > size) {
      batches.push({ calls: size, dayFrom: d, dayTo: d + 1 });
      left -= size;
    }
    if (open) {
      open.calls += left;
      open.dayTo = d + 1;
    } else if (left > 0) {
      open = { calls: left, dayFrom: d, dayTo: d + 1 };
    }
  }
  if (open) batches.push(open);
  return batches;
}

/**
 * How a batch's rows meet their foreign keys. `per_batch`: the CLI's role may set
 * `session_replication_role` (a superuser, or a role granted SET on it), so each batch runs with
 * it at `replica` and skips the per-row checks; the batch locks its location once and every other
 * row it references is one it wrote (docs/decisions.md, "Seeding without per-row foreign-key
 * checks"). `per_row`: every row is checked, as any insert.
 */
export type ForeignKeyChecks = 'per_batch' | 'per_row';

/** `per_batch` when the role of `db`'s connections may set session_replication_role. */
export async function foreignKeyChecks(db: pg.Pool | pg.ClientBase): Promise<ForeignKeyChecks> {
  const { rows: [{ may }] } = await db.query(`select has_parameter_privilege('session_replication_role', 'SET') as may`);
  return may ? 'per_batch' : 'per_row';
}

/**
 * One batch (admin.demo_seed_calls) on `client`, inside the caller's transaction; with `per_batch`
 * the replica role is set for the batch's statement and the session's own put back after it.
 */
export async function seedBatch(client: pg.PoolClient, checks: ForeignKeyChecks, args: unknown[]): Promise<void> {
  if (checks === 'per_row') {
    await callFn(client, 'admin.demo_seed_calls', args);
    return;
  }
  const { rows: [{ was }] } = await client.query(`select current_setting('session_replication_role') as was`);
  await client.query(`select set_config('session_replication_role', 'replica', true)`);
  await callFn(client, 'admin.demo_seed_calls', args);
  await client.query(`select set_config('session_replication_role', $1, true)`, [was]);
}

/** One batch as its own transaction on a connection of `pool`. */
async function seedBatchTransaction(pool: pg.Pool, checks: ForeignKeyChecks, args: unknown[]): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query('begin');
    await seedBatch(client, checks, args);
    await client.query('commit');
  } catch (err) {
    await client.query('rollback').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}

/** `--jobs` unless given: the CPU cores, at most 4. */
export const defaultSeedJobs = (): number => Math.min(4, availableParallelism());

export interface DemoSeedOptions {
  calls: number;
  days: number;
  /** Batches seeded at once, each on its own connection of `pool`. */
  jobs: number;
  /** Calls per batch (one transaction). */
  batch: number;
  /** Customers per call (default 0.7); each batch makes at least one. */
  customersPerCall?: number;
  /** Told, before the first batch, how the batches meet their foreign keys. */
  onChecks?: (checks: ForeignKeyChecks) => void;
  onProgress?: (done: number) => void;
}

/**
 * A location's demo history: prepare, the batches (`jobs` at a time, each worker taking the next
 * batch as its own ends; the first failure stops the others from starting a new one: batches
 * already committed stay, and a rerun continues the numbers), then the finishing step.
 */
export async function runDemoSeed(pool: pg.Pool, location: string, o: DemoSeedOptions): Promise<Record<string, unknown>> {
  const ratio = o.customersPerCall ?? 0.7;
  const { first_number: first } = await callFn<{ first_number: number }>(pool, 'admin.demo_seed_prepare', [location]);
  let number = Number(first);
  const work = planSeedBatches(o.calls, o.days, o.batch).map((b) => {
    const customers = Math.min(b.calls, Math.max(1, Math.ceil(b.calls * ratio)));
    const at = number;
    number += customers;
    return { ...b, customers, first: at };
  });
  const checks = await foreignKeyChecks(pool);
  o.onChecks?.(checks);
  let done = 0;
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < work.length) {
      const b = work[next++];
      try {
        await seedBatchTransaction(pool, checks, [location, b.calls, b.first, b.dayFrom, b.dayTo, b.customers]);
      } catch (err) {
        next = work.length;
        throw err;
      }
      done += b.calls;
      o.onProgress?.(done);
    }
  };
  const settled = await Promise.allSettled(Array.from({ length: Math.min(o.jobs, work.length) }, worker));
  const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (failed) throw failed.reason;
  const counts = await callFn<Record<string, unknown>>(pool, 'admin.demo_seed_finish', [location]);
  return { ...counts, foreign_key_checks: checks };
}

export function registerDemoCommands(program: Command, withDb: WithDb, parseWith: Parse): void {
  program
    .command('demo')
    .description('Sample data')
    .command('seed')
    .requiredOption('--location <id-or-slug>')
    .option('--calls <n>', 'number of calls', '500')
    .option('--days <n>', 'spread over the last N days', '30')
    .option('--jobs <n>', 'batches seeded at once, each on its own connection (default: CPU cores, at most 4)')
    .option('--batch <n>', 'calls per batch (one transaction)', '20000')
    .action(async (o) => {
      const calls = parseWith(z.coerce.number().int().min(1).max(10_000_000), 'calls', o.calls);
      const days = parseWith(z.coerce.number().int().min(1).max(365), 'days', o.days);
      const jobs = parseWith(z.coerce.number().int().min(1).max(16), 'jobs', o.jobs ?? defaultSeedJobs());
      const size = parseWith(z.coerce.number().int().min(1).max(100_000), 'batch', o.batch);
      await withDb(async (pool) => {
        const bar = new SingleBar({ stream: process.stderr, noTTYOutput: true, notTTYSchedule: 2000, format: 'seeding calls [{bar}] {percentage}% {value}/{total} | eta {eta_formatted}' }, Presets.shades_classic);
        bar.start(calls, 0);
        let summary: unknown;
        try {
          summary = await runDemoSeed(pool, o.location, { calls, days, jobs, batch: size, onChecks: (checks) => {
            if (checks === 'per_row') process.stderr.write('foreign keys checked per row: this role may not set session_replication_role (docs/decisions.md, "Seeding without per-row foreign-key checks")\n');
          }, onProgress: (n) => {
            bar.update(n);
            if (n === calls) process.stderr.write('\nfinishing…\n');
          } });
        } finally {
          bar.stop();
        }
        await pool.query('analyze app.calls, app.leads, app.bookings, app.customers');
        return summary;
      }, jobs, SEED_BOUND);
    });
}

/**
 * Gauges filled at scrape time: queue depth and age per lane, leased attempts and endpoint states
 * from one SQL call (app.metrics_queues, each lane read through the index its claims use), and
 * the pools of this process from their own counters. Nothing here runs between scrapes.
 */
import type pg from 'pg';
import type { Gauge } from 'prom-client';
import {
  databaseUp, onCollect, poolConnections, poolWaiting, queueDepth, queueOldestDueAge, webhookEndpoints, webhooksInFlight,
} from './registry.js';

interface LaneRow {
  depth: number;
  oldest_due_age_s: number;
}

interface Snapshot {
  webhooks: LaneRow & { leased: number };
  notifications: (LaneRow & { channel: string })[];
  endpoints: { disabled: number; failing: number };
  jobs: LaneRow | null;
}

const pools = new Map<string, pg.Pool>();
let source: pg.Pool | null = null;

/** The pools whose connections are reported (api, ingestion, worker); named once each. */
export function trackPool(name: string, pool: pg.Pool): void {
  pools.set(name, pool);
}

/** The (owner-role) pool the scrape queries queue depths with. */
export function setQueueSource(pool: pg.Pool | null): void {
  source = pool;
}

/** Forgets the pools and the source (a service stopping; tests that start several in one process). */
export function resetQueueSources(): void {
  pools.clear();
  source = null;
}

/**
 * How long a scrape waits for the queue query: within Prometheus's default scrape timeout (10 s),
 * so a database that does not answer reads as `switchboard_database_up 0` rather than a scrape
 * that never ends. The source may be the worker's pool, which has no bound of its own
 * (src/db/pools.ts); the query's connection is then dropped, as a bounded pool's would be.
 */
export const SCRAPE_ANSWER_MS = 5000;

async function query(): Promise<Snapshot | null> {
  if (!source) return null;
  try {
    const { rows } = await source.query<{ q: Snapshot }>({
      name: 'sb:metrics_queues', text: 'select app.metrics_queues() as q', query_timeout: SCRAPE_ANSWER_MS,
    } as pg.QueryConfig);
    return rows[0].q;
  } catch {
    return null; // database down: switchboard_database_up says so; the queue gauges show nothing stale
  }
}

async function fillQueues(): Promise<void> {
  const s = await query();
  queueDepth.reset();
  queueOldestDueAge.reset();
  webhooksInFlight.reset();
  webhookEndpoints.reset();
  databaseUp.reset();
  if (!source) return;
  databaseUp.set(s ? 1 : 0);
  if (!s) return;
  const lane = (name: string, channel: string, row: LaneRow) => {
    queueDepth.labels(name, channel).set(row.depth);
    queueOldestDueAge.labels(name, channel).set(row.oldest_due_age_s);
  };
  lane('webhooks', '', s.webhooks);
  for (const n of s.notifications) lane('notifications', n.channel, n);
  if (s.jobs) lane('jobs', '', s.jobs);
  webhooksInFlight.set(s.webhooks.leased);
  webhookEndpoints.labels('disabled').set(s.endpoints.disabled);
  webhookEndpoints.labels('failing').set(s.endpoints.failing);
}

/** One fill per scrape: prom-client collects the gauges concurrently, and each awaits this one. */
let filling: Promise<void> | null = null;
function fill(): Promise<void> {
  filling ??= fillQueues().finally(() => {
    filling = null;
  });
  return filling;
}

function fillPools(): void {
  poolConnections.reset();
  poolWaiting.reset();
  for (const [name, pool] of pools) {
    poolConnections.labels(name, 'in_use').set(pool.totalCount - pool.idleCount);
    poolConnections.labels(name, 'idle').set(pool.idleCount);
    poolWaiting.labels(name).set(pool.waitingCount);
  }
}

for (const g of [queueDepth, queueOldestDueAge, webhooksInFlight, webhookEndpoints, databaseUp]) onCollect(g as Gauge<string>, fill);
onCollect(poolConnections, fillPools);

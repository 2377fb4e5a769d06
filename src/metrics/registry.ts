/**
 * The process's Prometheus metrics (docs/operations.md, "Metrics"): one registry, and every metric
 * the service records by name, so another area adds its own here (or with `registry` directly)
 * and it is scraped with the rest. Names follow Prometheus conventions (`switchboard_…_total`
 * counters, `…_seconds` durations); labels take only values from small fixed sets, never a
 * location, endpoint, key or call id (why: docs/operations.md, "Labels").
 */
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

export const registry = new Registry();

/** Request latency buckets (seconds): the API answers in about a millisecond, list pages in a few. */
export const REQUEST_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
/** Event-to-receipt buckets (seconds): from sub-second (due at once) to the last retry hours later. */
const DELIVERY_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 7200, 21600, 86400];

export const httpRequestDuration = new Histogram({
  name: 'switchboard_http_request_duration_seconds',
  help: 'Time from a request reaching the API to its response finishing, by method, route template (unmatched: no route) and status class.',
  labelNames: ['method', 'route', 'status_class'] as const,
  buckets: REQUEST_BUCKETS,
  registers: [registry],
});

export const voiceEvents = new Counter({
  name: 'switchboard_voice_events_total',
  help: 'Voice platform webhooks received, by type (inbound, call_started, call_ended, call_analyzed, transfer_started, other, unknown) and outcome (recorded, ignored, rejected, unavailable, error).',
  labelNames: ['type', 'outcome'] as const,
  registers: [registry],
});

export const webhookAttempts = new Counter({
  name: 'switchboard_webhook_attempts_total',
  help: 'Webhook delivery attempts made, by outcome: 2xx, 3xx, 4xx, 5xx (the receiver answered), timeout, refused (connection refused or target blocked), error (any other network failure).',
  labelNames: ['outcome'] as const,
  registers: [registry],
});

export const webhookDeliveryLatency = new Histogram({
  name: 'switchboard_webhook_delivery_latency_seconds',
  help: 'From an event being written to a receiver acknowledging it (the 2xx answer to its delivery), retries included.',
  buckets: DELIVERY_BUCKETS,
  registers: [registry],
});

export const notificationAttempts = new Counter({
  name: 'switchboard_notification_attempts_total',
  help: 'Notification tries, by channel (sms, email, chat, automation), priority (emergency, normal) and outcome (sent, skipped, failed).',
  labelNames: ['channel', 'priority', 'outcome'] as const,
  registers: [registry],
});

/** Filled at scrape time from one SQL call (src/metrics/queues.ts). */
export const queueDepth = new Gauge({
  name: 'switchboard_queue_depth',
  help: 'Items due now and not yet claimed, per lane (webhooks; notifications per channel; jobs = graphile-worker).',
  labelNames: ['lane', 'channel'] as const,
  registers: [registry],
});

export const queueOldestDueAge = new Gauge({
  name: 'switchboard_queue_oldest_due_age_seconds',
  help: 'How long the oldest item due now and not yet claimed has been due, per lane (0 when none waits).',
  labelNames: ['lane', 'channel'] as const,
  registers: [registry],
});

export const webhooksInFlight = new Gauge({
  name: 'switchboard_webhook_attempts_leased',
  help: 'Webhook attempts leased to a worker right now (being sent), across all workers.',
  registers: [registry],
});

export const webhookEndpoints = new Gauge({
  name: 'switchboard_webhook_endpoints',
  help: 'Webhook endpoints by state: disabled (by the health rules or a 410), failing (active, last attempt failed).',
  labelNames: ['state'] as const,
  registers: [registry],
});

export const poolConnections = new Gauge({
  name: 'switchboard_db_pool_connections',
  help: 'Connections of this process\'s database pools (api, ingestion, worker), by state: in_use, idle.',
  labelNames: ['pool', 'state'] as const,
  registers: [registry],
});

export const poolWaiting = new Gauge({
  name: 'switchboard_db_pool_waiting',
  help: 'Queries of this process waiting for a free pool connection, per pool.',
  labelNames: ['pool'] as const,
  registers: [registry],
});

export const databaseUp = new Gauge({
  name: 'switchboard_database_up',
  help: '1 when the last scrape reached the database (its queue query answered), 0 when it did not.',
  registers: [registry],
});

export const embeddedRestarts = new Counter({
  name: 'switchboard_embedded_postgres_restarts_total',
  help: 'Restarts of the embedded PostgreSQL by this process after it exited unexpectedly, by result (ok, failed).',
  labelNames: ['result'] as const,
  registers: [registry],
});

export const engineLastClaimAge = new Gauge({
  name: 'switchboard_engine_last_claim_age_seconds',
  help: 'Seconds since each lane of this worker last completed a claim or poll successfully (webhooks, notifications, jobs).',
  labelNames: ['lane'] as const,
  registers: [registry],
});

let defaults = false;
/** Node's and the process's own metrics (CPU, memory, handles, GC, event-loop lag), once per process. */
export function startDefaultMetrics(): void {
  if (defaults) return;
  defaults = true;
  collectDefaultMetrics({ register: registry });
}

/** Fills a gauge at scrape time (prom-client calls `collect` before reading it); prom-client awaits a promise. */
export function onCollect(metric: Gauge<string> | Histogram<string>, fill: () => void | Promise<void>): void {
  (metric as unknown as { collect: () => void | Promise<void> }).collect = fill;
}

/** One webhook attempt: claim, signed POST (src/net/post.ts), record; plus the sweeper task. */
import type pg from 'pg';
import type { Task } from 'graphile-worker';
import { callFn } from '../db/pools.js';
import type { TaskDeps } from '../worker/index.js';
import { guardedPost, type PostOptions } from '../net/post.js';
import { deliveryHeaders } from './sign.js';

export { USER_AGENT } from './sign.js';

interface Claim {
  delivery_id: string;
  event_id: string;
  event: string;
  attempt: number;
  url: string;
  body: string;
  secrets: string[];
  /** A test send (webhook.test event): svc-test: true. */
  test?: boolean;
}

export interface DeliverPayload {
  delivery_id: string;
  location_id?: string;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function assertDeliverPayload(p: unknown): asserts p is DeliverPayload {
  const o = p as Record<string, unknown> | null;
  if (!o || typeof o !== 'object' || typeof o.delivery_id !== 'string' || !UUID.test(o.delivery_id)) {
    throw new Error('deliver_webhook: payload must be { delivery_id: uuid, location_id }');
  }
}

export interface DeliverOptions {
  ca?: PostOptions['ca'];
}

/**
 * Sends one attempt inside one transaction: claim (row locks) → POST → record → commit. The
 * transaction stays open during the POST on purpose: the delivery row lock tells the sweeper the
 * attempt is alive, and the endpoint KEY SHARE lock makes DELETE wait for it.
 */
export async function deliverOnce(pool: pg.Pool, deps: Pick<TaskDeps, 'cfg' | 'log'>, deliveryId: string, opts: DeliverOptions = {}) {
  const { cfg, log } = deps;
  const client = await pool.connect();
  let broken = false;
  try {
    await client.query('begin');
    const claim = await callFn<Claim | null>(client, 'app.webhook_claim', [deliveryId, cfg.WEBHOOK_TIMEOUT_MS]);
    if (!claim) {
      await client.query('commit');
      return null;
    }
    const headers = deliveryHeaders({
      event: claim.event, eventId: claim.event_id, deliveryId: claim.delivery_id,
      timestamp: Math.floor(Date.now() / 1000), body: claim.body, secrets: claim.secrets, test: claim.test,
    });
    const result = await guardedPost({
      url: claim.url, body: claim.body, headers, timeoutMs: cfg.WEBHOOK_TIMEOUT_MS,
      allowPrivate: cfg.WEBHOOK_ALLOW_PRIVATE_TARGETS, ca: opts.ca,
    });
    const recorded = await callFn(client, 'app.webhook_record', [deliveryId, result, cfg.WEBHOOK_RETRY_DELAYS]);
    await client.query('commit');
    log.info({ delivery_id: deliveryId, event_id: claim.event_id, attempt: claim.attempt, ok: result.ok, status: result.response_status }, 'webhook attempt');
    return recorded;
  } catch (err) {
    broken = true;
    await client.query('rollback').catch(() => undefined);
    throw err;
  } finally {
    client.release(broken);
  }
}

/** The deliver_webhook task; trusts `opts.ca`, else `deps.ca` (unset in production). */
export function makeDeliverTask(deps: TaskDeps, opts: DeliverOptions = {}): Task {
  const options: DeliverOptions = { ca: opts.ca ?? deps.ca };
  return async (payload) => {
    assertDeliverPayload(payload);
    await deliverOnce(deps.pool, deps, payload.delivery_id, options);
  };
}

/** Default grace before a due pending attempt counts as lost (its job did not run). */
export const SWEEP_GRACE_SECONDS = 60;

export function makeSweepTask(deps: TaskDeps): Task {
  return async (payload) => {
    const p = (payload ?? {}) as { grace_seconds?: unknown };
    const grace = typeof p.grace_seconds === 'number' && p.grace_seconds >= 0 ? Math.floor(p.grace_seconds) : SWEEP_GRACE_SECONDS;
    const n = await callFn<number>(deps.pool, 'app.webhook_sweep', [grace]);
    if (n > 0) deps.log.warn({ requeued: n }, 'webhook sweeper re-queued overdue attempts');
  };
}

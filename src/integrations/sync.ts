/**
 * The integration_sync job (docs/integrations.md "Sync log"): claims one pending sync, writes its
 * record into the connection's field-service system with a usable token, and records the outcome.
 *
 * - 429, 5xx, time-outs, Jobber's THROTTLED: retried on WEBHOOK_RETRY_DELAYS (the webhook
 *   schedule), never sooner than Retry-After or the throttle bucket's refill; after the last delay
 *   the sync fails with the last reason.
 * - A validation refusal: failed at once with the provider's message (retry by hand: POST
 *   …/syncs/{id}/retry).
 * - An expired connection: the sync waits (pending) until re-authorisation.
 * - An update whose create has not synced yet waits (pending, attempt not counted) until it has;
 *   one whose create failed fails, saying so. After a reconnection, the create of an earlier
 *   connection of the same account counts; for another account the claim adds the create.
 * - A record whose personal data was erased (docs/privacy.md) is never written: the sync fails.
 * - One sync in flight per connection, across worker processes (app.integration_sync_claim
 *   answers busy while another holds a lease): two at once would each look for the same client
 *   or customer, find none and create it twice. Another job for a busy connection steps aside
 *   (queued again 250 ms later) instead of taking a slot, so a slow or black-holed provider holds
 *   one slot of the sync lane.
 */
import type { Task } from 'graphile-worker';
import type pg from 'pg';
import type { Config } from '../config.js';
import { callFn } from '../db/pools.js';
import type { Logger } from '../log.js';
import type { ExtraCa } from '../net/ca.js';
import { errSummary } from '../privacy/log-safe.js';
import { hcpWrite } from './housecall-pro.js';
import { jobberWrite, TokenRejected } from './jobber.js';
import { ProviderRefused, ProviderUnavailable } from './oauth.js';
import type { FieldServiceProvider } from './providers.js';
import { toSyncRecord } from './records.js';
import { netOptions } from './service.js';
import { stWrite } from './servicetitan.js';
import { IntegrationUnavailable, TokenKeeper } from './tokens.js';
import type { WriteContext } from './write-context.js';
import type { TaskDeps } from '../worker/task.js';

const writers: Record<FieldServiceProvider, (ctx: WriteContext) => Promise<{ external_id: string }>> = {
  jobber: jobberWrite, housecall_pro: hcpWrite, servicetitan: stWrite,
};

export interface SyncDeps {
  cfg: Config;
  log: Logger;
  pool: pg.Pool;
  ca?: ExtraCa;
}

/** How long a job of a busy connection waits before it is tried again. */
const STEP_ASIDE_MS = 250;

/** How long an update waits at least before it looks again whether its create has synced. */
const CREATE_WAIT_S = 5;

export type SyncOutcome = 'synced' | 'failed' | 'retry' | 'wait' | 'defer' | 'skipped' | 'busy';

/** Connections with a sync in flight in this process (saves a claim that would answer busy). */
const inFlight = new Set<string>();

export class SyncRunner {
  private readonly keeper: TokenKeeper;

  constructor(private readonly deps: SyncDeps) {
    this.keeper = new TokenKeeper({ cfg: deps.cfg, log: deps.log, pool: deps.pool, net: netOptions(deps.cfg, deps.ca) });
  }

  private finish(id: string, outcome: 'synced' | 'failed' | 'retry' | 'wait' | 'defer', externalId: string | null, error: string | null, retryIn = 0) {
    return callFn(this.deps.pool, 'app.integration_sync_finish', [id, outcome, externalId, error, Math.ceil(retryIn)]);
  }

  async run(syncId: string, integrationId?: string): Promise<SyncOutcome> {
    const { cfg, log, pool } = this.deps;
    if (integrationId && inFlight.has(integrationId)) return this.stepAside(syncId, integrationId);
    const leaseSeconds = Math.ceil((cfg.WEBHOOK_TIMEOUT_MS * 6) / 1000) + 30;
    const s = await callFn<any>(pool, 'app.integration_sync_claim', [syncId, leaseSeconds]);
    if (!s) return 'skipped';
    // Another sync of the connection is in flight (here or in another process): nothing claimed.
    if (s.busy) return this.stepAside(syncId, s.integration_id);
    inFlight.add(s.integration_id);
    try {
      if (!s.record) {
        await this.finish(s.id, 'failed', null, `The ${s.record_type} no longer exists`);
        return 'failed';
      }
      if (s.erased) {
        await this.finish(s.id, 'failed', null, `The ${s.record_type}'s personal data was erased before it was written`);
        return 'failed';
      }
      if (s.action === 'update' && s.create_status === 'failed') {
        const why = s.create_error ? ` (${s.create_error})` : '';
        await this.finish(s.id, 'failed', null, `The ${s.record_type}'s create sync failed${why}: retry it, then this update`);
        return 'failed';
      }
      if (s.action === 'update' && s.create_status === 'pending') {
        const until = s.create_next_attempt_at ? (Date.parse(s.create_next_attempt_at) - Date.now()) / 1000 + 1 : 0;
        await this.finish(s.id, 'defer', null, `Waiting for the ${s.record_type}'s create sync`, Math.max(CREATE_WAIT_S, until));
        return 'defer';
      }
      const rec = toSyncRecord(s.record_type, s.record, s.timezone);
      const remote: Record<string, string> = { ...(s.remote ?? {}) };
      const result = await this.keeper.withToken(s.integration_id, (c) => writers[c.provider]({
        net: netOptions(cfg, this.deps.ca), cfg, accessToken: c.secrets.access_token!, externalId: c.external_id,
        action: s.action, triedBefore: s.tried_before === true, remote, createRemote: s.create_remote ?? null, rec,
        progress: async (ids) => {
          Object.assign(remote, ids);
          await callFn(pool, 'app.integration_sync_progress', [s.id, ids]);
        },
      }));
      await this.finish(s.id, 'synced', result.external_id, null);
      return 'synced';
    } catch (err) {
      if (err instanceof IntegrationUnavailable) {
        await this.finish(s.id, 'wait', null, err.message);
        return 'wait';
      }
      if (err instanceof ProviderRefused) {
        await this.finish(s.id, 'failed', null, `${s.provider} refused: ${err.reason}`);
        return 'failed';
      }
      const delays = cfg.WEBHOOK_RETRY_DELAYS;
      const reason = err instanceof ProviderUnavailable || err instanceof TokenRejected
        ? (err as Error).message : 'Internal error while syncing';
      if (!(err instanceof ProviderUnavailable) && !(err instanceof TokenRejected)) {
        log.error({ sync_id: s.id, provider: s.provider, err: errSummary(err) }, 'integration sync failed unexpectedly');
      }
      if (s.attempts > delays.length) {
        await this.finish(s.id, 'failed', null, `Gave up after ${s.attempts} attempts: ${reason}`);
        return 'failed';
      }
      const wait = Math.max(delays[s.attempts - 1], err instanceof ProviderUnavailable ? (err.retryAfter ?? 0) : 0);
      await this.finish(s.id, 'retry', null, reason, wait);
      return 'retry';
    } finally {
      inFlight.delete(s.integration_id);
    }
  }

  /** The connection has a sync in flight: queue this job again shortly. */
  private async stepAside(syncId: string, integrationId: string): Promise<SyncOutcome> {
    await callFn(this.deps.pool, 'app.enqueue', ['integration_sync', { sync_id: syncId, integration_id: integrationId }, new Date(Date.now() + STEP_ASIDE_MS).toISOString(), `integration_sync:${syncId}`]);
    return 'busy';
  }
}

/** The `integration_sync` job (one per sync of a lead or booking): tasks/integration_sync.ts. */
export function makeSyncTask(deps: TaskDeps): Task {
  const runner = new SyncRunner({ cfg: deps.cfg, log: deps.log, pool: deps.pool, ca: deps.ca });
  return async (payload) => {
    const { sync_id, integration_id } = payload as { sync_id: string; integration_id?: string };
    await runner.run(sync_id, integration_id);
  };
}

/** The `integration_sync_sweep` cron (every minute): queues again overdue pending syncs (a worker died holding one, or the connection was re-authorised). */
export function makeSyncSweepTask(deps: TaskDeps): Task {
  return async () => {
    const n = await callFn<number>(deps.pool, 'app.integration_sync_sweep', [500]);
    if (n > 0) deps.log.info({ queued: n }, 'integration syncs queued again');
  };
}

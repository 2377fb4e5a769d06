/**
 * Erasure at the voice platform (docs/privacy.md "Erasure"): when VOICE_API_KEY is set, each call
 * an erasure matched is deleted there with Retell's delete-call (`DELETE /v2/delete-call/{id}`,
 * retell-sdk's `client.call.delete`), as outbound work: the `erasure_platform_delete` job (one per
 * erasure) tries every pending call, records each outcome in app.erasure_platform_calls, and
 * fails while any is still pending, so graphile-worker retries it with its exponential backoff.
 * 204 (deleted) and 404 (already gone) settle a call as deleted; 408, 429, 5xx and connection
 * errors are retried; any other answer, or a target the SSRF rule refuses, fails the call at once. The request goes through the SSRF
 * guard like every outbound request (src/net/fetch.ts). Logs name the erasure, never the caller.
 */
import type { Task } from 'graphile-worker';
import Retell from 'retell-sdk';
import type { Config } from '../config.js';
import { callFn } from '../db/pools.js';
import { guardedFetch } from '../net/fetch.js';
import { SsrfError } from '../net/ssrf.js';
import type { TaskDeps } from '../worker/task.js';

/** Tries per erasure job (the job's max_attempts in app.erasure_perform); the last one settles every call. */
export const PLATFORM_MAX_ATTEMPTS = 10;
/** DELETE requests in flight per job. */
const CONCURRENCY = 4;

export interface PlatformOutcome {
  id: string;
  outcome: 'deleted' | 'retry' | 'failed';
  response_status: number | null;
  error: string | null;
}

interface Pending {
  id: string;
  platform_call_id: string;
  attempts: number;
}

/** The voice platform's client, or null when no key is configured. */
export function platformClient(cfg: Config, ca?: string): Retell | null {
  if (!cfg.VOICE_API_KEY) return null;
  return new Retell({
    apiKey: cfg.VOICE_API_KEY,
    baseURL: cfg.VOICE_API_BASE_URL,
    maxRetries: 0,
    timeout: cfg.WEBHOOK_TIMEOUT_MS,
    fetch: guardedFetch({ allowPrivate: cfg.WEBHOOK_ALLOW_PRIVATE_TARGETS, ca, timeoutMs: cfg.WEBHOOK_TIMEOUT_MS }),
  });
}

/** One DELETE, classified. */
export async function deleteAtPlatform(client: Retell, p: Pending): Promise<PlatformOutcome> {
  try {
    await client.call.delete(p.platform_call_id);
    return { id: p.id, outcome: 'deleted', response_status: 204, error: null };
  } catch (err) {
    const status = err instanceof Retell.APIError && typeof err.status === 'number' ? err.status : null;
    if (status === 404) return { id: p.id, outcome: 'deleted', response_status: 404, error: null };
    // The SDK wraps what fetch threw (a refused target, a reset connection) as its cause.
    const cause = (err as { cause?: unknown }).cause;
    if (cause instanceof SsrfError) return { id: p.id, outcome: 'failed', response_status: null, error: `Refused: ${cause.message}` };
    const retry = status === null || status === 408 || status === 429 || status >= 500;
    const error = status === null ? `Request failed: ${cause instanceof Error ? cause.message : (err as Error).message}` : `HTTP ${status}`;
    return { id: p.id, outcome: retry ? 'retry' : 'failed', response_status: status, error };
  }
}

/** Tries every pending call of one erasure once and records the outcomes; returns how many stay pending. */
export async function platformRound(deps: Pick<TaskDeps, 'cfg' | 'pool' | 'ca'>, erasureId: string, locationId: string, final: boolean): Promise<number> {
  const pending = await callFn<Pending[]>(deps.pool, 'app.erasure_platform_pending', [erasureId, locationId]);
  const client = platformClient(deps.cfg, deps.ca);
  const outcomes: PlatformOutcome[] = [];
  if (client) {
    let next = 0;
    const lane = async () => {
      while (next < pending.length) outcomes.push(await deleteAtPlatform(client, pending[next++]));
    };
    await Promise.all(Array.from({ length: Math.min(CONCURRENCY, pending.length) }, lane));
  } else {
    // The key was removed after the erasure was queued: nothing can be deleted any more.
    for (const p of pending) outcomes.push({ id: p.id, outcome: 'failed', response_status: null, error: 'VOICE_API_KEY is not configured' });
  }
  return callFn<number>(deps.pool, 'app.erasure_platform_record', [erasureId, locationId, JSON.stringify(outcomes), final]);
}

export function makeErasurePlatformTask(deps: TaskDeps): Task {
  return async (payload, helpers) => {
    const { erasure_id, location_id } = payload as { erasure_id: string; location_id: string };
    const final = helpers.job.attempts >= Math.min(helpers.job.max_attempts, PLATFORM_MAX_ATTEMPTS);
    const left = await platformRound(deps, erasure_id, location_id, final);
    deps.log.info({ task: 'erasure_platform_delete', erasure_id, attempt: helpers.job.attempts, pending: left }, 'voice-platform deletions tried');
    if (left > 0) throw new Error(`${left} voice-platform deletions still pending for erasure ${erasure_id}`);
  };
}

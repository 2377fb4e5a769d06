/**
 * finalize_call: enqueued by app.voice_post_call 10 minutes after call_ended (job_key per call).
 * If call_analyzed has not arrived by then, the call is settled from its disconnection reason;
 * if it has, this is a no-op, so a retry or a late duplicate is always safe.
 */
import type { Task } from 'graphile-worker';
import { callFn } from '../db/pools.js';
import type { TaskDeps } from './task.js';

export interface FinalizeCallPayload {
  call_id: string;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function assertFinalizeCallPayload(p: unknown): asserts p is FinalizeCallPayload {
  if (!p || typeof p !== 'object' || typeof (p as { call_id?: unknown }).call_id !== 'string' || !UUID.test((p as { call_id: string }).call_id)) {
    throw new Error('finalize_call: payload must be { call_id: uuid }');
  }
}

/** The finalize_call task. */
export function makeFinalizeCallTask(deps: TaskDeps): Task {
  return async (payload) => {
    assertFinalizeCallPayload(payload);
    const result = await callFn<{ finalized: boolean; outcome?: string; reason?: string }>(
      deps.pool, 'app.voice_finalize_overdue', [payload.call_id]);
    deps.log.info({ task: 'finalize_call', call_id: payload.call_id, ...result }, 'finalize_call done');
  };
}

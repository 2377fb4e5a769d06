/**
 * One webhook attempt over node:https. Chosen over fetch/undici because node:https gives the
 * three controls we need with no extra layer: a socket `lookup` hook (SSRF check on the resolved
 * address, no DNS rebinding), an `https.Agent` trusting an extra CA on top of the public roots
 * (TaskDeps.ca in tests; production trusts the system store plus NODE_EXTRA_CA_CERTS), and no
 * redirect following at all (3xx = failure).
 */
import https from 'node:https';
import type pg from 'pg';
import type { Task } from 'graphile-worker';
import { callFn } from '../db/pools.js';
import type { TaskDeps } from '../worker/index.js';
import { trustedCa, type ExtraCa } from '../net/ca.js';
import { assertConnectTarget, guardedLookup } from '../net/ssrf.js';
import { signatureHeader } from './sign.js';

export const USER_AGENT = 'Service-Webhooks/1.0';
export const MAX_RESPONSE_BYTES = 16 * 1024;

export interface AttemptResult {
  ok: boolean;
  response_status: number | null;
  response_body: string | null;
  error: string | null;
  duration_ms: number;
  attempted_at: string;
}

export interface PostOptions {
  url: string;
  body: string;
  headers: Record<string, string>;
  timeoutMs: number;
  allowPrivate: boolean;
  /** Extra trusted CA certificates (PEM), added to the public roots; tests pass their own CA. */
  ca?: ExtraCa;
}

/** First 16 KiB of a response as text that also fits 16 KiB once UTF-8 encoded (no NULs: Postgres text). */
function clip(chunks: Buffer[]): string {
  let s = Buffer.concat(chunks).subarray(0, MAX_RESPONSE_BYTES).toString('utf8').replace(/\u0000/g, '');
  while (Buffer.byteLength(s) > MAX_RESPONSE_BYTES) s = s.slice(0, -1);
  return s;
}

/** POSTs the exact body; resolves (never rejects) with the attempt's outcome. */
export function postWebhook(opts: PostOptions): Promise<AttemptResult> {
  const started = Date.now();
  const attempted_at = new Date(started).toISOString();
  const done = (r: Omit<AttemptResult, 'duration_ms' | 'attempted_at'>): AttemptResult => ({
    ...r, duration_ms: Date.now() - started, attempted_at,
  });
  return new Promise((resolve) => {
    let settled = false;
    const finish = (r: AttemptResult) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(r);
    };
    let url: URL;
    try {
      url = new URL(opts.url);
      assertConnectTarget(url, opts.allowPrivate);
    } catch (err) {
      finish(done({ ok: false, response_status: null, response_body: null, error: (err as Error).message }));
      return;
    }
    const payload = Buffer.from(opts.body, 'utf8');
    const agent = new https.Agent({ keepAlive: false, ca: trustedCa(opts.ca) });
    const req = https.request(url, {
      method: 'POST',
      agent,
      lookup: guardedLookup(opts.allowPrivate) as never,
      headers: { ...opts.headers, 'content-length': String(payload.length) },
    });
    // The whole attempt (connect, request, complete response) must fit in the time-out.
    const timer = setTimeout(() => {
      req.destroy(new Error(`No complete response within ${opts.timeoutMs} ms`));
    }, opts.timeoutMs);
    req.on('error', (err) => {
      finish(done({ ok: false, response_status: null, response_body: null, error: err.message }));
      agent.destroy();
    });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      let kept = 0;
      res.on('data', (c: Buffer) => {
        if (kept < MAX_RESPONSE_BYTES) {
          chunks.push(c);
          kept += c.length;
        }
      });
      res.on('error', (err) => {
        finish(done({ ok: false, response_status: res.statusCode ?? null, response_body: clip(chunks), error: err.message }));
      });
      res.on('end', () => {
        const status = res.statusCode ?? 0;
        const ok = status >= 200 && status < 300;
        finish(done({
          ok, response_status: status, response_body: clip(chunks),
          error: ok ? null : status >= 300 && status < 400 ? `Redirect (${status}) not followed` : `Non-2xx response (${status})`,
        }));
        agent.destroy();
      });
      res.on('close', () => {
        finish(done({ ok: false, response_status: res.statusCode ?? null, response_body: clip(chunks), error: 'Response aborted before completion' }));
      });
    });
    req.end(payload);
  });
}

interface Claim {
  delivery_id: string;
  event_id: string;
  event: string;
  attempt: number;
  url: string;
  body: string;
  secrets: string[];
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
    const headers = {
      'content-type': 'application/json',
      'user-agent': USER_AGENT,
      'svc-event': claim.event,
      'svc-event-id': claim.event_id,
      'svc-delivery-id': claim.delivery_id,
      'svc-timestamp': String(Math.floor(Date.now() / 1000)),
      'svc-signature': signatureHeader(claim.body, claim.secrets),
    };
    const result = await postWebhook({
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

import type pg from 'pg';
import type { Config } from '../../src/config.js';
import { NotificationEngine } from '../../src/notify/engine.js';
import { asLocation, testLog } from '../support/harness.js';
import { waitFor } from '../webhooks/support.js';

/**
 * Runs a notification engine (the path production takes) until nothing is due and every send it
 * claimed is recorded; then stops it.
 */
export async function sendDue(pool: pg.Pool, cfg: Config, ca: string, log = testLog): Promise<void> {
  const engine = new NotificationEngine({ cfg, log, pool, ca }, { pollIntervalMs: 20 });
  await engine.start();
  try {
    await waitFor(async () => {
      const { rows: [q] } = await pool.query(
        `select count(*) filter (where lease_expires_at is null and next_attempt_at <= now())::int as due,
                count(*) filter (where lease_owner = $1)::int as mine
           from app.notifications where status = 'pending'`, [engine.id]);
      return q.due === 0 && q.mine === 0 && engine.inFlightCount === 0;
    }, 'no notification due or in flight', 20_000);
  } finally {
    await engine.stop();
  }
}

/** Makes one pending notification due now (skipping its backoff) and runs the engine: its next try. */
export async function tryNow(pool: pg.Pool, cfg: Config, ca: string, notificationId: string): Promise<void> {
  await pool.query(`update app.notifications set next_attempt_at = now() where id = $1 and status = 'pending'`, [notificationId]);
  await sendDue(pool, cfg, ca);
}

export async function connectIntegration(owner: pg.Pool, locationId: string, provider: string, url: string, label?: string) {
  await owner.query(
    `insert into app.integrations (location_id, provider, webhook_url, label, connected_at) values ($1, $2, $3, $4, now())`,
    [locationId, provider, url, label ?? null],
  );
}

/** Connects Slack the way the integrations route does: a row written as the location (API role, RLS). */
export async function connectSlack(apiPool: pg.Pool, locationId: string, url: string): Promise<void> {
  await asLocation(apiPool, locationId, (c) => c.query(
    `insert into app.integrations (location_id, provider, webhook_url, label, connected_at) values ($1, 'slack', $2, '#dispatch', now())`,
    [locationId, url]));
}

/** A finalised emergency call and its call.emergency event, as ingestion would write them. */
export async function emergencyCall(owner: pg.Pool, locationId: string, attrs: Record<string, unknown> = {}): Promise<{ callId: string; eventId: string }> {
  const c = {
    caller_phone: '+12125550142', caller_name: 'Dana Whitfield', caller_address: '41 Elm St, Springfield',
    service_type: 'furnace repair', issue_summary: 'No heat, furnace smells of gas', urgency_level: 5, ...attrs,
  };
  const { rows } = await owner.query(
    `with c as (
       insert into app.calls (location_id, platform_call_id, caller_phone, caller_name, caller_address, outcome,
                              urgency_level, is_emergency, started_at, ended_at, duration_sec, service_type, issue_summary,
                              platform_status, finalized_at, emergency_fired_at)
       values ($1, 'call_' || gen_random_uuid(), $2, $3, $4, 'lead', $5, true, now() - interval '3 minutes', now(), 180, $6, $7,
               'analyzed', now(), now())
       returning *)
     select c.id as call_id, app.emit($1, 'call.emergency',
              app.call_summary_json(c) || jsonb_build_object('reason', 'urgency', 'lead_id', null)) as event_id
       from c`,
    [locationId, c.caller_phone, c.caller_name, c.caller_address, c.urgency_level, c.service_type, c.issue_summary],
  );
  return { callId: rows[0].call_id, eventId: rows[0].event_id };
}

export async function notificationsOf(owner: pg.Pool, eventId: string) {
  const { rows } = await owner.query(
    `select n.*, coalesce((select jsonb_agg(g order by g.at, g.id) from app.notification_log g where g.notification_id = n.id), '[]') as log
       from app.notifications n where n.event_id = $1 order by n.channel, n.recipient`,
    [eventId],
  );
  return rows as Array<{ id: string; location_id: string; channel: string; provider: string; recipient: string | null; status: string; attempts: number; log: Array<{ status: string; detail: string; response_status: number | null }> }>;
}

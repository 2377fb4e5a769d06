-- Delivery engine (issue 10): leases instead of transactions held across a POST, batched claims
-- with per-endpoint caps and fair ordering for webhooks, a notification lane with priorities,
-- and one sweeper for attempts whose worker died. See docs/delivery-engine.md.

-- ---------------------------------------------------------------------------------------------
-- Leases. A claimed attempt carries who holds it and until when; nothing else marks it in flight.
alter table app.webhook_deliveries
  add column if not exists lease_expires_at timestamptz,
  add column if not exists lease_owner text;
comment on column app.webhook_deliveries.lease_expires_at is
  E'@behavior -filterBy -orderBy\nWhile a worker sends this pending attempt: when its claim lapses (time-out + grace). Null when not in flight; an expired lease without a result is a dead attempt the sweeper re-queues.';
comment on column app.webhook_deliveries.lease_owner is
  E'@behavior -filterBy -orderBy\nThe delivery engine (worker process) that holds the lease.';

-- Claims scan due, unleased attempts in due order; the in-flight count per endpoint and the
-- sweeper read the leased ones. The old pending index served the per-job sweeper only.
drop index if exists app.webhook_deliveries_pending_due_idx;
create index if not exists webhook_deliveries_ready_idx on app.webhook_deliveries (next_attempt_at, id)
  where status = 'pending' and lease_expires_at is null;
create index if not exists webhook_deliveries_leased_idx on app.webhook_deliveries (lease_expires_at) include (endpoint_id)
  where status = 'pending' and lease_expires_at is not null;

alter table app.notifications
  add column if not exists lease_expires_at timestamptz,
  add column if not exists lease_owner text;
comment on column app.notifications.lease_expires_at is
  E'@behavior -filterBy -orderBy\nWhile a worker sends this notification: when its claim lapses. Null otherwise; an expired lease without a result is a dead try the sweeper re-queues.';
comment on column app.notifications.lease_owner is
  E'@behavior -filterBy -orderBy\nThe graphile-worker pool (locked_by) whose job holds the lease.';
create index if not exists notifications_leased_idx on app.notifications (lease_expires_at)
  where status = 'pending' and lease_expires_at is not null;

-- graphile-worker jobs of the old per-attempt task: the delivery rows themselves are the queue
-- now, so the jobs go (a running one finishes and is not retried); pending rows stay pending.
select graphile_worker.remove_job(j.key)
  from graphile_worker.jobs j
 where j.task_identifier = 'deliver_webhook' and j.key is not null;

drop function if exists app.webhook_claim(uuid, int);

-- ---------------------------------------------------------------------------------------------
-- Scheduling an attempt. Still THE way to (re)schedule one (fan-out, retries, resume, manual
-- retry, recovery): the pending row is the queue entry; this sets when it is due and wakes the
-- delivery engines (LISTEN switchboard_webhooks) when it is due now.
create or replace function app.webhook_enqueue(delivery_id uuid, location_id uuid, due timestamptz) returns void
  language plpgsql volatile security definer
  set search_path to pg_catalog, public, pg_temp
as $$
declare
  cur timestamptz;
begin
  select w.next_attempt_at into cur from app.webhook_deliveries w
   where w.id = webhook_enqueue.delivery_id and w.location_id = webhook_enqueue.location_id
     and w.status = 'pending'
     and w.location_id = coalesce(app.current_location_id(), w.location_id);
  if not found then return; end if;
  if due is not null and cur is distinct from due then
    update app.webhook_deliveries w set next_attempt_at = due where w.id = webhook_enqueue.delivery_id;
  end if;
  if coalesce(due, cur, now()) <= now() then
    -- One notification per transaction (identical ones are merged at commit).
    perform pg_notify('switchboard_webhooks', '');
  end if;
end
$$;
alter function app.webhook_enqueue(uuid, uuid, timestamptz) owner to switchboard_system;
revoke execute on function app.webhook_enqueue(uuid, uuid, timestamptz) from public;
grant execute on function app.webhook_enqueue(uuid, uuid, timestamptz) to switchboard_api;
comment on function app.webhook_enqueue(uuid, uuid, timestamptz) is
  E'Schedules one pending attempt of the caller''s tenant at `due` (now or later) and wakes the delivery engines when it is due; no-op for any other row. SECURITY DEFINER (switchboard_system) so API transactions (resume, retry) can schedule without rights on the worker''s wake-up channel or other tenants'' rows.';

/*
 * The delivery engine's claim: up to max_claims due attempts, leased to `owner` for lease_ms.
 * Rules, in this order:
 *   - at most per_endpoint attempts of one endpoint in flight (live leases), across all workers;
 *   - only active endpoints (a paused endpoint's attempts are held);
 *   - fair: every endpoint's oldest due attempt before any endpoint's second, and within a round
 *     one endpoint per location before a location's second endpoint (then due time);
 *   - healthy endpoints first; attempts of endpoints whose last attempt failed (failure_count > 0)
 *     fill at most max_degraded of the slots, so failing receivers cannot take all of a worker.
 * Candidates come from the due-ordered index of unleased attempts in windows; endpoints at the
 * cap, and those a window already gave their share, are left out of the next window, so a deep
 * backlog on a few endpoints costs a few windows, not a scan of the backlog.
 * Claims are serialised by a transaction-scoped advisory lock (one claimer at a time across the
 * cluster, a few ms each), which is what makes the per-endpoint cap exact without locking
 * endpoint rows across the POST. Endpoints are share-locked (in id order) only for this short
 * transaction, so a DELETE or pause that commits first is seen, and one that comes later finds
 * these attempts leased (in flight). Returns { claims: [...], next_due_at } where next_due_at is
 * the earliest future due time (for the engine's timer). SECURITY DEFINER (switchboard_system):
 * the worker is not a tenant; it looks across locations.
 */
create or replace function app.webhook_claim_batch(owner text, max_claims int, max_degraded int, per_endpoint int, lease_ms int)
  returns jsonb
  language plpgsql volatile security definer
  set search_path to pg_catalog, public, pg_temp
  -- Re-planning these statements on every call cost more than running them; the generic plans
  -- (index scans in due order) are the right ones whatever the arguments.
  set plan_cache_mode to force_generic_plan
as $$
declare
  t timestamptz;
  win int := greatest(max_claims * 4, 64);
  excl uuid[];
  busy jsonb;
  c_ids uuid[] := '{}';
  c_eps uuid[] := '{}';
  c_locs uuid[] := '{}';
  c_dues timestamptz[] := '{}';
  c_degs boolean[] := '{}';
  c_rns int[] := '{}';
  after_due timestamptz := '-infinity';
  after_id uuid := '00000000-0000-0000-0000-000000000000';
  w record;
  picked uuid[];
  picked_eps uuid[];
  eps uuid[];
  claims jsonb;
  next_due timestamptz;
begin
  perform pg_advisory_xact_lock(hashtext('app.webhook_claim_batch'));
  t := clock_timestamp();
  if max_claims > 0 then
    -- Live leases per endpoint (a few dozen rows per worker): endpoints at the cap are left out.
    select coalesce(array_agg(x.endpoint_id) filter (where x.n >= per_endpoint), '{}'),
           coalesce(jsonb_object_agg(x.endpoint_id, x.n), '{}')
      into excl, busy
      from (select d.endpoint_id, count(*)::int as n
              from app.webhook_deliveries d
             where d.status = 'pending' and d.lease_expires_at > t and d.endpoint_id is not null
             group by d.endpoint_id) x;
    -- Candidates: each endpoint's first (per_endpoint - busy) due attempts, window by window; a
    -- window starts where the last one ended (everything before it was seen).
    for i in 1..8 loop
      with cand as (
        select d.id, d.endpoint_id, d.location_id, d.next_attempt_at, e.failure_count > 0 as degraded
          from app.webhook_deliveries d
          join app.webhook_endpoints e on e.id = d.endpoint_id
         where d.status = 'pending' and d.lease_expires_at is null and d.next_attempt_at <= t
           and (d.next_attempt_at, d.id) > (after_due, after_id)
           and e.active and d.endpoint_id not in (select unnest(excl))
         order by d.next_attempt_at, d.id
         limit win
      ), per_ep as (
        select c.*, coalesce((busy ->> c.endpoint_id::text)::int, 0) as busy,
               row_number() over (partition by c.endpoint_id order by c.next_attempt_at, c.id)::int as rn
          from cand c
      ), sel as (
        select p.* from per_ep p where p.rn <= per_endpoint - p.busy
      )
      select (select count(*) from cand)::int as scanned,
             (select max(c.next_attempt_at) from cand c) as last_due,
             (select c.id from cand c order by c.next_attempt_at desc, c.id desc limit 1) as last_id,
             coalesce(array_agg(s.id), '{}') as ids, coalesce(array_agg(s.endpoint_id), '{}') as eps,
             coalesce(array_agg(s.location_id), '{}') as locs, coalesce(array_agg(s.next_attempt_at), '{}') as dues,
             coalesce(array_agg(s.degraded), '{}') as degs, coalesce(array_agg(s.rn), '{}') as rns
        into w
        from sel s;
      c_ids := c_ids || w.ids;
      c_eps := c_eps || w.eps;
      c_locs := c_locs || w.locs;
      c_dues := c_dues || w.dues;
      c_degs := c_degs || w.degs;
      c_rns := c_rns || w.rns;
      excl := excl || array(select distinct unnest(w.eps));
      exit when w.scanned < win or cardinality(c_ids) >= max_claims * 2;
      after_due := w.last_due;
      after_id := w.last_id;
    end loop;

    with cand as (
      select * from unnest(c_ids, c_eps, c_locs, c_dues, c_degs, c_rns) as x(id, endpoint_id, location_id, next_attempt_at, degraded, rn)
    ), turns as (
      select c.*, row_number() over (partition by c.location_id, c.rn order by c.next_attempt_at, c.id) as turn
        from cand c
    ), ordered as (
      select u.*, row_number() over (partition by u.degraded order by u.rn, u.turn, u.next_attempt_at, u.id) as k
        from turns u
    ), chosen as (
      select o.* from ordered o
       where not o.degraded or o.k <= max_degraded
       order by o.degraded, o.rn, o.turn, o.next_attempt_at, o.id
       limit max_claims
    )
    select array_agg(c.id order by c.degraded, c.rn, c.turn, c.next_attempt_at, c.id),
           array_agg(distinct c.endpoint_id)
      into picked, picked_eps
      from chosen c;
  end if;

  if picked is not null then
    select array_agg(x.id) into eps
      from (select e.id from app.webhook_endpoints e
             where e.id = any (picked_eps) and e.active
             order by e.id
               for share) x;
    with upd as (
      update app.webhook_deliveries d
         set lease_expires_at = t + make_interval(secs => lease_ms / 1000.0),
             lease_owner = owner,
             attempted_at = t,
             url = e.url
        from app.webhook_endpoints e
       where d.id = any (picked) and e.id = d.endpoint_id and e.id = any (eps)
         and d.status = 'pending' and d.lease_expires_at is null
      returning d.id, d.event_id, d.event, d.attempt, d.endpoint_id, d.location_id, e.url, e.failure_count,
                e.secret, e.previous_secret, e.previous_secret_expires_at
    )
    select jsonb_agg(jsonb_build_object(
             'delivery_id', u.id, 'event_id', u.event_id, 'event', u.event, 'attempt', u.attempt,
             'endpoint_id', u.endpoint_id, 'location_id', u.location_id, 'url', u.url, 'body', ev.body,
             'degraded', u.failure_count > 0, 'test', ev.type = 'webhook.test',
             'secrets', to_jsonb(array_remove(array[u.secret,
                case when u.previous_secret_expires_at > t then u.previous_secret end], null)))
           order by array_position(picked, u.id))
      into claims
      from upd u join app.events ev on ev.id = u.event_id;
  end if;

  select min(d.next_attempt_at) into next_due
    from app.webhook_deliveries d
   where d.status = 'pending' and d.lease_expires_at is null and d.next_attempt_at > t;
  return jsonb_build_object('claims', coalesce(claims, '[]'::jsonb), 'next_due_at', app.iso(next_due));
end
$$;
alter function app.webhook_claim_batch(text, int, int, int, int) owner to switchboard_system;
revoke execute on function app.webhook_claim_batch(text, int, int, int, int) from public;
comment on function app.webhook_claim_batch(text, int, int, int, int) is
  E'Delivery engine: leases up to max_claims due attempts (per-endpoint cap across workers, fair across endpoints and locations, failing endpoints capped at max_degraded) and returns what to send. SECURITY DEFINER (switchboard_system): the worker is not a tenant.';

/*
 * Records the outcome of a leased attempt in its own short transaction. 2xx → delivered and the
 * endpoint's failure_count resets; otherwise failed + the next attempt scheduled after
 * retry_delays[attempt] seconds, or dead when attempt = cardinality(retry_delays) + 1 (or beyond,
 * for a manual retry). The lease ends here. A result arriving after its lease lapsed still counts
 * if the attempt is pending (nobody else recorded it). The endpoint may have been deleted while
 * the attempt was in flight (endpoint_id null): the outcome is stored, nothing follows.
 * `result` is what src/net/post.ts returns: ok, response_status, response_body, error,
 * duration_ms, attempted_at, and response_headers (retry-after, when sent) for endpoint-health
 * and Retry-After rules. SECURITY DEFINER (switchboard_system) like the claim.
 */
create or replace function app.webhook_record(delivery_id uuid, result jsonb, retry_delays int[]) returns jsonb
  language plpgsql volatile security definer
  set search_path to pg_catalog, public, pg_temp
as $$
declare
  d app.webhook_deliveries;
  ok boolean := coalesce((result ->> 'ok')::boolean, false);
  next_at timestamptz;
  nd app.webhook_deliveries;
begin
  select * into d from app.webhook_deliveries w where w.id = webhook_record.delivery_id for update;
  if not found or d.status <> 'pending' then return null; end if;
  if not ok and d.attempt <= cardinality(retry_delays) then
    next_at := now() + make_interval(secs => retry_delays[d.attempt]);
  end if;
  update app.webhook_deliveries w
     set status = case when ok then 'delivered' when next_at is null then 'dead' else 'failed' end,
         response_status = (result ->> 'response_status')::int,
         response_body = result ->> 'response_body',
         error = result ->> 'error',
         duration_ms = (result ->> 'duration_ms')::int,
         attempted_at = coalesce((result ->> 'attempted_at')::timestamptz, w.attempted_at, now()),
         next_attempt_at = next_at,
         lease_expires_at = null,
         lease_owner = null
   where w.id = d.id
  returning * into d;
  -- Endpoint bookkeeping (health rules hook in here). A success on an endpoint already at 0
  -- failures refreshes last_success_at at most once a second: a busy endpoint's row is not
  -- rewritten for every delivery.
  if ok then
    update app.webhook_endpoints e set failure_count = 0, last_success_at = now()
     where e.id = d.endpoint_id
       and (e.failure_count <> 0 or e.last_success_at is null or e.last_success_at < now() - interval '1 second');
  else
    update app.webhook_endpoints e set failure_count = e.failure_count + 1, last_failure_at = now() where e.id = d.endpoint_id;
  end if;
  if next_at is not null and d.endpoint_id is not null then
    insert into app.webhook_deliveries (location_id, event_id, endpoint_id, event, attempt, status, url, next_attempt_at)
    values (d.location_id, d.event_id, d.endpoint_id, d.event, d.attempt + 1, 'pending', d.url, next_at)
    returning * into nd;
    perform app.webhook_enqueue(nd.id, nd.location_id, nd.next_attempt_at);
  end if;
  return jsonb_build_object('delivery_id', d.id, 'status', d.status, 'next_delivery_id', nd.id);
end
$$;
alter function app.webhook_record(uuid, jsonb, int[]) owner to switchboard_system;
revoke execute on function app.webhook_record(uuid, jsonb, int[]) from public;
comment on function app.webhook_record(uuid, jsonb, int[]) is
  E'Worker: stores a leased attempt''s outcome, ends the lease, and schedules the next attempt or marks the delivery dead.';

/*
 * Several outcomes in one round trip (the engine batches them). Endpoints are touched in id order
 * so concurrent batches (and claims, which share-lock endpoints in id order) cannot deadlock.
 * SECURITY DEFINER (switchboard_system) like webhook_record.
 */
create or replace function app.webhook_record_batch(results jsonb, retry_delays int[]) returns jsonb
  language plpgsql volatile security definer
  set search_path to pg_catalog, public, pg_temp
as $$
declare
  r record;
  done jsonb := '[]';
begin
  for r in
    select (x ->> 'delivery_id')::uuid as id, x -> 'result' as result
      from jsonb_array_elements(results) x
     order by x ->> 'endpoint_id', x ->> 'delivery_id'
  loop
    done := done || jsonb_build_array(app.webhook_record(r.id, r.result, retry_delays));
  end loop;
  return done;
end
$$;
alter function app.webhook_record_batch(jsonb, int[]) owner to switchboard_system;
revoke execute on function app.webhook_record_batch(jsonb, int[]) from public;
comment on function app.webhook_record_batch(jsonb, int[]) is
  E'Worker: app.webhook_record for each { delivery_id, endpoint_id, result } of a batch, in endpoint order.';

/*
 * Gives back attempts a worker leased but did not send (shutdown abort): they are due again at
 * once for any engine. Only the lease holder's own pending attempts. SECURITY DEFINER
 * (switchboard_system) like the claim.
 */
create or replace function app.webhook_release(owner text, delivery_ids uuid[]) returns int
  language plpgsql volatile security definer
  set search_path to pg_catalog, public, pg_temp
as $$
declare
  n int;
begin
  update app.webhook_deliveries d set lease_expires_at = null, lease_owner = null
   where d.id = any (delivery_ids) and d.status = 'pending' and d.lease_owner = webhook_release.owner;
  get diagnostics n = row_count;
  if n > 0 then perform pg_notify('switchboard_webhooks', ''); end if;
  return n;
end
$$;
alter function app.webhook_release(text, uuid[]) owner to switchboard_system;
revoke execute on function app.webhook_release(text, uuid[]) from public;
comment on function app.webhook_release(text, uuid[]) is
  E'Worker: ends the leases of attempts it claimed but did not send (shutdown), so they are due again at once.';

/*
 * At-least-once when a worker dies: a pending attempt whose lease lapsed more than grace_seconds
 * ago without a result is dead; its lease is cleared so the next claim sends it again (same
 * svc-delivery-id: the dead attempt produced no result). One whose endpoint was deleted while it
 * was in flight is discarded, as DELETE would have done. Runs from the worker's crontab every
 * minute; leases are WEBHOOK_TIMEOUT_MS + 30 s, so a dead attempt is re-sent within 2 minutes.
 * SECURITY DEFINER (switchboard_system): it looks across locations.
 */
create or replace function app.webhook_sweep(grace_seconds int) returns int
  language plpgsql volatile security definer
  set search_path to pg_catalog, public, pg_temp
as $$
declare
  cutoff timestamptz := now() - make_interval(secs => grace_seconds);
  n int;
begin
  delete from app.webhook_deliveries d
   where d.id in (select w.id from app.webhook_deliveries w
                   where w.status = 'pending' and w.lease_expires_at < cutoff and w.endpoint_id is null
                     for update skip locked);
  update app.webhook_deliveries d set lease_expires_at = null, lease_owner = null
   where d.id in (select w.id from app.webhook_deliveries w
                   where w.status = 'pending' and w.lease_expires_at < cutoff
                     for update skip locked);
  get diagnostics n = row_count;
  if n > 0 then perform pg_notify('switchboard_webhooks', ''); end if;
  return n;
end
$$;
alter function app.webhook_sweep(int) owner to switchboard_system;
revoke execute on function app.webhook_sweep(int) from public;
comment on function app.webhook_sweep(int) is
  E'Worker (cron): re-queues pending attempts whose lease lapsed without a result (the worker died); discards those of deleted endpoints.';

-- DELETE no longer waits for attempts in flight (nothing holds a lock across a POST): it waits
-- only for claim/record transactions (milliseconds), discards every pending attempt nobody is
-- sending, and leaves the in-flight ones to finish and be recorded (endpoint_id becomes null).
create or replace function api.webhook_endpoint_delete(token_hash text, location_ref text, endpoint_id uuid) returns jsonb
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'webhooks:write');
  e app.webhook_endpoints;
begin
  -- FOR UPDATE stops new claims (they share-lock the endpoint) and fan-out (KEY SHARE SKIP LOCKED).
  perform 1 from app.webhook_endpoints w where w.id = endpoint_id for update;
  if not found then return null; end if;
  delete from app.webhook_deliveries d
   where d.endpoint_id = webhook_endpoint_delete.endpoint_id and d.status = 'pending'
     and (d.lease_expires_at is null or d.lease_expires_at <= now());
  delete from app.webhook_endpoints w where w.id = endpoint_id returning * into e;
  return app.webhook_endpoint_json(e);
end
$$;
comment on function api.webhook_endpoint_delete(text, text, uuid) is
  E'DELETE webhook-endpoints/{id}: discards pending attempts at once; an attempt already in flight may finish and is recorded (history keeps it with endpoint_id null); none starts afterwards.';

-- ---------------------------------------------------------------------------------------------
-- Notifications: their own graphile-worker runner (the lane), emergencies first (job priority),
-- a lease per try, and the same sweeper rule.

/*
 * Queues (or re-queues) the send job of one notification. SECURITY DEFINER, owned by the migrating
 * role like app.enqueue, because switchboard_system (owner of the fan-out trigger and the sweeper)
 * has no rights on graphile_worker; it adds only this one task, keyed by the notification.
 */
create or replace function app.notification_enqueue(notification_id uuid, location_id uuid, priority int, run_at timestamptz default null)
  returns void
  language plpgsql volatile security definer
  set search_path to pg_catalog, public, pg_temp
as $$
begin
  perform graphile_worker.add_job(
    identifier := 'send_notification',
    payload := json_build_object('notification_id', notification_id, 'location_id', location_id),
    run_at := run_at, max_attempts := 4, job_key := 'notification:' || notification_id,
    priority := priority);
end
$$;
revoke execute on function app.notification_enqueue(uuid, uuid, int, timestamptz) from public;
grant execute on function app.notification_enqueue(uuid, uuid, int, timestamptz) to switchboard_system;
comment on function app.notification_enqueue(uuid, uuid, int, timestamptz) is
  E'Queues send_notification for one notification (job_key notification:<id>, 4 attempts, graphile-worker priority: lower runs first). SECURITY DEFINER because switchboard_system has no rights on graphile_worker.';

create or replace function app.notification_priority(event text) returns int
  language sql immutable parallel safe
as $$ select case when event = 'call.emergency' then -10 else 0 end $$;
comment on function app.notification_priority(text) is
  E'graphile-worker priority of a notification''s send job: emergencies (-10) before everything else (0).';

/*
 * SECURITY DEFINER, owned by the migrating role like app.enqueue: switchboard_system has no rights
 * on graphile_worker. Unlocks every job held by the given worker pools (graphile-worker's own
 * crash recovery); the sweeper calls it only for pools whose notification lease lapsed.
 */
create or replace function app.worker_unlock(worker_ids text[]) returns void
  language plpgsql volatile security definer
  set search_path to pg_catalog, public, pg_temp
as $$
begin
  perform graphile_worker.force_unlock_workers(worker_ids);
end
$$;
revoke execute on function app.worker_unlock(text[]) from public;
grant execute on function app.worker_unlock(text[]) to switchboard_system;
comment on function app.worker_unlock(text[]) is
  E'graphile_worker.force_unlock_workers for pools presumed dead. SECURITY DEFINER because switchboard_system has no rights on graphile_worker.';

/*
 * Fan-out: each event becomes one notification per routed channel × recipient, each with its own
 * send job. A routed channel with nobody to reach is recorded as skipped with the reason, so the
 * log explains silence. SECURITY DEFINER (owned by switchboard_system) because events are written
 * by API transactions, ingestion and staff alike, and the recipients (members, integrations,
 * owner_cell) must be read whatever the writer's role; it only reads rows of NEW.location_id.
 * Emergency notifications are queued at a higher priority than everything else.
 */
create or replace function app.tg_events__notify() returns trigger
  language plpgsql volatile security definer
  set search_path to pg_catalog, public, pg_temp
as $$
declare
  routes jsonb;
  channel text;
  rcpt record;
  n app.notifications;
  reached int;
begin
  if new.type = 'webhook.test' then return null; end if;
  select s.routes into routes from app.notification_settings s where s.location_id = new.location_id;
  routes := coalesce(routes, app.notification_routes_default());
  for channel in select distinct c from jsonb_array_elements_text(coalesce(routes -> new.type, '[]')) c loop
    reached := 0;
    for rcpt in
      (select 'twilio'::text as provider, r.recipient, null::uuid as integration_id
        from (select l.owner_cell::text as recipient, 0 as ord from app.locations l where l.id = new.location_id
              union all
              select x, o from app.notification_settings s, unnest(s.sms_recipients) with ordinality u(x, o)
               where s.location_id = new.location_id) r
       where channel = 'sms' and r.recipient is not null
       group by r.recipient order by min(r.ord))
      union all
      (select 'smtp', min(e.email), null::uuid
        from (select m.email, 0 as ord from app.members m
               where m.location_id = new.location_id and m.role in ('owner', 'admin')
              union all
              select x, o from app.notification_settings s, unnest(s.email_recipients) with ordinality u(x, o)
               where s.location_id = new.location_id) e
       where channel = 'email'
       group by lower(e.email) order by min(e.ord), lower(e.email))
      union all
      (select i.provider, coalesce(i.label, i.provider), i.id
        from app.integrations i
       where i.location_id = new.location_id and i.status = 'connected' and i.webhook_url is not null
         and ((channel = 'chat' and i.provider = 'slack')
           or (channel = 'automation' and i.provider in ('zapier', 'make', 'n8n', 'calcom')))
       order by i.created_at, i.id)
    loop
      insert into app.notifications (location_id, event_id, event, channel, provider, recipient, integration_id)
      values (new.location_id, new.id, new.type, channel, rcpt.provider, rcpt.recipient, rcpt.integration_id)
      returning * into n;
      perform app.notification_enqueue(n.id, n.location_id, app.notification_priority(new.type));
      reached := reached + 1;
    end loop;
    if reached = 0 then
      insert into app.notifications (location_id, event_id, event, channel, provider, status)
      values (new.location_id, new.id, new.type, channel,
              case channel when 'sms' then 'twilio' when 'email' then 'smtp' when 'chat' then 'slack' else 'automation' end,
              'skipped')
      returning * into n;
      insert into app.notification_log (location_id, notification_id, status, detail)
      values (new.location_id, n.id, 'skipped', case channel
        when 'sms' then 'no SMS recipient: owner_cell is unset and sms_recipients is empty'
        when 'email' then 'no e-mail recipient: no owner or admin member and email_recipients is empty'
        when 'chat' then 'no slack integration connected'
        else 'no automation integration connected (zapier, make, n8n, calcom)' end);
    end if;
  end loop;
  return null;
end
$$;
alter function app.tg_events__notify() owner to switchboard_system;
comment on function app.tg_events__notify() is
  E'Creates the notifications an event routes to (one per channel × recipient) and queues send_notification for each (emergencies first); unreachable channels are logged skipped.';

/*
 * Claims one notification for a try: leases it to `owner` (the graphile-worker pool running the
 * job) for lease_ms and returns what to send (app.notification_for_send), or null when it must
 * not be sent now: gone, of another location than the job says, settled, or held by another live
 * try. SECURITY DEFINER (switchboard_system) like notification_for_send.
 */
create or replace function app.notification_claim(notification_id uuid, location_id uuid, owner text, lease_ms int) returns jsonb
  language plpgsql volatile security definer
  set search_path to pg_catalog, public, pg_temp
as $$
declare
  t timestamptz := clock_timestamp();
  nid uuid;
begin
  update app.notifications n
     set lease_expires_at = t + make_interval(secs => lease_ms / 1000.0), lease_owner = owner
   where n.id = notification_claim.notification_id and n.location_id = notification_claim.location_id
     and n.status = 'pending'
     and (n.lease_expires_at is null or n.lease_expires_at <= t)
  returning n.id into nid;
  if nid is null then return null; end if;
  return app.notification_for_send(nid);
end
$$;
alter function app.notification_claim(uuid, uuid, text, int) owner to switchboard_system;
revoke execute on function app.notification_claim(uuid, uuid, text, int) from public;
comment on function app.notification_claim(uuid, uuid, text, int) is
  E'Worker: leases a pending notification of the given location for one try and returns what to send; null when gone, foreign, settled or held by a live try.';

create or replace function app.notification_record(notification_id uuid, status text, detail text, response_status int, final boolean)
  returns jsonb
  language plpgsql volatile security definer
  set search_path to pg_catalog, public, pg_temp
as $$
declare
  n app.notifications;
begin
  if status not in ('sent', 'failed', 'skipped') then
    perform app.raise('SB400', format('Unknown notification outcome %s', status));
  end if;
  update app.notifications t
     set attempts = t.attempts + case when notification_record.status = 'skipped' then 0 else 1 end,
         status = case when notification_record.status = 'failed' and not final then 'pending'
                       else notification_record.status end,
         lease_expires_at = null,
         lease_owner = null
   where t.id = notification_record.notification_id and t.status = 'pending'
  returning * into n;
  if n.id is null then return null; end if;
  insert into app.notification_log (location_id, notification_id, status, detail, response_status)
  values (n.location_id, n.id, notification_record.status, left(detail, 2000), response_status);
  return jsonb_build_object('id', n.id, 'status', n.status, 'attempts', n.attempts);
end
$$;
alter function app.notification_record(uuid, text, text, int, boolean) owner to switchboard_system;
revoke execute on function app.notification_record(uuid, text, text, int, boolean) from public;
comment on function app.notification_record(uuid, text, text, int, boolean) is
  E'Appends one try to notification_log, ends its lease and moves the notification: sent | skipped | failed (final) or back to pending (a retry follows). Only a pending notification moves, so a replayed job records nothing twice.';

/*
 * A try given up unsent (shutdown abort): the lease ends and the send job is queued again at
 * once (a fresh job; the running one completes), so the interruption costs no attempt.
 * SECURITY DEFINER (switchboard_system) like the claim.
 */
create or replace function app.notification_release(notification_id uuid, owner text) returns boolean
  language plpgsql volatile security definer
  set search_path to pg_catalog, public, pg_temp
as $$
declare
  n app.notifications;
begin
  update app.notifications t set lease_expires_at = null, lease_owner = null
   where t.id = notification_release.notification_id and t.status = 'pending'
     and t.lease_owner = notification_release.owner
  returning * into n;
  if n.id is null then return false; end if;
  perform app.notification_enqueue(n.id, n.location_id, app.notification_priority(n.event));
  return true;
end
$$;
alter function app.notification_release(uuid, text) owner to switchboard_system;
revoke execute on function app.notification_release(uuid, text) from public;
comment on function app.notification_release(uuid, text) is
  E'Worker: ends the lease of a try abandoned unsent (shutdown) and queues the send again at once.';

/*
 * At-least-once for notifications: a pending notification whose lease lapsed more than
 * grace_seconds ago without a result was being sent by a worker that died. That worker pool's
 * jobs are unlocked (graphile-worker's force_unlock_workers, instead of its 4-hour lock expiry)
 * and the send is queued again at once. Runs with webhook_sweep from the crontab. SECURITY
 * DEFINER (switchboard_system): it looks across locations.
 */
create or replace function app.notification_sweep(grace_seconds int) returns int
  language plpgsql volatile security definer
  set search_path to pg_catalog, public, pg_temp
as $$
declare
  cutoff timestamptz := now() - make_interval(secs => grace_seconds);
  ids uuid[];
  owners text[];
  r record;
begin
  select array_agg(x.id), array_agg(distinct x.lease_owner)
    into ids, owners
    from (select n.id, n.lease_owner from app.notifications n
           where n.status = 'pending' and n.lease_expires_at < cutoff
             for update skip locked) x;
  if ids is null then return 0; end if;
  perform app.worker_unlock(owners);
  for r in
    update app.notifications n set lease_expires_at = null, lease_owner = null
     where n.id = any (ids)
    returning n.id, n.location_id, n.event
  loop
    perform app.notification_enqueue(r.id, r.location_id, app.notification_priority(r.event));
  end loop;
  return cardinality(ids);
end
$$;
alter function app.notification_sweep(int) owner to switchboard_system;
revoke execute on function app.notification_sweep(int) from public;
comment on function app.notification_sweep(int) is
  E'Worker (cron): re-queues notifications whose lease lapsed without a result (the worker died) and unlocks that worker''s jobs.';

-- =============================================================================================
-- Webhook consumers (issue 11, items 3–7): Standard Webhooks secrets, test sends of a catalog
-- example, recovery, deliveries log filters, retention. See docs/webhooks.md.
-- Re-appliable: create or replace / drop … if exists / if not exists.
-- =============================================================================================

-- ---------------------------------------------------------------------------------------------
-- Secrets the Standard Webhooks libraries accept. Their decoders (standardwebhooks / svix in Node,
-- Python, Go…) read the part after whsec_ as standard base64, several of them strictly (no - or _,
-- padding required). New secrets: whsec_ + standard base64 of 32 random bytes, padded (44
-- characters, one '='). Older secrets (base64url, 43 characters) stay valid: svc-signature keys
-- with the whole string as before, and webhook-signature with the same 32 bytes they encode.
create or replace function app.webhook_new_secret() returns text
  language sql volatile
as $$ select 'whsec_' || encode(public.gen_random_bytes(32), 'base64') $$;
comment on function app.webhook_new_secret() is
  E'whsec_ + 32 random bytes in standard, padded base64 (what Standard Webhooks libraries decode).';

alter table app.webhook_endpoints drop constraint if exists webhook_endpoints_secret_check;
alter table app.webhook_endpoints add constraint webhook_endpoints_secret_check
  check (secret ~ '^whsec_([A-Za-z0-9+/]{43}=|[A-Za-z0-9_-]{43})$');
comment on column app.webhook_endpoints.secret is
  E'@behavior -select -filterBy -orderBy\nHMAC key, shown once: whsec_ + 32 random bytes in padded base64 (older secrets: base64url, unpadded).';

-- ---------------------------------------------------------------------------------------------
-- Test sends of a catalog example. A webhook.test event whose data carries `sample_event` and
-- `sample` gets the body of that event type (the example's data) instead of the plain test body;
-- it still goes only to the tested endpoint and never notifies anyone (webhook.test).
create or replace function app.tg_events__body() returns trigger
  language plpgsql
as $$
begin
  if new.type = 'webhook.test' and new.data ? 'sample_event' then
    new.body := jsonb_build_object(
      'event', new.data ->> 'sample_event',
      'location_id', new.location_id,
      'created_at', app.iso(new.created_at),
      'data', new.data -> 'sample')::text;
    return new;
  end if;
  new.body := jsonb_build_object(
    'event', new.type,
    'location_id', new.location_id,
    'created_at', app.iso(new.created_at),
    'data', new.data)::text;
  return new;
end
$$;
comment on function app.tg_events__body() is
  E'Freezes the delivery body text of an event at insert (a webhook.test carrying a sample gets the sample''s body).';


drop function if exists api.webhook_endpoint_test(text, text, uuid);
create or replace function api.webhook_endpoint_test(token_hash text, location_ref text, endpoint_id uuid, sample jsonb)
  returns jsonb
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'webhooks:write');
  ev_id uuid;
  sample_event text := sample ->> 'event';
  d app.webhook_deliveries;
begin
  if not exists (select 1 from app.webhook_endpoints w where w.id = endpoint_id) then return null; end if;
  if sample is null then
    ev_id := app.emit(a.location_id, 'webhook.test', jsonb_build_object(
      'endpoint_id', endpoint_id, 'message', 'This is a test event sent from the API.'));
    return (select app.webhook_delivery_json(w) from app.webhook_deliveries w where w.event_id = ev_id);
  end if;
  if sample_event is null or not sample_event = any (app.event_types()) or jsonb_typeof(sample -> 'data') <> 'object' then
    perform app.raise('SB400', 'Unknown event type', jsonb_build_object(
      'issues', jsonb_build_array(jsonb_build_object('path', 'event_type', 'message', 'Unknown event type'))));
  end if;
  -- The example's location becomes the caller's, so the body reads as one of theirs.
  ev_id := app.emit(a.location_id, 'webhook.test', jsonb_build_object(
    'endpoint_id', endpoint_id, 'sample_event', sample_event,
    'sample', case when (sample -> 'data') ? 'location_id'
                   then (sample -> 'data') || jsonb_build_object('location_id', a.location_id)
                   else sample -> 'data' end));
  -- The attempt is labelled with the sample's type (svc-event); the job runs after commit.
  update app.webhook_deliveries w set event = sample_event where w.event_id = ev_id returning * into d;
  return app.webhook_delivery_json(d);
end
$$;
comment on function api.webhook_endpoint_test(text, text, uuid, jsonb) is
  E'POST webhook-endpoints/{id}/test: a signed test send to this endpoint only (svc-test: true); sample null → webhook.test, else { event, data } of a catalog example sent as that event type. Returns the queued attempt.';

-- ---------------------------------------------------------------------------------------------
-- Recovery: re-send what an endpoint missed.
/*
 * Every event of the location created at or after `since`, of a type the endpoint subscribes to,
 * with neither a delivered nor a pending attempt to this endpoint, gets a new first attempt
 * (attempt 1: the full retry schedule applies). Events from while the endpoint was paused or
 * disabled are included (the fan-out made no attempt for them). Oldest first, at most
 * `max_events` per call, set-based; `has_more` tells the caller to call again (already queued
 * events are pending and so skipped). The endpoint row is locked FOR NO KEY UPDATE so two
 * recoveries of one endpoint cannot queue an event twice; attempts and the fan-out (KEY SHARE)
 * are not blocked.
 */
create or replace function api.webhook_endpoint_recover(token_hash text, location_ref text, endpoint_id uuid,
                                                        since timestamptz, retention_days int, max_events int)
  returns jsonb
  language plpgsql volatile
  -- The per-event NOT EXISTS must probe the event_id index: planned from stale statistics (a
  -- table analysed while nearly empty) a sequential scan per event is quadratic in the backlog.
  set enable_seqscan to off
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'webhooks:write');
  e app.webhook_endpoints;
  ids uuid[];
  found_n int;
begin
  select * into e from app.webhook_endpoints w where w.id = endpoint_id for no key update;
  if not found then return null; end if;
  if since > now() then
    perform app.raise('SB400', 'since must not be in the future', jsonb_build_object(
      'issues', jsonb_build_array(jsonb_build_object('path', 'since', 'message', 'Must not be in the future'))));
  end if;
  if since < now() - make_interval(days => retention_days) then
    perform app.raise('SB400', format('since must be within the retention window of %s days', retention_days),
      jsonb_build_object('issues', jsonb_build_array(jsonb_build_object('path', 'since',
        'message', format('Must be within the last %s days (DELIVERY_RETENTION_DAYS)', retention_days)))));
  end if;
  if not e.active then
    perform app.raise('SB409', 'The endpoint is inactive; set active=true before recovering', '{}');
  end if;
  with missed as (
    select ev.id, ev.type, ev.created_at from app.events ev
     where ev.location_id = e.location_id and ev.created_at >= since and ev.type = any (e.events)
       and not exists (
         select 1 from app.webhook_deliveries d
          where d.event_id = ev.id and d.endpoint_id = e.id and d.status in ('delivered', 'pending'))
     order by ev.created_at, ev.id
     limit max_events + 1),
  ins as (
    insert into app.webhook_deliveries (location_id, event_id, endpoint_id, event, attempt, status, url, next_attempt_at)
    select e.location_id, m.id, e.id, m.type, 1, 'pending', e.url, now()
      from (select * from missed order by created_at, id limit max_events) m
    returning id)
  select array(select id from ins), (select count(*) from missed) into ids, found_n;
  -- Scheduled once the rows exist (a statement's own inserts are invisible to its functions).
  perform app.webhook_enqueue(d.id, d.location_id, d.next_attempt_at)
     from app.webhook_deliveries d where d.id = any (ids);
  return jsonb_build_object('queued', cardinality(ids), 'has_more', found_n > max_events);
end
$$;
comment on function api.webhook_endpoint_recover(text, text, uuid, timestamptz, int, int) is
  E'POST webhook-endpoints/{id}/recover: a new first attempt for each subscribed event since `since` without a delivered or pending attempt to the endpoint (oldest first, at most max_events per call). 400 outside [now - retention, now], 409 when inactive.';

-- ---------------------------------------------------------------------------------------------
-- Deliveries log: filter by event type too. Indexes for the status and event filters, which would
-- otherwise walk the location's whole history for a rare value (dead, call.emergency).
create index if not exists webhook_deliveries_location_status_created_idx
  on app.webhook_deliveries (location_id, status, created_at desc, id desc);
create index if not exists webhook_deliveries_location_event_created_idx
  on app.webhook_deliveries (location_id, event, created_at desc, id desc);

create or replace function api.webhook_deliveries_list(token_hash text, location_ref text, filters jsonb, page jsonb) returns jsonb
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'webhooks:read');
  lim int := app.page_limit(page);
  after app.page_cursor := app.page_after(page);
  f_endpoint uuid := (filters ->> 'endpoint_id')::uuid;
  f_event_id uuid := (filters ->> 'event_id')::uuid;
  f_type text := filters ->> 'event';
  f_status text := filters ->> 'status';
begin
  return app.page_result(array(
    select app.page_item(d.created_at, d.id, app.webhook_delivery_json(d)) from app.webhook_deliveries d
     where app.before_cursor(d.created_at, d.id, after)
       and (f_endpoint is null or d.endpoint_id = f_endpoint)
       and (f_event_id is null or d.event_id = f_event_id)
       and (f_type is null or d.event = f_type)
       and (f_status is null or d.status = f_status)
     order by d.created_at desc, d.id desc limit lim + 1), lim);
end
$$;
comment on function api.webhook_deliveries_list(text, text, jsonb, jsonb) is
  E'GET webhook-deliveries: attempts newest first; filters endpoint_id, event_id, event (type), status.';

grant execute on function
  api.webhook_endpoint_test(text, text, uuid, jsonb),
  api.webhook_endpoint_recover(text, text, uuid, timestamptz, int, int)
  to switchboard_api;

-- ---------------------------------------------------------------------------------------------
-- Retention (DELIVERY_RETENTION_DAYS): the prune_deliveries task calls this in a loop, one
-- short statement per batch, until a call deletes fewer than batch_size rows.
/*
 * Deletes at most batch_size rows of one kind older than now() - retention_days, oldest first
 * within each location, and returns how many:
 *   deliveries    — settled attempts (delivered, failed, dead); pending ones are kept;
 *   notifications — settled notifications (sent, failed, skipped) with their log rows (cascade);
 *   events        — events none of whose deliveries or notifications remain: every one was
 *                   settled and pruned (an event with a pending or a newer attempt stays).
 * Rows are found per location through the (location_id, created_at desc, id desc) indexes every
 * tenant table already has (no extra index on the hot write path), and locked SKIP LOCKED so a
 * concurrent run or a live writer is never waited on. SECURITY DEFINER (switchboard_system)
 * because retention runs across locations from the worker.
 */
create or replace function app.retention_prune(kind text, retention_days int, batch_size int) returns int
  language plpgsql volatile security definer
  set search_path to pg_catalog, public, pg_temp
as $$
declare
  cutoff timestamptz := now() - make_interval(days => retention_days);
  n int;
begin
  if retention_days < 1 or batch_size < 1 then
    perform app.raise('SB400', 'retention_days and batch_size must be positive');
  end if;
  if kind = 'deliveries' then
    delete from app.webhook_deliveries w using (
      select x.id from app.locations l cross join lateral (
        select d.id from app.webhook_deliveries d
         where d.location_id = l.id and d.created_at < cutoff and d.status <> 'pending'
         order by d.created_at, d.id limit batch_size
           for update of d skip locked) x
       limit batch_size) s
     where w.id = s.id;
  elsif kind = 'notifications' then
    delete from app.notifications t using (
      select x.id from app.locations l cross join lateral (
        select n.id from app.notifications n
         where n.location_id = l.id and n.created_at < cutoff and n.status <> 'pending'
         order by n.created_at, n.id limit batch_size
           for update of n skip locked) x
       limit batch_size) s
     where t.id = s.id;
  elsif kind = 'events' then
    delete from app.events t using (
      select x.id from app.locations l cross join lateral (
        select e.id from app.events e
         where e.location_id = l.id and e.created_at < cutoff
           and not exists (select 1 from app.webhook_deliveries d where d.event_id = e.id)
           and not exists (select 1 from app.notifications n where n.event_id = e.id)
         order by e.created_at, e.id limit batch_size
           for update of e skip locked) x
       limit batch_size) s
     where t.id = s.id;
  else
    perform app.raise('SB400', format('Unknown retention kind %s', kind));
  end if;
  get diagnostics n = row_count;
  return n;
end
$$;
alter function app.retention_prune(text, int, int) owner to switchboard_system;
revoke execute on function app.retention_prune(text, int, int) from public;
comment on function app.retention_prune(text, int, int) is
  E'Worker (prune_deliveries): deletes one batch of settled deliveries | notifications (with their log) | events older than the retention window; returns the count.';

-- =============================================================================================
-- Endpoint health (issue 11, items 1–2): auto-disable of dead endpoints, 410 Gone, warning and
-- disable notices to the location's people, Retry-After on 429/503. See docs/webhooks.md
-- ("Endpoint health") and docs/notifications.md ("Operational notifications").
-- Re-appliable: create or replace / drop … if exists / if not exists.
-- =============================================================================================

-- ---------------------------------------------------------------------------------------------
-- The endpoint record: when the current failure run began, and why/when it was disabled.
alter table app.webhook_endpoints
  add column if not exists failing_since timestamptz,
  add column if not exists disabled_at timestamptz,
  add column if not exists disabled_reason text;
comment on column app.webhook_endpoints.failing_since is
  E'When the first failure of the current run of consecutive failures was recorded; null while failure_count = 0.';
comment on column app.webhook_endpoints.disabled_at is
  E'When the endpoint was disabled automatically (consecutive failures over time, or a 410 Gone answer); null while enabled. Disabled = active false + this; PATCH active=true clears it.';
comment on column app.webhook_endpoints.disabled_reason is
  E'Why it was disabled (names the 410 or the failure run); null while enabled.';
alter table app.webhook_endpoints drop constraint if exists webhook_endpoints_disabled_check;
alter table app.webhook_endpoints add constraint webhook_endpoints_disabled_check
  check ((disabled_at is null) = (disabled_reason is null) and (disabled_at is null or not active)
         and length(disabled_reason) <= 500);
-- Runs already under way when this was added: their start is not known; the last failure is a
-- lower bound that errs towards disabling later, never earlier.
update app.webhook_endpoints set failing_since = coalesce(last_failure_at, now())
 where failure_count > 0 and failing_since is null;

/*
 * Re-enabling (active false → true, whoever writes it: PATCH, staff GraphQL) starts the endpoint
 * afresh: the disable mark goes, failure_count and the failure run restart. A trigger so every
 * writer obeys the rule; the WHEN clause keeps it off the delivery engine's hot updates.
 */
create or replace function app.tg_webhook_endpoints__reenable() returns trigger
  language plpgsql
as $$
begin
  new.disabled_at := null;
  new.disabled_reason := null;
  new.failure_count := 0;
  new.failing_since := null;
  return new;
end
$$;
comment on function app.tg_webhook_endpoints__reenable() is
  E'active false → true: clears disabled_at/disabled_reason and restarts the failure run (failure_count 0, failing_since null).';
drop trigger if exists _200_reenable on app.webhook_endpoints;
create trigger _200_reenable before update on app.webhook_endpoints
  for each row when (new.active and not old.active)
  execute function app.tg_webhook_endpoints__reenable();

-- Latest definition: 000009. Adds failing_since, disabled_at, disabled_reason.
create or replace function app.webhook_endpoint_json(e app.webhook_endpoints) returns jsonb
  language sql stable
as $$
  select jsonb_build_object(
    'id', e.id, 'location_id', e.location_id, 'label', e.label, 'url', e.url,
    'events', to_jsonb(e.events), 'active', e.active, 'failure_count', e.failure_count,
    'failing_since', app.iso(e.failing_since),
    'last_success_at', app.iso(e.last_success_at), 'last_failure_at', app.iso(e.last_failure_at),
    'disabled_at', app.iso(e.disabled_at), 'disabled_reason', e.disabled_reason,
    'created_at', app.iso(e.created_at), 'updated_at', app.iso(e.updated_at))
$$;
comment on function app.webhook_endpoint_json(app.webhook_endpoints) is
  E'Webhook endpoint as the API shows it (health included: failure_count, failing_since, disabled_at, disabled_reason); never the secret.';

/*
 * Latest definition: 000009. Two changes. Re-enabling is the trigger's work (_200_reenable,
 * above). And resuming wakes the delivery engines once instead of calling app.webhook_enqueue for
 * every held attempt: the attempts keep their due times (overdue ones are due at once), so only a
 * wake-up was ever needed, and the per-attempt calls grew faster than the backlog (measured, API
 * role, statistics as a burst leaves them: 1,000 held attempts 49 ms, 10,000 1.6 s), when a
 * disabled endpoint is exactly the one with a backlog.
 */
create or replace function api.webhook_endpoint_patch(token_hash text, location_ref text, endpoint_id uuid, patch jsonb) returns jsonb
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'webhooks:write');
  old app.webhook_endpoints;
  e app.webhook_endpoints;
  first_due app.webhook_deliveries;
begin
  select * into old from app.webhook_endpoints w where w.id = endpoint_id for no key update;
  if not found then return null; end if;
  update app.webhook_endpoints w
     set label = case when patch ? 'label' then patch ->> 'label' else w.label end,
         url = coalesce(patch ->> 'url', w.url),
         events = case when patch ? 'events'
                       then array(select distinct jsonb_array_elements_text(patch -> 'events')) else w.events end,
         active = coalesce((patch ->> 'active')::boolean, w.active)
   where w.id = endpoint_id
  returning * into e;
  -- Resume (or re-enable: _200_reenable has cleared the disable mark and the failure run): the
  -- held attempts are claimable again; one wake-up for the earliest is all the engines need
  -- (overdue ones go at once, later ones when due).
  if e.active and not old.active then
    select * into first_due from app.webhook_deliveries d
     where d.endpoint_id = e.id and d.status = 'pending'
     order by d.next_attempt_at limit 1;
    if first_due.id is not null then
      perform app.webhook_enqueue(first_due.id, first_due.location_id, null);
    end if;
  end if;
  return app.webhook_endpoint_json(e);
end
$$;
comment on function api.webhook_endpoint_patch(text, text, uuid, jsonb) is
  E'PATCH webhook-endpoints/{id}: label, url, events, active. active=false holds pending attempts; false → true re-queues them and clears a disable (disabled_at, disabled_reason, failure_count, failing_since).';

-- ---------------------------------------------------------------------------------------------
-- Operational notifications: webhook_endpoint.failing / webhook_endpoint.disabled are told to the
-- location's people through the same routing, recipients and send lane as event notifications,
-- but they are not events (never webhooks, not in the catalog): the notification row has no
-- event_id and carries its own data.
alter table app.notifications add column if not exists data jsonb;
comment on column app.notifications.data is
  E'@behavior -filterBy -orderBy\nWhat an operational notification (no event_id: webhook_endpoint.failing, webhook_endpoint.disabled) is about; null when the notification comes from an event (the event''s data is used).';
alter table app.notifications drop constraint if exists notifications_source_check;
alter table app.notifications add constraint notifications_source_check
  check (event_id is not null or jsonb_typeof(data) = 'object');

create or replace function app.operational_notification_types() returns text[]
  language sql immutable parallel safe
as $$ select array['webhook_endpoint.failing', 'webhook_endpoint.disabled'] $$;
comment on function app.operational_notification_types() is
  E'Notification types that are not events (never sent as webhooks): a failing webhook endpoint, a disabled one.';

create or replace function app.notification_types() returns text[]
  language sql immutable parallel safe
as $$ select app.event_types() || app.operational_notification_types() $$;
comment on function app.notification_types() is
  E'Every type notification-settings routes: the event types, then the operational ones.';

-- Latest definition: 000010. The operational types are routable too.
create or replace function app.notification_routes_valid(routes jsonb) returns boolean
  language sql immutable parallel safe
as $$
  select jsonb_typeof(routes) = 'object'
     and not exists (
       select 1 from jsonb_each(routes) r(event, channels)
        where not r.event = any (app.notification_types())
           or jsonb_typeof(r.channels) <> 'array'
           or exists (select 1 from jsonb_array_elements(r.channels) c
                       where jsonb_typeof(c) <> 'string' or not (c #>> '{}') = any (app.notification_channels()))
           or jsonb_array_length(r.channels) <> (select count(distinct c) from jsonb_array_elements(r.channels) c))
$$;
comment on function app.notification_routes_valid(jsonb) is
  E'True when routes is { known notification type: [distinct known channels] }. The API validates first; this keeps staff and SQL writers honest too.';

-- Latest definition: 000010. Endpoint health → e-mail (owners/admins) + chat.
create or replace function app.notification_routes_default() returns jsonb
  language sql immutable parallel safe
as $$
  select '{
    "call.emergency": ["sms", "email", "chat"],
    "lead.created": ["email", "chat"],
    "lead.updated": [],
    "booking.created": ["email", "chat"],
    "booking.updated": ["email", "chat"],
    "call.ended": [],
    "spam.blocked": [],
    "webhook_endpoint.failing": ["email", "chat"],
    "webhook_endpoint.disabled": ["email", "chat"]
  }'::jsonb
$$;
comment on function app.notification_routes_default() is
  E'Defaults: emergencies → sms + email + chat; leads and bookings → email + chat; webhook endpoint failing/disabled → email + chat; spam and the rest → none.';

-- Locations made before these types existed get their defaults (a type absent from routes sends
-- nothing, so without this they would never hear of a disabled endpoint).
update app.notification_settings s
   set routes = (select jsonb_object_agg(t, app.notification_routes_default() -> t)
                   from unnest(app.operational_notification_types()) t) || s.routes
 where not (s.routes ?& app.operational_notification_types());

-- Latest definition: 000010. Lists every routable type.
create or replace function app.notification_settings_json(s app.notification_settings) returns jsonb
  language sql stable parallel safe
as $$
  select jsonb_build_object(
    'location_id', s.location_id,
    'routes', (select jsonb_object_agg(t, coalesce(s.routes -> t, '[]'::jsonb) order by o)
                 from unnest(app.notification_types()) with ordinality u(t, o)),
    'sms_recipients', to_jsonb(s.sms_recipients),
    'email_recipients', to_jsonb(s.email_recipients),
    'updated_at', app.iso(s.updated_at))
$$;
comment on function app.notification_settings_json(app.notification_settings) is
  E'Notification settings as the API shows them: routes list every notification type (an empty list = no notification).';

/*
 * One notification per routed channel × recipient for one occurrence of `type` at a location,
 * each with its send job; a routed channel with nobody to reach is recorded skipped with the
 * reason, so the log explains silence. The body of the event trigger until now (latest:
 * app.tg_events__notify in this file), shared with the operational notifications, which have no
 * event (event_id null, `data` stored on the notification). SECURITY DEFINER (switchboard_system)
 * because events and endpoint health are written from several roles (API, ingestion, worker,
 * staff) and the recipients (members, integrations, owner_cell) must be read whatever the
 * writer's role; it only reads rows of `location_id`. Returns how many notifications it made.
 */
create or replace function app.notification_fanout(location_id uuid, event_id uuid, type text, data jsonb) returns int
  language plpgsql volatile security definer
  set search_path to pg_catalog, public, pg_temp
as $$
declare
  loc uuid := notification_fanout.location_id;
  routes jsonb;
  channel text;
  rcpt record;
  n app.notifications;
  reached int;
  made int := 0;
begin
  select s.routes into routes from app.notification_settings s where s.location_id = loc;
  routes := coalesce(routes, app.notification_routes_default());
  for channel in select distinct c from jsonb_array_elements_text(coalesce(routes -> type, '[]')) c loop
    reached := 0;
    for rcpt in
      (select 'twilio'::text as provider, r.recipient, null::uuid as integration_id
        from (select l.owner_cell::text as recipient, 0 as ord from app.locations l where l.id = loc
              union all
              select x, o from app.notification_settings s, unnest(s.sms_recipients) with ordinality u(x, o)
               where s.location_id = loc) r
       where channel = 'sms' and r.recipient is not null
       group by r.recipient order by min(r.ord))
      union all
      (select 'smtp', min(e.email), null::uuid
        from (select m.email, 0 as ord from app.members m
               where m.location_id = loc and m.role in ('owner', 'admin')
              union all
              select x, o from app.notification_settings s, unnest(s.email_recipients) with ordinality u(x, o)
               where s.location_id = loc) e
       where channel = 'email'
       group by lower(e.email) order by min(e.ord), lower(e.email))
      union all
      (select i.provider, coalesce(i.label, i.provider), i.id
        from app.integrations i
       where i.location_id = loc and i.status = 'connected' and i.webhook_url is not null
         and ((channel = 'chat' and i.provider = 'slack')
           or (channel = 'automation' and i.provider in ('zapier', 'make', 'n8n', 'calcom')))
       order by i.created_at, i.id)
    loop
      insert into app.notifications (location_id, event_id, event, channel, provider, recipient, integration_id, data)
      values (loc, event_id, type, channel, rcpt.provider, rcpt.recipient, rcpt.integration_id,
              case when event_id is null then data end)
      returning * into n;
      perform app.notification_enqueue(n.id, n.location_id, app.notification_priority(type));
      reached := reached + 1;
    end loop;
    if reached = 0 then
      insert into app.notifications (location_id, event_id, event, channel, provider, status, data)
      values (loc, event_id, type, channel,
              case channel when 'sms' then 'twilio' when 'email' then 'smtp' when 'chat' then 'slack' else 'automation' end,
              'skipped', case when event_id is null then data end)
      returning * into n;
      insert into app.notification_log (location_id, notification_id, status, detail)
      values (loc, n.id, 'skipped', case channel
        when 'sms' then 'no SMS recipient: owner_cell is unset and sms_recipients is empty'
        when 'email' then 'no e-mail recipient: no owner or admin member and email_recipients is empty'
        when 'chat' then 'no slack integration connected'
        else 'no automation integration connected (zapier, make, n8n, calcom)' end);
      reached := 1;
    end if;
    made := made + reached;
  end loop;
  return made;
end
$$;
alter function app.notification_fanout(uuid, uuid, text, jsonb) owner to switchboard_system;
revoke execute on function app.notification_fanout(uuid, uuid, text, jsonb) from public;
comment on function app.notification_fanout(uuid, uuid, text, jsonb) is
  E'Creates the notifications one occurrence routes to (channel × recipient; event_id null + data for operational ones) and queues send_notification for each (emergencies first); unreachable channels are logged skipped.';

-- Latest definition: this file (delivery engine section). Same behaviour, body shared above.
create or replace function app.tg_events__notify() returns trigger
  language plpgsql volatile security definer
  set search_path to pg_catalog, public, pg_temp
as $$
begin
  if new.type = 'webhook.test' then return null; end if;
  perform app.notification_fanout(new.location_id, new.id, new.type, new.data);
  return null;
end
$$;
alter function app.tg_events__notify() owner to switchboard_system;
comment on function app.tg_events__notify() is
  E'Creates the notifications an event routes to (app.notification_fanout); webhook.test never notifies. SECURITY DEFINER (switchboard_system) for the same reason as the fan-out.';

-- Latest definition: 000010. An operational notification has no event: its body is built from the
-- notification itself (left join), with no callback number.
create or replace function app.notification_for_send(notification_id uuid) returns jsonb
  language sql stable security definer
  set search_path to pg_catalog, public, pg_temp
as $$
  select jsonb_build_object(
    'id', n.id, 'location_id', n.location_id, 'channel', n.channel, 'provider', n.provider,
    'recipient', n.recipient, 'status', n.status, 'attempts', n.attempts,
    'target_url', case when i.status = 'connected' then i.webhook_url end,
    'integration_status', i.status,
    'location', jsonb_build_object('name', l.name, 'timezone', l.timezone, 'service_phone', l.service_phone),
    'event', case when e.id is null
                  then jsonb_build_object('event', n.event, 'location_id', n.location_id,
                                          'created_at', app.iso(n.created_at), 'data', coalesce(n.data, '{}'::jsonb))
                  else jsonb_build_object('event', e.type, 'location_id', e.location_id,
                                          'created_at', app.iso(e.created_at), 'data', e.data) end,
    -- The event data masks caller phones; people being told to call back need the real number.
    'callback_phone', coalesce(
      case when e.type like 'call.%' then (select c.caller_phone from app.calls c where c.id::text = e.data ->> 'id'
                                                                                  and c.location_id = n.location_id) end,
      case when e.type like 'lead.%' then e.data ->> 'phone' end,
      case when e.type like 'booking.%' then (
        select coalesce(ld.phone, cu.phone) from (select 1) one
          left join app.leads ld on ld.id::text = e.data ->> 'lead_id' and ld.location_id = n.location_id
          left join app.customers cu on cu.id::text = e.data ->> 'customer_id' and cu.location_id = n.location_id) end,
      case when e.type = 'spam.blocked' then null end))
    from app.notifications n
    join app.locations l on l.id = n.location_id
    left join app.events e on e.id = n.event_id
    left join app.integrations i on i.id = n.integration_id
   where n.id = notification_for_send.notification_id
$$;
alter function app.notification_for_send(uuid) owner to switchboard_system;
revoke execute on function app.notification_for_send(uuid) from public;
comment on function app.notification_for_send(uuid) is
  E'Everything the send task needs for one notification: channel, recipient, target URL (only while the integration is connected), the body (the event''s, or the notification''s own data for an operational one), location and the unmasked callback number.';

-- ---------------------------------------------------------------------------------------------
-- Recording an attempt: health rules and Retry-After. The worker passes its settings
-- (WEBHOOK_RETRY_DELAYS, WEBHOOK_DISABLE_AFTER_FAILURES, WEBHOOK_DISABLE_AFTER_SECONDS) on every
-- call, as it always did for the retry schedule.
drop function if exists app.webhook_record_batch(jsonb, int[]);
drop function if exists app.webhook_record(uuid, jsonb, int[]);

/*
 * Tells the location's people about an endpoint's health (type webhook_endpoint.failing or
 * webhook_endpoint.disabled) through app.notification_fanout: no event, the data below on the
 * notification. `d` is the attempt whose failure triggered it. SECURITY DEFINER
 * (switchboard_system) like the record function that calls it.
 */
create or replace function app.webhook_endpoint_alert(type text, e app.webhook_endpoints, d app.webhook_deliveries,
                                                      disable_after_failures int, disable_after_seconds int) returns int
  language plpgsql volatile security definer
  set search_path to pg_catalog, public, pg_temp
as $$
begin
  if not type = any (app.operational_notification_types()) then
    perform app.raise('SB400', format('Unknown endpoint alert %s', type));
  end if;
  return app.notification_fanout(e.location_id, null, type, jsonb_build_object(
    'endpoint_id', e.id, 'label', e.label, 'url', e.url, 'active', e.active,
    'failure_count', e.failure_count, 'failing_since', app.iso(e.failing_since),
    'last_failure_at', app.iso(e.last_failure_at),
    'last_response_status', d.response_status, 'last_error', d.error, 'last_event', d.event,
    'disabled_at', app.iso(e.disabled_at), 'disabled_reason', e.disabled_reason,
    'disable_after_failures', disable_after_failures, 'disable_after_seconds', disable_after_seconds));
end
$$;
alter function app.webhook_endpoint_alert(text, app.webhook_endpoints, app.webhook_deliveries, int, int) owner to switchboard_system;
revoke execute on function app.webhook_endpoint_alert(text, app.webhook_endpoints, app.webhook_deliveries, int, int) from public;
comment on function app.webhook_endpoint_alert(text, app.webhook_endpoints, app.webhook_deliveries, int, int) is
  E'Worker: notifies the location (routes of webhook_endpoint.failing / webhook_endpoint.disabled) about one endpoint''s health; data names the endpoint, the failure run and the last error.';

/*
 * Records the outcome of a leased attempt in its own short transaction (latest definition: this
 * file, delivery engine section). 2xx → delivered and the endpoint's failure run ends
 * (failure_count 0, failing_since null); otherwise failed + the next attempt scheduled after
 * retry_delays[attempt] seconds, or dead when attempt = cardinality(retry_delays) + 1 (or beyond,
 * for a manual retry). The lease ends here. A result arriving after its lease lapsed still counts
 * if the attempt is pending (nobody else recorded it). The endpoint may have been deleted while
 * the attempt was in flight (endpoint_id null): the outcome is stored, nothing follows.
 *
 * `result` is what src/webhooks/deliver.ts returns: ok, response_status, response_body, error,
 * duration_ms, attempted_at, and retry_after_seconds (the response's Retry-After, parsed by the
 * worker: seconds from the answer, > 0, or absent).
 *
 * Retry-After: on a 429 or 503, the next attempt is due no earlier than retry_after_seconds from
 * now, capped at the largest delay of the schedule (never earlier than the schedule says).
 *
 * Health, for an endpoint still active when the failure is recorded:
 *   - 410 Gone disables it at once;
 *   - failure_count reaching disable_after_failures with failing_since at least
 *     disable_after_seconds old disables it;
 *   - otherwise, failure_count reaching half the threshold (rounded up) sends the warning — once
 *     per run, since the count passes each value once.
 * Disabled = active false + disabled_at + disabled_reason; pending attempts are then held (claims
 * skip inactive endpoints) exactly as for a pause, and the next attempt of this one is still
 * created (held). SECURITY DEFINER (switchboard_system) like the claim.
 */
create or replace function app.webhook_record(delivery_id uuid, result jsonb, retry_delays int[],
                                              disable_after_failures int, disable_after_seconds int) returns jsonb
  language plpgsql volatile security definer
  set search_path to pg_catalog, public, pg_temp
as $$
declare
  d app.webhook_deliveries;
  ok boolean := coalesce((result ->> 'ok')::boolean, false);
  http_status int := (result ->> 'response_status')::int;
  retry_after double precision := (result ->> 'retry_after_seconds')::double precision;
  delay double precision;
  next_at timestamptz;
  nd app.webhook_deliveries;
  ep app.webhook_endpoints;
  reason text;
begin
  select * into d from app.webhook_deliveries w where w.id = webhook_record.delivery_id for update;
  if not found or d.status <> 'pending' then return null; end if;
  if not ok and d.attempt <= cardinality(retry_delays) then
    delay := retry_delays[d.attempt];
    if http_status in (429, 503) and retry_after > delay then
      delay := greatest(delay, least(retry_after, (select max(x) from unnest(retry_delays) x)));
    end if;
    next_at := now() + make_interval(secs => delay);
  end if;
  update app.webhook_deliveries w
     set status = case when ok then 'delivered' when next_at is null then 'dead' else 'failed' end,
         response_status = http_status,
         response_body = result ->> 'response_body',
         error = result ->> 'error',
         duration_ms = (result ->> 'duration_ms')::int,
         attempted_at = coalesce((result ->> 'attempted_at')::timestamptz, w.attempted_at, now()),
         next_attempt_at = next_at,
         lease_expires_at = null,
         lease_owner = null
   where w.id = d.id
  returning * into d;
  -- Endpoint bookkeeping. A success on an endpoint already at 0 failures refreshes
  -- last_success_at at most once a second: a busy endpoint's row is not rewritten for every
  -- delivery.
  if ok then
    update app.webhook_endpoints e set failure_count = 0, failing_since = null, last_success_at = now()
     where e.id = d.endpoint_id
       and (e.failure_count <> 0 or e.last_success_at is null or e.last_success_at < now() - interval '1 second');
  elsif d.endpoint_id is not null then
    update app.webhook_endpoints w
       set failure_count = w.failure_count + 1, last_failure_at = now(),
           failing_since = case when w.failure_count = 0 or w.failing_since is null then now() else w.failing_since end
     where w.id = d.endpoint_id
    returning * into ep;
    if ep.active then
      if http_status = 410 then
        reason := 'The endpoint answered 410 Gone';
      elsif ep.failure_count >= disable_after_failures
            and ep.failing_since <= now() - make_interval(secs => disable_after_seconds) then
        reason := format('%s consecutive failed attempts since %s', ep.failure_count, app.iso(ep.failing_since));
      end if;
      if reason is not null then
        update app.webhook_endpoints w set active = false, disabled_at = now(), disabled_reason = reason
         where w.id = ep.id
        returning * into ep;
        perform app.webhook_endpoint_alert('webhook_endpoint.disabled', ep, d, disable_after_failures, disable_after_seconds);
      elsif ep.failure_count = (disable_after_failures + 1) / 2 then
        perform app.webhook_endpoint_alert('webhook_endpoint.failing', ep, d, disable_after_failures, disable_after_seconds);
      end if;
    end if;
  end if;
  if next_at is not null and d.endpoint_id is not null then
    insert into app.webhook_deliveries (location_id, event_id, endpoint_id, event, attempt, status, url, next_attempt_at)
    values (d.location_id, d.event_id, d.endpoint_id, d.event, d.attempt + 1, 'pending', d.url, next_at)
    returning * into nd;
    perform app.webhook_enqueue(nd.id, nd.location_id, nd.next_attempt_at);
  end if;
  return jsonb_build_object('delivery_id', d.id, 'status', d.status, 'next_delivery_id', nd.id,
                            'disabled', reason is not null);
end
$$;
alter function app.webhook_record(uuid, jsonb, int[], int, int) owner to switchboard_system;
revoke execute on function app.webhook_record(uuid, jsonb, int[], int, int) from public;
comment on function app.webhook_record(uuid, jsonb, int[], int, int) is
  E'Worker: stores a leased attempt''s outcome, ends the lease, schedules the next attempt (Retry-After on 429/503, capped at the largest delay) or marks the delivery dead, and applies the endpoint health rules (auto-disable, 410 Gone, warning at half the threshold).';

/*
 * Several outcomes in one round trip (the engine batches them). Endpoints are touched in id order
 * so concurrent batches (and claims, which share-lock endpoints in id order) cannot deadlock.
 * SECURITY DEFINER (switchboard_system) like webhook_record. Latest definition: this file.
 */
create or replace function app.webhook_record_batch(results jsonb, retry_delays int[],
                                                    disable_after_failures int, disable_after_seconds int) returns jsonb
  language plpgsql volatile security definer
  set search_path to pg_catalog, public, pg_temp
as $$
declare
  r record;
  done jsonb := '[]';
begin
  for r in
    select (x ->> 'delivery_id')::uuid as id, x -> 'result' as result
      from jsonb_array_elements(results) x
     order by x ->> 'endpoint_id', x ->> 'delivery_id'
  loop
    done := done || jsonb_build_array(app.webhook_record(r.id, r.result, retry_delays,
                                                         disable_after_failures, disable_after_seconds));
  end loop;
  return done;
end
$$;
alter function app.webhook_record_batch(jsonb, int[], int, int) owner to switchboard_system;
revoke execute on function app.webhook_record_batch(jsonb, int[], int, int) from public;
comment on function app.webhook_record_batch(jsonb, int[], int, int) is
  E'Worker: app.webhook_record for each { delivery_id, endpoint_id, result } of a batch, in endpoint order.';

-- ---------------------------------------------------------------------------------------------
-- Recovery at scale: one wake-up instead of a call per attempt, and a plan that stays linear
-- whatever the statistics say.
/*
 * Latest definition: this file (webhook consumers section). Two changes, both measured on 10,000
 * missed events through the API role with bench/recover-plan.ts (figures in docs/webhooks.md,
 * "Recovery"):
 *   - The check "no delivered or pending attempt to this endpoint" was planned, from statistics
 *     that do not yet count the rows just written (a recovery writes thousands), as a nested loop
 *     probing an index per event — under RLS one led by location_id, so each probe walked the
 *     location's attempts: calls of 1,000 took up to 7 s each, one call of 10,000 beside 10,000
 *     delivered attempts 5–11 s (and hit the API's 15 s statement time-out in test runs). With
 *     nested loops off the check is a hash (or merge) anti join: one pass over the events since
 *     `since`, one over this endpoint's attempts since `since` (never older than their event).
 *   - Every new attempt is due now, so one app.webhook_enqueue wakes the engines; a call per
 *     attempt cost about 0.3 ms each at 10,000.
 * The planner settings apply to the whole call; every other statement in it reads one table.
 */
create or replace function api.webhook_endpoint_recover(token_hash text, location_ref text, endpoint_id uuid,
                                                        since timestamptz, retention_days int, max_events int)
  returns jsonb
  language plpgsql volatile
  set enable_seqscan to off
  set enable_nestloop to off
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'webhooks:write');
  e app.webhook_endpoints;
  ids uuid[];
  found_n int;
begin
  select * into e from app.webhook_endpoints w where w.id = endpoint_id for no key update;
  if not found then return null; end if;
  if since > now() then
    perform app.raise('SB400', 'since must not be in the future', jsonb_build_object(
      'issues', jsonb_build_array(jsonb_build_object('path', 'since', 'message', 'Must not be in the future'))));
  end if;
  if since < now() - make_interval(days => retention_days) then
    perform app.raise('SB400', format('since must be within the retention window of %s days', retention_days),
      jsonb_build_object('issues', jsonb_build_array(jsonb_build_object('path', 'since',
        'message', format('Must be within the last %s days (DELIVERY_RETENTION_DAYS)', retention_days)))));
  end if;
  if not e.active then
    perform app.raise('SB409', 'The endpoint is inactive; set active=true before recovering', '{}');
  end if;
  with missed as (
    select ev.id, ev.type, ev.created_at from app.events ev
     where ev.location_id = e.location_id and ev.created_at >= since and ev.type = any (e.events)
       and not exists (
         select 1 from app.webhook_deliveries d
          where d.event_id = ev.id and d.endpoint_id = e.id and d.status in ('delivered', 'pending')
            and d.created_at >= since)
     order by ev.created_at, ev.id
     limit max_events + 1),
  ins as (
    insert into app.webhook_deliveries (location_id, event_id, endpoint_id, event, attempt, status, url, next_attempt_at)
    select e.location_id, m.id, e.id, m.type, 1, 'pending', e.url, now()
      from (select * from missed order by created_at, id limit max_events) m
    returning id)
  select array(select id from ins), (select count(*) from missed) into ids, found_n;
  -- All due now: one wake-up of the delivery engines is enough.
  if cardinality(ids) > 0 then
    perform app.webhook_enqueue(ids[1], e.location_id, null);
  end if;
  return jsonb_build_object('queued', cardinality(ids), 'has_more', found_n > max_events);
end
$$;
comment on function api.webhook_endpoint_recover(text, text, uuid, timestamptz, int, int) is
  E'POST webhook-endpoints/{id}/recover: a new first attempt for each subscribed event since `since` without a delivered or pending attempt to the endpoint (oldest first, at most max_events per call; a hash anti join, linear in the window). 400 outside [now - retention, now], 409 when inactive.';

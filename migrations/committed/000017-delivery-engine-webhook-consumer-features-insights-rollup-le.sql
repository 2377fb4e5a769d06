--! Previous: sha1:1662cdfaad52b9d3943af6bda978d29aaa02dbbc
--! Hash: sha1:e60d2f1023de047cfbe92fe57b28878ab366d4f2
--! Message: Delivery engine, webhook consumer features, insights rollup, lean list reads and ingestion

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
-- (A database whose graphile-worker schema is not installed yet, such as the shadow database
-- graphile-migrate builds, has no such jobs.)
do $$
begin
  if to_regclass('graphile_worker.jobs') is not null then
    perform graphile_worker.remove_job(j.key)
       from graphile_worker.jobs j
      where j.task_identifier = 'deliver_webhook' and j.key is not null;
  end if;
end
$$;

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
-- Insights from a rollup (issue 12, item 1). docs/rest-api.md "Insights" explains the design.
--
-- * app.calls.after_hours: a call's after-hours flag, judged by the business hours in force when
--   the call was finalised (set by a BEFORE trigger; the seeder supplies it itself).
-- * app.insights_hourly (location, local day, local hour), app.insights_services (location,
--   local day, service_type) and app.insights_journal (recent changes, insert-only): every
--   inbound call's contribution, kept by triggers on app.calls and app.leads in the transaction
--   that changes them.
-- * app.insights_json (from the rollup, what api.insights answers) and app.insights_direct (the
--   same figures straight from calls and leads: the reference the property test compares with).
-- =============================================================================================

-- Re-applying this file: its triggers go first, so that the table changes below run without them;
-- they are created again further down.
drop trigger if exists _200_after_hours on app.calls;
drop trigger if exists _200_after_hours_update on app.calls;
drop trigger if exists _300_insights_insert on app.calls;
drop trigger if exists _300_insights_update on app.calls;
drop trigger if exists _300_insights_delete on app.calls;
drop trigger if exists _300_insights_bulk on app.calls;
drop trigger if exists _300_insights_truncate on app.calls;
drop trigger if exists _300_insights_insert on app.leads;
drop trigger if exists _300_insights_update on app.leads;
drop trigger if exists _300_insights_delete on app.leads;
drop trigger if exists _300_insights_bulk on app.leads;
drop trigger if exists _300_insights_timezone on app.locations;

-- ---------------------------------------------------------------------------------------------
-- What the direct computation needed and the rollup does not: a covering index maintained on
-- every call write, a generated column, a lead index and the offset helpers.
drop index if exists app.calls_location_inbound_started_idx;
alter table app.calls drop column if exists started_minute;
drop function if exists app.epoch_minute(timestamptz);
drop function if exists app.offset_segments(timestamptz, timestamptz, text);
drop function if exists app.utc_offset_minutes(timestamptz, text);
drop index if exists app.leads_location_created_call_idx;

-- ---------------------------------------------------------------------------------------------
-- After-hours flag
create or replace function app_private.after_hours(open_minutes int4multirange, local_time timestamp) returns boolean
  language sql immutable parallel safe
as $$
  select not open_minutes @> (extract(dow from local_time)::int * 1440
                              + extract(hour from local_time)::int * 60 + extract(minute from local_time)::int)
$$;
comment on function app_private.after_hours(int4multirange, timestamp) is
  E'Whether a local wall-clock moment falls outside opening hours given as minutes of the week (app_private.open_minutes); minute resolution, close exclusive.';

-- Existing calls: the hours in force when they were finalised are not known; today's are the
-- ones insights used for them until now. The column is filled by a table rewrite (ALTER COLUMN
-- ... USING: one pass, each index rebuilt once; an UPDATE of every row took 8 times as long) with
-- each location's hours looked up from a temporary table. A rewrite fires no trigger, so
-- updated_at stays (nothing about the calls changed).
do $$
begin
  if not exists (select 1 from pg_attribute where attrelid = 'app.calls'::regclass and attname = 'after_hours' and not attisdropped) then
    create temp table insights_location_hours on commit drop as
      select l.id, l.timezone, app_private.open_minutes(l.id) as open_minutes from app.locations l;
    create unique index on insights_location_hours (id);
    create function pg_temp.insights_after_hours(location_id uuid, started_at timestamptz) returns boolean
      language sql stable
      as 'select app_private.after_hours(h.open_minutes, $2 at time zone h.timezone) from pg_temp.insights_location_hours h where h.id = $1';
    alter table app.calls add column after_hours boolean;
    alter table app.calls alter column after_hours type boolean
      using case when started_at is not null then pg_temp.insights_after_hours(location_id, started_at) end;
    drop function pg_temp.insights_after_hours(uuid, timestamptz);
  end if;
end
$$;
comment on column app.calls.after_hours is
  E'Started outside business hours, judged by the hours and timezone in force when the call was finalised (until then, when its start was recorded); null without started_at. Set by trigger; insights count it.';

create or replace function app.tg_calls__after_hours() returns trigger
  language plpgsql
as $$
begin
  if new.started_at is null then
    new.after_hours := null;
  else
    -- Same rule as app_private.after_hours over app_private.open_minutes (minute resolution,
    -- close exclusive): hours are whole minutes, so comparing the time itself is equivalent.
    select not exists (
             select 1 from app.business_hours h
              where h.location_id = new.location_id and h.day = extract(dow from t.local_time)
                and h.open::time <= t.local_time::time and t.local_time::time < h.close::time)
      into new.after_hours
      from (select new.started_at at time zone l.timezone as local_time
              from app.locations l where l.id = new.location_id) t;
  end if;
  return new;
end
$$;
comment on function app.tg_calls__after_hours() is
  E'Sets calls.after_hours from the business hours in force now: when the start is recorded or changes, and again when the call is finalised.';

create trigger _200_after_hours before insert on app.calls
  for each row when (new.started_at is not null and new.after_hours is null)
  execute function app.tg_calls__after_hours();
create trigger _200_after_hours_update before update of started_at, finalized_at on app.calls
  for each row when (new.started_at is distinct from old.started_at
                     or (old.finalized_at is null and new.finalized_at is not null))
  execute function app.tg_calls__after_hours();

-- ---------------------------------------------------------------------------------------------
-- The rollup
/*
 * Buckets are the location's local days and hours (DST and half- or quarter-hour offsets are
 * exact: each call is bucketed by its own local start, as the direct computation does). Three
 * tables: the hourly figures, the per-day service counts, and a journal of recent changes.
 *
 * Why a journal: every call of a location in one hour shares one hourly row. If each ingestion
 * transaction updated that row, concurrent calls of the location would queue on its row lock
 * until each commit (measured: half the throughput with 8 concurrent senders). So the triggers
 * only INSERT their change into app.insights_journal (no shared row is locked), and every 32nd
 * journal row, the transaction that wrote it folds the location's committed journal into the
 * hourly and service rows (app_private.insights_compact, one compactor per location at a time).
 * Readers add the journal to the rollup: at most a few dozen rows per location.
 */
create table if not exists app.insights_hourly (
  location_id uuid not null references app.locations on delete cascade,
  day date not null,
  hour smallint not null check (hour between 0 and 23),
  calls int not null default 0,
  spam int not null default 0,
  dropped int not null default 0,
  emergencies int not null default 0,
  after_hours int not null default 0,
  leads int not null default 0,
  revenue numeric not null default 0,
  primary key (location_id, day, hour)
);
comment on table app.insights_hourly is
  E'@behavior -insert -update -delete\nInsights rollup: inbound calls by local start day and hour in the location''s timezone (with app.insights_journal; kept by triggers on calls and leads, rebuilt when the timezone changes).';
comment on column app.insights_hourly.day is E'Local date of started_at in the location''s timezone.';
comment on column app.insights_hourly.hour is E'Local hour (0-23) of started_at.';
comment on column app.insights_hourly.calls is E'Inbound calls, spam included.';
comment on column app.insights_hourly.spam is E'Of which outcome spam.';
comment on column app.insights_hourly.dropped is E'Of which outcome dropped.';
comment on column app.insights_hourly.emergencies is E'Of which is_emergency.';
comment on column app.insights_hourly.after_hours is E'Of which after_hours (spam included).';
comment on column app.insights_hourly.leads is E'Leads whose call_id is one of these calls.';
comment on column app.insights_hourly.revenue is E'Sum of estimated_value of the booked ones.';

create table if not exists app.insights_services (
  location_id uuid not null references app.locations on delete cascade,
  day date not null,
  service_type text not null,
  calls int not null default 0,
  primary key (location_id, day, service_type)
);
comment on table app.insights_services is
  E'@behavior -insert -update -delete\nInsights rollup: non-spam inbound calls with a service_type, by local start day (with app.insights_journal).';
comment on column app.insights_services.calls is E'Non-spam inbound calls of that service_type started that local day.';

create table if not exists app.insights_journal (
  location_id uuid not null references app.locations on delete cascade,
  id bigint generated by default as identity,
  day date not null,
  hour smallint not null check (hour between 0 and 23),
  service_type text,
  service_calls int not null default 0,
  calls int not null default 0,
  spam int not null default 0,
  dropped int not null default 0,
  emergencies int not null default 0,
  after_hours int not null default 0,
  leads int not null default 0,
  revenue numeric not null default 0,
  primary key (location_id, id)
);
comment on table app.insights_journal is
  E'@behavior -insert -update -delete\nInsights changes not yet folded into app.insights_hourly / app.insights_services: added to the hourly row (day, hour), and service_calls to the service''s day. Insert-only for writers, so concurrent calls of a location never wait on each other.';
comment on column app.insights_journal.service_type is E'Service whose day count service_calls changes (null: none).';
comment on column app.insights_journal.service_calls is E'Change of the service''s day count.';

do $$
begin
  if not exists (select 1 from pg_policy where polrelid = 'app.insights_hourly'::regclass) then
    perform app.secure_tenant_table('app.insights_hourly', 'select');
  end if;
  if not exists (select 1 from pg_policy where polrelid = 'app.insights_services'::regclass) then
    perform app.secure_tenant_table('app.insights_services', 'select');
  end if;
  if not exists (select 1 from pg_policy where polrelid = 'app.insights_journal'::regclass) then
    perform app.secure_tenant_table('app.insights_journal', 'select');
  end if;
end
$$;
-- Only the triggers (as switchboard_system) write the rollup; staff read it like the API does.
revoke insert, update, delete on app.insights_hourly, app.insights_services, app.insights_journal from switchboard_staff;

do $$
begin
  if to_regtype('app_private.insights_delta') is null then
    create type app_private.insights_delta as (
      location_id uuid, day date, hour smallint, service_type text, service_calls int,
      calls int, spam int, dropped int, emergencies int, after_hours int, leads int, revenue numeric);
  end if;
  if to_regtype('app_private.insights_bucket') is null then
    create type app_private.insights_bucket as (
      day date, hour smallint, service_type text,
      calls bigint, spam bigint, dropped bigint, emergencies bigint, after_hours bigint, leads bigint, revenue numeric);
  end if;
end
$$;
comment on type app_private.insights_delta is
  E'A change to the rollup (the shape of an app.insights_journal row): counts added at (location_id, day, hour), service_calls at (location_id, day, service_type).';
comment on type app_private.insights_bucket is
  E'Insights figures of one (local day, hour) or, with only service_type and calls, of one service: what app_private.insights_assemble reads.';

-- ---------------------------------------------------------------------------------------------
-- What one call adds
create or replace function app_private.insights_call_delta(
  location_id uuid, started_at timestamptz, outcome text, service_type text, is_emergency boolean,
  after_hours boolean, estimated_value numeric, tz text, leads int, sign int)
  returns app_private.insights_delta
  language sql immutable parallel safe
as $$
  select row(location_id, (started_at at time zone tz)::date, extract(hour from started_at at time zone tz)::smallint,
             case when outcome <> 'spam' then service_type end,
             case when outcome <> 'spam' and service_type is not null then sign else 0 end,
             sign, sign * (outcome = 'spam')::int, sign * (outcome = 'dropped')::int,
             sign * is_emergency::int, sign * coalesce(after_hours, false)::int, sign * leads,
             sign * case when outcome = 'booked' then coalesce(estimated_value, 0) else 0 end
         )::app_private.insights_delta
$$;
comment on function app_private.insights_call_delta(uuid, timestamptz, text, text, boolean, boolean, numeric, text, int, int) is
  E'The rollup contribution of one inbound call (given by the columns that count) with its number of leads, times sign (+1 add, -1 remove), bucketed by its local start in zone tz. Scalar arguments: a trigger passes OLD/NEW fields without building the whole row.';

create or replace function app_private.insights_call_delta(c app.calls, tz text, leads int, sign int)
  returns app_private.insights_delta
  language sql immutable parallel safe
as $$
  select app_private.insights_call_delta(c.location_id, c.started_at, c.outcome, c.service_type, c.is_emergency,
                                         c.after_hours, c.estimated_value, tz, leads, sign)
$$;
comment on function app_private.insights_call_delta(app.calls, text, int, int) is
  E'app_private.insights_call_delta for a whole call row (set-based paths).';

/*
 * Buckets depend on the location's timezone. Whoever buckets a change for a location first takes
 * this lock (shared, until commit), then reads the timezone; a timezone change rebuilds the
 * location's rollup under the exclusive lock, so no change is bucketed by a zone being replaced.
 */
create or replace function app_private.insights_lock(location_id uuid) returns text
  language sql volatile
as $$ select pg_advisory_xact_lock_shared(1229869897, hashtext(location_id::text))::text $$;
comment on function app_private.insights_lock(uuid) is
  E'Shared per-location lock held from bucketing a rollup change until commit; app_private.insights_rebuild takes it exclusively. Returns an empty text, so PL/pgSQL can take it in a plain assignment.';

create or replace function app_private.insights_apply(deltas app_private.insights_delta[]) returns void
  language plpgsql volatile
as $$
begin
  -- Rows in key order (hourly, then services), so concurrent transactions lock them in one order.
  insert into app.insights_hourly as h (location_id, day, hour, calls, spam, dropped, emergencies, after_hours, leads, revenue)
  select d.location_id, d.day, d.hour, sum(d.calls), sum(d.spam), sum(d.dropped), sum(d.emergencies),
         sum(d.after_hours), sum(d.leads), sum(d.revenue)
    from unnest(deltas) d
   group by 1, 2, 3
  having sum(d.calls) <> 0 or sum(d.spam) <> 0 or sum(d.dropped) <> 0 or sum(d.emergencies) <> 0
      or sum(d.after_hours) <> 0 or sum(d.leads) <> 0 or sum(d.revenue) <> 0
   order by 1, 2, 3
  on conflict (location_id, day, hour) do update
     set calls = h.calls + excluded.calls, spam = h.spam + excluded.spam, dropped = h.dropped + excluded.dropped,
         emergencies = h.emergencies + excluded.emergencies, after_hours = h.after_hours + excluded.after_hours,
         leads = h.leads + excluded.leads, revenue = h.revenue + excluded.revenue;
  insert into app.insights_services as s (location_id, day, service_type, calls)
  select d.location_id, d.day, d.service_type, sum(d.service_calls)
    from unnest(deltas) d
   where d.service_type is not null
   group by 1, 2, 3
  having sum(d.service_calls) <> 0
   order by 1, 2, 3
  on conflict (location_id, day, service_type) do update set calls = s.calls + excluded.calls;
end
$$;
comment on function app_private.insights_apply(app_private.insights_delta[]) is
  E'Adds changes to app.insights_hourly and app.insights_services (set-based; the compaction, the seeder''s bulk path and the rebuild use it).';

create or replace function app_private.insights_compact(location_id uuid) returns void
  language plpgsql volatile
as $$
declare
  loc uuid := insights_compact.location_id;
  moved app_private.insights_delta[];
begin
  -- One compactor per location at a time; a busy one means the journal is being folded anyway.
  if not pg_try_advisory_xact_lock(1229869898, hashtext(loc::text)) then
    return;
  end if;
  with m as (
    delete from app.insights_journal j where j.location_id = loc
    returning j.location_id, j.day, j.hour, j.service_type, j.service_calls, j.calls, j.spam, j.dropped,
              j.emergencies, j.after_hours, j.leads, j.revenue
  )
  select array_agg(g.d) into moved
    from (select row(m.location_id, m.day, m.hour, m.service_type, sum(m.service_calls), sum(m.calls), sum(m.spam),
                     sum(m.dropped), sum(m.emergencies), sum(m.after_hours), sum(m.leads), sum(m.revenue))::app_private.insights_delta as d
            from m
           group by m.location_id, m.day, m.hour, m.service_type) g;
  perform app_private.insights_apply(moved);
end
$$;
comment on function app_private.insights_compact(uuid) is
  E'Folds a location''s committed journal rows (and this transaction''s own) into app.insights_hourly / app.insights_services; skipped while another transaction does it.';

create or replace function app_private.insights_record(d app_private.insights_delta) returns boolean
  language plpgsql volatile
as $$
declare
  jid bigint;
begin
  if d.service_calls = 0 and d.calls = 0 and d.spam = 0 and d.dropped = 0 and d.emergencies = 0
     and d.after_hours = 0 and d.leads = 0 and d.revenue = 0 then
    return false;
  end if;
  insert into app.insights_journal (location_id, day, hour, service_type, service_calls, calls, spam, dropped,
                                    emergencies, after_hours, leads, revenue)
  values (d.location_id, d.day, d.hour, case when d.service_calls <> 0 then d.service_type end, d.service_calls,
          d.calls, d.spam, d.dropped, d.emergencies, d.after_hours, d.leads, d.revenue)
  returning id into jid;
  if jid % 32 = 0 then
    perform app_private.insights_compact(d.location_id);
  end if;
  return true;
end
$$;
comment on function app_private.insights_record(app_private.insights_delta) is
  E'Writes one change to app.insights_journal (nothing when it changes nothing); every 32nd journal row also compacts its location. True when a row was written.';

-- ---------------------------------------------------------------------------------------------
-- Live path: row triggers on calls and leads, each change bucketed when it happens (so it sees
-- that moment's state: the call's start, its leads).
create or replace function app_private.tg_calls__insights() returns trigger
  language plpgsql volatile security definer
  set search_path to pg_catalog, public, pg_temp
as $$
declare
  was boolean := tg_op <> 'INSERT' and old.direction = 'inbound' and old.started_at is not null;
  is_now boolean := tg_op <> 'DELETE' and new.direction = 'inbound' and new.started_at is not null;
  n_leads int := 0;
  tz text;
  o app_private.insights_delta;
  n app_private.insights_delta;
  ignored text;
  ignored_b boolean;
begin
  if tg_op = 'DELETE' then
    if not exists (select 1 from app.locations l where l.id = old.location_id) then
      return old;  -- the whole location is being deleted; its rollup goes with it
    end if;
  end if;
  -- The call's leads move with it when its bucket may change (counted now, before a DELETE has
  -- detached them); otherwise they stay where they are.
  if not (was and is_now and old.location_id = new.location_id and old.started_at = new.started_at) then
    select count(*) into n_leads from app.leads l where l.call_id = coalesce(new.id, old.id);
  end if;
  if was then
    ignored := app_private.insights_lock(old.location_id);
    select l.timezone into tz from app.locations l where l.id = old.location_id;
    o := app_private.insights_call_delta(old.location_id, old.started_at, old.outcome, old.service_type, old.is_emergency,
                                         old.after_hours, old.estimated_value, tz, n_leads, -1);
  end if;
  if is_now then
    if not was or new.location_id <> old.location_id then
      ignored := app_private.insights_lock(new.location_id);
      select l.timezone into tz from app.locations l where l.id = new.location_id;
    end if;
    n := app_private.insights_call_delta(new.location_id, new.started_at, new.outcome, new.service_type, new.is_emergency,
                                         new.after_hours, new.estimated_value, tz, n_leads, 1);
  end if;
  if was and is_now and o.location_id = n.location_id and o.day = n.day and o.hour = n.hour then
    -- Same bucket (a settled outcome, a corrected value...): one journal row with the difference;
    -- a second one only when the call moves from one counted service to another.
    if o.service_type is not null and n.service_type is not null and o.service_type <> n.service_type then
      ignored_b := app_private.insights_record(row(o.location_id, o.day, o.hour, o.service_type, -1, 0, 0, 0, 0, 0, 0, 0)::app_private.insights_delta);
      o.service_type := null;
      o.service_calls := 0;
    end if;
    ignored_b := app_private.insights_record(row(n.location_id, n.day, n.hour, coalesce(n.service_type, o.service_type),
      n.service_calls + o.service_calls, n.calls + o.calls, n.spam + o.spam, n.dropped + o.dropped,
      n.emergencies + o.emergencies, n.after_hours + o.after_hours, n.leads + o.leads, n.revenue + o.revenue)::app_private.insights_delta);
  else
    if was then
      ignored_b := app_private.insights_record(o);
    end if;
    if is_now then
      ignored_b := app_private.insights_record(n);
    end if;
  end if;
  return case when tg_op = 'DELETE' then old else new end;
end
$$;
comment on function app_private.tg_calls__insights() is
  E'Rollup upkeep for one call (insert, relevant update, delete): its old contribution out, its new one in, as journal rows. SECURITY DEFINER (switchboard_system): only it writes the rollup, and it reads the call''s leads whatever the writer''s role.';

create or replace function app_private.insights_lead(call_id uuid, sign int) returns boolean
  language plpgsql volatile
as $$
declare
  c record;
  tz text;
  ignored text;
begin
  -- FOR SHARE: a concurrent change of the call's start waits for this transaction (or this waits
  -- for it and reads the new start), so the lead is counted where its call ends up. No row: the
  -- call is not counted, or it is being deleted (its own trigger took its leads out).
  select x.location_id, x.started_at into c from app.calls x
   where x.id = insights_lead.call_id and x.direction = 'inbound' and x.started_at is not null
     for share;
  if not found then
    return false;
  end if;
  ignored := app_private.insights_lock(c.location_id);
  select l.timezone into tz from app.locations l where l.id = c.location_id;
  if tz is null then
    return false;
  end if;
  return app_private.insights_record(row(c.location_id, (c.started_at at time zone tz)::date,
    extract(hour from c.started_at at time zone tz)::smallint, null, 0, 0, 0, 0, 0, 0, sign, 0)::app_private.insights_delta);
end
$$;
comment on function app_private.insights_lead(uuid, int) is
  E'Records sign leads in the bucket of call call_id (nothing when the call is not counted); true when a journal row was written.';

create or replace function app_private.tg_leads__insights() returns trigger
  language plpgsql volatile security definer
  set search_path to pg_catalog, public, pg_temp
as $$
declare
  ignored boolean;
begin
  if tg_op <> 'INSERT' and old.call_id is not null then
    ignored := app_private.insights_lead(old.call_id, -1);
  end if;
  if tg_op <> 'DELETE' and new.call_id is not null then
    ignored := app_private.insights_lead(new.call_id, 1);
  end if;
  return null;
end
$$;
comment on function app_private.tg_leads__insights() is
  E'Rollup upkeep for leads made from calls (insert, call_id change, delete): one lead in or out of its call''s bucket. SECURITY DEFINER (switchboard_system): only it writes the rollup, and it locks and reads the lead''s call whatever the writer''s role.';

-- ---------------------------------------------------------------------------------------------
-- Bulk path: the demo seeder (app.seeding = on) inserts calls and leads by the ten thousand; one
-- set-based pass per statement into the hourly and service rows instead of a trigger call (and
-- a journal row) per row. Nothing else sets app.seeding.
create or replace function app_private.tg_calls__insights_bulk() returns trigger
  language plpgsql volatile security definer
  set search_path to pg_catalog, public, pg_temp
as $$
begin
  perform app_private.insights_lock(x.location_id) from (select distinct location_id from new_rows) x;
  perform app_private.insights_apply(array(
    select row(d.location_id, d.day, d.hour, d.service_type, sum(d.service_calls), sum(d.calls), sum(d.spam),
               sum(d.dropped), sum(d.emergencies), sum(d.after_hours), 0, sum(d.revenue))::app_private.insights_delta
      from new_rows c
      join app.locations l on l.id = c.location_id
     cross join lateral app_private.insights_call_delta(c, l.timezone, 0, 1) d
     where c.direction = 'inbound' and c.started_at is not null
     group by d.location_id, d.day, d.hour, d.service_type));
  return null;
end
$$;
comment on function app_private.tg_calls__insights_bulk() is
  E'Rollup upkeep for calls inserted while seeding (app.seeding = on): one aggregate per statement. SECURITY DEFINER (switchboard_system): only it writes the rollup.';

create or replace function app_private.tg_leads__insights_bulk() returns trigger
  language plpgsql volatile security definer
  set search_path to pg_catalog, public, pg_temp
as $$
begin
  perform app_private.insights_lock(x.location_id)
     from (select distinct c.location_id from new_rows n join app.calls c on c.id = n.call_id) x;
  perform app_private.insights_apply(array(
    select row(c.location_id, (c.started_at at time zone l.timezone)::date,
               extract(hour from c.started_at at time zone l.timezone)::smallint,
               null, 0, 0, 0, 0, 0, 0, count(*), 0)::app_private.insights_delta
      from new_rows n
      join app.calls c on c.id = n.call_id
      join app.locations l on l.id = c.location_id
     where c.direction = 'inbound' and c.started_at is not null
     group by c.location_id, (c.started_at at time zone l.timezone)::date,
              extract(hour from c.started_at at time zone l.timezone)));
  return null;
end
$$;
comment on function app_private.tg_leads__insights_bulk() is
  E'Rollup upkeep for leads inserted while seeding (app.seeding = on): one aggregate per statement. SECURITY DEFINER (switchboard_system): only it writes the rollup.';

create or replace function app_private.tg_calls__insights_truncate() returns trigger
  language plpgsql volatile security definer
  set search_path to pg_catalog, public, pg_temp
as $$
begin
  delete from app.insights_hourly;
  delete from app.insights_services;
  delete from app.insights_journal;
  return null;
end
$$;
comment on function app_private.tg_calls__insights_truncate() is
  E'TRUNCATE of calls empties the rollup. SECURITY DEFINER (switchboard_system): only it writes the rollup.';

create trigger _300_insights_insert after insert on app.calls
  for each row when (new.direction = 'inbound' and new.started_at is not null
                     and current_setting('app.seeding', true) is distinct from 'on')
  execute function app_private.tg_calls__insights();
create trigger _300_insights_update after update on app.calls
  for each row when ((old.location_id, old.direction, old.started_at, old.outcome, old.is_emergency, old.after_hours,
                      old.service_type, old.estimated_value)
                     is distinct from
                     (new.location_id, new.direction, new.started_at, new.outcome, new.is_emergency, new.after_hours,
                      new.service_type, new.estimated_value))
  execute function app_private.tg_calls__insights();
-- BEFORE: the call's leads are still attached (ON DELETE SET NULL detaches them afterwards).
create trigger _300_insights_delete before delete on app.calls
  for each row when (old.direction = 'inbound' and old.started_at is not null)
  execute function app_private.tg_calls__insights();
create trigger _300_insights_bulk after insert on app.calls
  referencing new table as new_rows
  for each statement when (current_setting('app.seeding', true) = 'on')
  execute function app_private.tg_calls__insights_bulk();
create trigger _300_insights_truncate after truncate on app.calls
  for each statement execute function app_private.tg_calls__insights_truncate();

create trigger _300_insights_insert after insert on app.leads
  for each row when (new.call_id is not null and current_setting('app.seeding', true) is distinct from 'on')
  execute function app_private.tg_leads__insights();
create trigger _300_insights_update after update of call_id on app.leads
  for each row when (old.call_id is distinct from new.call_id)
  execute function app_private.tg_leads__insights();
create trigger _300_insights_delete after delete on app.leads
  for each row when (old.call_id is not null)
  execute function app_private.tg_leads__insights();
create trigger _300_insights_bulk after insert on app.leads
  referencing new table as new_rows
  for each statement when (current_setting('app.seeding', true) = 'on')
  execute function app_private.tg_leads__insights_bulk();

-- ---------------------------------------------------------------------------------------------
-- Rebuild (backfill, timezone change)
create or replace function app_private.insights_rebuild(location_id uuid) returns void
  language plpgsql volatile security definer
  set search_path to pg_catalog, public, pg_temp
as $$
declare
  loc uuid := insights_rebuild.location_id;
begin
  perform pg_advisory_xact_lock(1229869897, hashtext(loc::text));
  delete from app.insights_journal r where r.location_id = loc;
  delete from app.insights_hourly r where r.location_id = loc;
  delete from app.insights_services r where r.location_id = loc;
  perform app_private.insights_apply(array(
    select row(d.location_id, d.day, d.hour, d.service_type, sum(d.service_calls), sum(d.calls), sum(d.spam),
               sum(d.dropped), sum(d.emergencies), sum(d.after_hours), 0, sum(d.revenue))::app_private.insights_delta
      from app.calls c
      join app.locations l on l.id = c.location_id
     cross join lateral app_private.insights_call_delta(c, l.timezone, 0, 1) d
     where c.location_id = loc and c.direction = 'inbound' and c.started_at is not null
     group by d.location_id, d.day, d.hour, d.service_type
    union all
    select row(c.location_id, (c.started_at at time zone l.timezone)::date,
               extract(hour from c.started_at at time zone l.timezone)::smallint,
               null, 0, 0, 0, 0, 0, 0, count(*), 0)::app_private.insights_delta
      from app.leads x
      join app.calls c on c.id = x.call_id
      join app.locations l on l.id = c.location_id
     where c.location_id = loc and c.direction = 'inbound' and c.started_at is not null
     group by c.location_id, (c.started_at at time zone l.timezone)::date,
              extract(hour from c.started_at at time zone l.timezone)));
end
$$;
comment on function app_private.insights_rebuild(uuid) is
  E'Recomputes a location''s rollup from its calls and leads (backfill; timezone change), under the exclusive per-location lock. SECURITY DEFINER (switchboard_system): it writes the rollup and reads every call of the location.';

create or replace function app_private.tg_locations__insights_timezone() returns trigger
  language plpgsql volatile security definer
  set search_path to pg_catalog, public, pg_temp
as $$
begin
  perform app_private.insights_rebuild(new.id);
  return null;
end
$$;
comment on function app_private.tg_locations__insights_timezone() is
  E'A new timezone re-buckets the location''s calls: its rollup is rebuilt in the same transaction. SECURITY DEFINER (switchboard_system): only it writes the rollup.';
create trigger _300_insights_timezone after update of timezone on app.locations
  for each row when (old.timezone is distinct from new.timezone)
  execute function app_private.tg_locations__insights_timezone();

-- The rollup is written only by switchboard_system (definer functions above); the helpers are
-- not for callers.
alter function app_private.insights_call_delta(app.calls, text, int, int) owner to switchboard_system;
alter function app_private.insights_call_delta(uuid, timestamptz, text, text, boolean, boolean, numeric, text, int, int) owner to switchboard_system;
alter function app_private.insights_lock(uuid) owner to switchboard_system;
alter function app_private.insights_apply(app_private.insights_delta[]) owner to switchboard_system;
alter function app_private.insights_compact(uuid) owner to switchboard_system;
alter function app_private.insights_record(app_private.insights_delta) owner to switchboard_system;
alter function app_private.insights_lead(uuid, int) owner to switchboard_system;
alter function app_private.insights_rebuild(uuid) owner to switchboard_system;
alter function app_private.tg_calls__insights() owner to switchboard_system;
alter function app_private.tg_leads__insights() owner to switchboard_system;
alter function app_private.tg_calls__insights_bulk() owner to switchboard_system;
alter function app_private.tg_leads__insights_bulk() owner to switchboard_system;
alter function app_private.tg_calls__insights_truncate() owner to switchboard_system;
alter function app_private.tg_locations__insights_timezone() owner to switchboard_system;
revoke execute on function app_private.insights_lock(uuid), app_private.insights_apply(app_private.insights_delta[]),
  app_private.insights_compact(uuid), app_private.insights_record(app_private.insights_delta),
  app_private.insights_lead(uuid, int),
  app_private.insights_rebuild(uuid) from public;

-- ---------------------------------------------------------------------------------------------
-- The figures (DESIGN §10), from per-day, per-hour and per-service counts
create or replace function app_private.insights_assemble(
  days int, first_day date, today date, tz text,
  daily app_private.insights_bucket[], hourly app_private.insights_bucket[], services app_private.insights_bucket[])
  returns jsonb
  language sql stable
as $$
  with per_day as (
    select * from unnest(daily)
  ), tot as (
    select coalesce(sum(calls - spam), 0) as non_spam,
           coalesce(sum(calls - spam - dropped), 0) as answered,
           coalesce(sum(spam), 0) as spam,
           coalesce(sum(emergencies), 0) as emergencies,
           coalesce(sum(after_hours), 0) as after_hours,               -- spam included
           coalesce(sum(leads), 0) as leads,
           coalesce(sum(revenue), 0) as revenue
      from per_day
  ), hours as (
    select g.hour, coalesce(h.calls - h.spam, 0) as n
      from generate_series(0, 23) g(hour)
      left join unnest(hourly) h on h.hour = g.hour
  ), hour_shares as (
    -- Shares rounded to 4 decimals by largest remainder, so that they sum to exactly 1.
    select hour, floor(n * 10000.0 / nullif(t.non_spam, 0)) as base,
           n * 10000.0 / nullif(t.non_spam, 0) - floor(n * 10000.0 / nullif(t.non_spam, 0)) as rem
      from hours, tot t
  ), hour_final as (
    select hour, coalesce(base, 0) + case when row_number() over (order by rem desc nulls last, hour)
                                              <= 10000 - coalesce(sum(base) over (), 10000) then 1 else 0 end as units
      from hour_shares
  ), svc as (
    select service_type, sum(calls) as n from unnest(services)
     where service_type is not null
     group by service_type
    having sum(calls) > 0
  )
  select jsonb_build_object(
    'days', days,
    'from', first_day, 'to', today, 'timezone', tz,
    'calls_answered', t.answered,
    'leads_captured', t.leads,
    'revenue_recovered', trim_scale(t.revenue),
    'spam_blocked', t.spam,
    'emergencies', t.emergencies,
    'answer_rate_pct', case when t.non_spam = 0 then 0 else round(100.0 * t.answered / t.non_spam, 1) end,
    'after_hours_calls', t.after_hours,
    'per_day', (select jsonb_agg(jsonb_build_object(
                  'date', s.day::date, 'calls', coalesce(p.calls - p.spam, 0), 'revenue', trim_scale(coalesce(p.revenue, 0)))
                  order by s.day)
                  from generate_series(first_day, today, interval '1 day') s(day)
                  left join per_day p on p.day = s.day::date),
    'per_hour', (select jsonb_agg(jsonb_build_object('hour', hour, 'share', units / 10000.0) order by hour) from hour_final),
    'services', (select coalesce(jsonb_agg(jsonb_build_object(
                    'service', service_type,
                    'pct', round(100.0 * n / (select sum(n) from svc), 1)) order by n desc, service_type), '[]')
                   from svc))
    from tot t
$$;
comment on function app_private.insights_assemble(int, date, date, text, app_private.insights_bucket[], app_private.insights_bucket[], app_private.insights_bucket[]) is
  E'The insights JSON (DESIGN §10 formulas) from a window''s figures per local day (hour null), its calls and spam per local hour (day null) and its calls per service.';

create or replace function app.insights_json(location_id uuid, days int, as_of timestamptz) returns jsonb
  language plpgsql stable
as $$
declare
  loc uuid := insights_json.location_id;
  tz text;
  today date;
  first_day date;
  daily app_private.insights_bucket[];
  hourly app_private.insights_bucket[];
begin
  select l.timezone into tz from app.locations l where l.id = loc;
  today := (as_of at time zone tz)::date;
  first_day := today - (days - 1);
  -- At most 24 rows a day, plus the few journal rows not yet folded in.
  with r as (
    select h.day, h.hour, h.calls, h.spam, h.dropped, h.emergencies, h.after_hours, h.leads, h.revenue
      from app.insights_hourly h
     where h.location_id = loc and h.day between first_day and today
    union all
    select j.day, j.hour, j.calls, j.spam, j.dropped, j.emergencies, j.after_hours, j.leads, j.revenue
      from app.insights_journal j
     where j.location_id = loc and j.day between first_day and today
  )
  select array(select row(r.day, null, null, sum(r.calls), sum(r.spam), sum(r.dropped), sum(r.emergencies),
                          sum(r.after_hours), sum(r.leads), sum(r.revenue))::app_private.insights_bucket
                 from r group by r.day),
         array(select row(null, r.hour, null, sum(r.calls), sum(r.spam), 0, 0, 0, 0, 0)::app_private.insights_bucket
                 from r group by r.hour)
    into daily, hourly;
  return app_private.insights_assemble(days, first_day, today, tz, daily, hourly,
    array(select row(null, null, r.service_type, sum(r.calls), 0, 0, 0, 0, 0, 0)::app_private.insights_bucket
            from (select s.service_type, s.calls
                    from app.insights_services s
                   where s.location_id = loc and s.day between first_day and today
                  union all
                  select j.service_type, j.service_calls
                    from app.insights_journal j
                   where j.location_id = loc and j.day between first_day and today and j.service_type is not null) r
           group by r.service_type));
end
$$;
comment on function app.insights_json(uuid, int, timestamptz) is
  E'Insights of the `days` local days up to the local date of as_of, read from the rollup (app.insights_hourly, app.insights_services and the journal not yet folded in): what api.insights answers.';

create or replace function app.insights_direct(location_id uuid, days int, as_of timestamptz) returns jsonb
  language plpgsql stable
as $$
declare
  loc uuid := insights_direct.location_id;
  tz text;
  today date;
  first_day date;
  daily app_private.insights_bucket[];
  hourly app_private.insights_bucket[];
begin
  select l.timezone into tz from app.locations l where l.id = loc;
  today := (as_of at time zone tz)::date;
  first_day := today - (days - 1);
  with x as (
    select (c.started_at at time zone tz)::date as day,
           extract(hour from c.started_at at time zone tz)::smallint as hour,
           c.outcome, c.is_emergency, c.after_hours, c.estimated_value,
           (select count(*) from app.leads l where l.call_id = c.id) as leads
      from app.calls c
     where c.location_id = loc and c.direction = 'inbound'
       -- every zone is within a day of UTC: a coarse index range, then the exact local date
       and c.started_at >= (first_day - 1)::timestamp at time zone 'UTC'
       and c.started_at < (today + 2)::timestamp at time zone 'UTC'
  ), w as (
    select * from x where x.day between first_day and today
  )
  select array(select row(w.day, null, null, count(*),
                          count(*) filter (where w.outcome = 'spam'),
                          count(*) filter (where w.outcome = 'dropped'),
                          count(*) filter (where w.is_emergency),
                          count(*) filter (where w.after_hours),
                          sum(w.leads),
                          coalesce(sum(w.estimated_value) filter (where w.outcome = 'booked'), 0))::app_private.insights_bucket
                 from w group by w.day),
         array(select row(null, w.hour, null, count(*), count(*) filter (where w.outcome = 'spam'), 0, 0, 0, 0, 0)::app_private.insights_bucket
                 from w group by w.hour)
    into daily, hourly;
  return app_private.insights_assemble(days, first_day, today, tz, daily, hourly,
    array(select row(null, null, c.service_type, count(*), 0, 0, 0, 0, 0, 0)::app_private.insights_bucket
            from app.calls c
           where c.location_id = loc and c.direction = 'inbound' and c.outcome <> 'spam' and c.service_type is not null
             and c.started_at >= (first_day - 1)::timestamp at time zone 'UTC'
             and c.started_at < (today + 2)::timestamp at time zone 'UTC'
             and (c.started_at at time zone tz)::date between first_day and today
           group by c.service_type));
end
$$;
comment on function app.insights_direct(uuid, int, timestamptz) is
  E'Reference for app.insights_json: the same figures computed straight from calls and leads (cost grows with the calls of the window). Tests compare the two.';

create or replace function api.insights(token_hash text, location_ref text, days int) returns jsonb
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'insights:read');
begin
  if days is null or days not between 1 and 90 then
    perform app.raise('SB400', 'days must be an integer from 1 to 90',
      jsonb_build_object('issues', jsonb_build_array(jsonb_build_object('path', 'days', 'message', 'Must be from 1 to 90'))));
  end if;
  return app.insights_json(a.location_id, days, now());
end
$$;
comment on function api.insights(text, text, int) is
  E'GET insights?days=N: the last N local days (today included) of inbound calls, per DESIGN.md §10, from the rollup.';

-- ---------------------------------------------------------------------------------------------
-- The demo seeder supplies each call's after-hours flag (its calls are finalised when they start,
-- under today's hours), so the BEFORE trigger is skipped for its rows. Otherwise as in 000008.
create or replace function admin.demo_seed_calls(location_ref text, calls int, days int) returns jsonb
  language plpgsql volatile security definer
  set search_path to pg_catalog, public, pg_temp
as $$
declare
  loc uuid := admin.resolve_location(location_ref);
  tz text;
  services text[] := array['AC repair','Furnace repair','Water heater','Drain cleaning','Leak repair','Maintenance','Thermostat install','Duct cleaning'];
  values_ numeric[] := array[350, 480, 1800, 240, 420, 149, 260, 520];
  cust uuid[];
  n int;
  open_minutes int4multirange;
begin
  perform set_config('app.location_id', loc::text, true);
  perform set_config('app.seeding', 'on', true);
  select timezone into tz from app.locations where id = loc;
  open_minutes := app_private.open_minutes(loc);
  cust := array(select id from app.customers where location_id = loc);
  n := cardinality(cust);
  if n = 0 then perform app.raise('SB400', 'Run demo_seed_prepare first'); end if;

  with raw as (
    select g, random() as r_outcome, random() as r_svc, random() as r_urg, random() as r_len,
           floor(random() * days)::int as day_ago,
           -- Most calls come in working hours; some at night and at weekends.
           case when random() < 0.8 then 7 + floor(random() * 12)::int else floor(random() * 24)::int end as hour,
           floor(random() * 60)::int as minute, floor(random() * 60)::int as second,
           cust[1 + floor(random() * n)::int] as customer_id
      from generate_series(1, calls) g
  ), shaped as (
    select r.*,
           case when r_outcome < 0.10 then 'spam' when r_outcome < 0.16 then 'dropped'
                when r_outcome < 0.44 then 'booked' when r_outcome < 0.74 then 'lead'
                when r_outcome < 0.84 then 'transferred' else 'other' end as outcome,
           1 + floor(r_svc * 8)::int as svc,
           case when r_urg > 0.96 then 5 when r_urg > 0.85 then 4 when r_urg > 0.6 then 3
                when r_urg > 0.3 then 2 else 1 end as urgency,
           ((date_trunc('day', now() at time zone tz) - make_interval(days => day_ago)
             + make_interval(hours => hour, mins => minute, secs => second)) at time zone tz) as started
      from raw r
  ), timed as (
    select s.*, least(s.started, now() - interval '1 minute') as started_at from shaped s
  )
  insert into app.calls (location_id, platform_call_id, customer_id, direction, caller_phone, caller_name,
                         caller_address, outcome, urgency_level, is_emergency, is_returning_customer,
                         started_at, ended_at, duration_sec, service_type, issue_summary, detected_intent,
                         estimated_value, appointment_date, appointment_time, disconnection_reason,
                         transcript, platform_status, finalized_at, created_at, after_hours)
  select loc, 'demo_' || replace(gen_random_uuid()::text, '-', ''), s.customer_id, 'inbound', c.phone,
         case when s.outcome in ('spam', 'dropped') then null else c.name end,
         case when s.outcome in ('booked', 'lead') then c.address end,
         s.outcome, case when s.outcome = 'spam' then 0 else s.urgency end,
         s.outcome <> 'spam' and s.urgency = 5, random() < 0.35,
         s.started_at,
         s.started_at + make_interval(secs => (case when s.outcome = 'dropped' then 4 else 45 + s.r_len * 400 end)::int),
         (case when s.outcome = 'dropped' then 4 else 45 + s.r_len * 400 end)::int,
         case when s.outcome in ('spam', 'dropped') then null else services[s.svc] end,
         case when s.outcome in ('spam', 'dropped') then null else 'Caller needs help with ' || lower(services[s.svc]) end,
         case when s.outcome = 'booked' then 'book_appointment' when s.outcome = 'spam' then 'spam'
              when s.outcome = 'transferred' then 'speak_to_human' else 'get_quote' end,
         case when s.outcome in ('booked', 'lead', 'transferred') then values_[s.svc] end,
         case when s.outcome = 'booked' then (s.started at time zone tz)::date + 1 + (s.g % 5) end,
         case when s.outcome = 'booked' then lpad((8 + s.g % 9)::text, 2, '0') || ':00' end,
         case s.outcome when 'transferred' then 'call_transfer' when 'spam' then 'marked_as_spam'
                        when 'dropped' then 'user_hangup' else 'agent_hangup' end,
         case when s.outcome in ('spam', 'dropped') then null
              else 'Agent: Thanks for calling, how can I help?' || chr(10) || 'User: I need help with ' || lower(services[s.svc]) || '.' end,
         'analyzed', s.started_at, s.started_at,
         app_private.after_hours(open_minutes, s.started_at at time zone tz)
    from timed s join app.customers c on c.id = s.customer_id;
  return jsonb_build_object('calls', calls);
end
$$;

-- ---------------------------------------------------------------------------------------------
-- Backfill: every location's rollup from its calls and leads (idempotent: rebuilt from scratch).
select app_private.insights_rebuild(l.id) from app.locations l;

-- =============================================================================================
-- Performance (issue 12): list reads at the ceiling.
--
-- A page used to be built as jsonb, one {c: cursor, j: row} object per row (a base64 cursor
-- encoded for all 51 rows), gathered into an array, unnested again and re-aggregated, and finally
-- printed as text: about 3 ms of server time for 50 calls against 0.3 ms for reading the rows.
-- Now each row is built once as json (text, in column order, nothing sorted or re-parsed), the
-- cursor is encoded only for the last row of the page, and the page comes back as two values,
-- `data` (the JSON array the API sends as is) and `next_cursor`. The jsonb helpers that events
-- and single-row reads use are derived from the json ones, so both show the same fields.
-- =============================================================================================

-- ---------------------------------------------------------------------------------------------
-- Row builders. Each resource's API shape is a composite type (field names, order and types, with
-- timestamps already in the API's text form); X_js(row) is that record as json, which to_json
-- writes straight from the type, and X_json (jsonb, for events and single reads) is X_js::jsonb,
-- so both always show the same fields. (json_build_object looks up the JSON category of every key
-- and value on every call; a composite's fields cost half as much, measured on a calls page.)

drop type if exists app.call_summary_shape cascade;
create type app.call_summary_shape as (
  id uuid, location_id uuid, customer_id uuid, direction text, caller_phone text, caller_name text,
  caller_address text, outcome text, urgency_level int, is_emergency boolean,
  is_returning_customer boolean, started_at text, ended_at text, duration_sec int,
  service_type text, issue_summary text, detected_intent text, estimated_value numeric,
  appointment_date date, appointment_time text, disconnection_reason text, created_at text);
comment on type app.call_summary_shape is E'The fields of the API''s call summary record, in order.';

create or replace function app.call_summary_js(c app.calls) returns json
  language sql stable parallel safe
as $$
  select to_json(row(
    c.id, c.location_id, c.customer_id, c.direction, app.mask_phone(c.caller_phone), c.caller_name,
    c.caller_address, c.outcome, c.urgency_level, c.is_emergency, c.is_returning_customer,
    app.iso(c.started_at), app.iso(c.ended_at), c.duration_sec, c.service_type, c.issue_summary,
    c.detected_intent, c.estimated_value, c.appointment_date, c.appointment_time,
    c.disconnection_reason, app.iso(c.created_at))::app.call_summary_shape)
$$;
comment on function app.call_summary_js(app.calls) is E'Call summary (spec) as json text: no transcript, recording or cost data; phone masked. Lists send it as is.';

create or replace function app.call_summary_json(c app.calls) returns jsonb
  language sql stable parallel safe
as $$ select app.call_summary_js(c)::jsonb $$;
comment on function app.call_summary_json(app.calls) is E'Call summary (spec): no transcript, recording or cost data; phone masked.';

drop type if exists app.lead_shape cascade;
create type app.lead_shape as (
  id uuid, location_id uuid, call_id uuid, customer_id uuid, name text, phone text, email text,
  address text, service_type text, urgency_level int, estimated_value numeric, status text,
  status_changed_at text, assigned_to uuid, notes text, created_at text, updated_at text);
comment on type app.lead_shape is E'The fields of the API''s lead record, in order.';

create or replace function app.lead_js(l app.leads) returns json
  language sql stable parallel safe
as $$
  select to_json(row(
    l.id, l.location_id, l.call_id, l.customer_id, l.name, l.phone, l.email, l.address,
    l.service_type, l.urgency_level, l.estimated_value, l.status, app.iso(l.status_changed_at),
    l.assigned_to, l.notes, app.iso(l.created_at), app.iso(l.updated_at))::app.lead_shape)
$$;
comment on function app.lead_js(app.leads) is E'Lead as the API shows it (phone not masked), as json text.';

create or replace function app.lead_json(l app.leads) returns jsonb
  language sql stable parallel safe
as $$ select app.lead_js(l)::jsonb $$;
comment on function app.lead_json(app.leads) is E'Lead as the API and lead.* events show it (phone not masked).';

drop type if exists app.booking_shape cascade;
create type app.booking_shape as (
  id uuid, location_id uuid, call_id uuid, lead_id uuid, customer_id uuid, status text,
  scheduled_date date, scheduled_time text, service_type text, address text, notes text,
  created_at text, updated_at text);
comment on type app.booking_shape is E'The fields of the API''s booking record, in order.';

create or replace function app.booking_js(b app.bookings) returns json
  language sql stable parallel safe
as $$
  select to_json(row(
    b.id, b.location_id, b.call_id, b.lead_id, b.customer_id, b.status, b.scheduled_date,
    b.scheduled_time, b.service_type, b.address, b.notes, app.iso(b.created_at),
    app.iso(b.updated_at))::app.booking_shape)
$$;
comment on function app.booking_js(app.bookings) is E'Booking as the API shows it, as json text.';

create or replace function app.booking_json(b app.bookings) returns jsonb
  language sql stable parallel safe
as $$ select app.booking_js(b)::jsonb $$;
comment on function app.booking_json(app.bookings) is E'Booking as the API and booking.* events show it.';

drop type if exists app.faq_shape cascade;
create type app.faq_shape as (
  id uuid, location_id uuid, question text, answer text, asked_count int, position int,
  created_at text, updated_at text);
comment on type app.faq_shape is E'The fields of the API''s faq record, in order.';

create or replace function app.faq_js(f app.faqs) returns json
  language sql stable parallel safe
as $$
  select to_json(row(
    f.id, f.location_id, f.question, f.answer, f.asked_count, f.position, app.iso(f.created_at),
    app.iso(f.updated_at))::app.faq_shape)
$$;
comment on function app.faq_js(app.faqs) is E'FAQ as the API shows it, as json text.';

create or replace function app.faq_json(f app.faqs) returns jsonb
  language sql stable parallel safe
as $$ select app.faq_js(f)::jsonb $$;
comment on function app.faq_json(app.faqs) is E'FAQ as the API shows it.';

drop type if exists app.pricebook_item_shape cascade;
create type app.pricebook_item_shape as (
  id uuid, location_id uuid, service_name text, price text, note text, position int,
  created_at text, updated_at text);
comment on type app.pricebook_item_shape is E'The fields of the API''s pricebook item record, in order.';

create or replace function app.pricebook_item_js(p app.pricebook_items) returns json
  language sql stable parallel safe
as $$
  select to_json(row(
    p.id, p.location_id, p.service_name, p.price, p.note, p.position, app.iso(p.created_at),
    app.iso(p.updated_at))::app.pricebook_item_shape)
$$;
comment on function app.pricebook_item_js(app.pricebook_items) is E'Pricebook item as the API shows it (price is free text), as json text.';

create or replace function app.pricebook_item_json(p app.pricebook_items) returns jsonb
  language sql stable parallel safe
as $$ select app.pricebook_item_js(p)::jsonb $$;
comment on function app.pricebook_item_json(app.pricebook_items) is E'Pricebook item as the API shows it (price is free text).';

drop type if exists app.integration_shape cascade;
create type app.integration_shape as (
  id uuid, location_id uuid, provider text, status text, label text, external_id text,
  expires_at text, config jsonb, connected_at text, disconnected_at text, last_synced_at text,
  last_error text, created_at text, updated_at text);
comment on type app.integration_shape is E'The fields of the API''s integration record, in order.';

create or replace function app.integration_js(i app.integrations) returns json
  language sql stable parallel safe
as $$
  select to_json(row(
    i.id, i.location_id, i.provider, i.status, i.label, i.external_id, app.iso(i.expires_at),
    i.config, app.iso(i.connected_at), app.iso(i.disconnected_at), app.iso(i.last_synced_at),
    i.last_error, app.iso(i.created_at), app.iso(i.updated_at))::app.integration_shape)
$$;
comment on function app.integration_js(app.integrations) is E'Integration as the API shows it, as json text: never access or refresh tokens, never webhook_url (a secret for Slack).';

create or replace function app.integration_json(i app.integrations) returns jsonb
  language sql stable parallel safe
as $$ select app.integration_js(i)::jsonb $$;
comment on function app.integration_json(app.integrations) is E'Integration as the API shows it: never access or refresh tokens, never webhook_url (a secret for Slack).';

drop type if exists app.member_shape cascade;
create type app.member_shape as (
  id uuid, location_id uuid, email text, name text, role text, invited_at text, joined_at text);
comment on type app.member_shape is E'The fields of the API''s member record, in order.';

create or replace function app.member_js(m app.members) returns json
  language sql stable parallel safe
as $$
  select to_json(row(
    m.id, m.location_id, m.email, m.name, m.role, app.iso(m.invited_at), app.iso(m.joined_at))::app.member_shape)
$$;
comment on function app.member_js(app.members) is E'Member as the API shows it, as json text.';

create or replace function app.member_json(m app.members) returns jsonb
  language sql stable parallel safe
as $$ select app.member_js(m)::jsonb $$;
comment on function app.member_json(app.members) is E'Member as the API shows it.';

drop type if exists app.location_shape cascade;
create type app.location_shape as (
  id uuid, slug text, name text, legal_name text, license_number text, industry text,
  website_url text, timezone text, owner_cell text, service_areas text[], zip_codes text[],
  travel_radius_miles numeric, service_phone text, created_at text, updated_at text);
comment on type app.location_shape is E'The fields of the API''s location record, in order.';

create or replace function app.location_js(l app.locations) returns json
  language sql stable parallel safe
as $$
  select to_json(row(
    l.id, l.slug, l.name, l.legal_name, l.license_number, l.industry, l.website_url, l.timezone,
    l.owner_cell, l.service_areas, l.zip_codes, l.travel_radius_miles, l.service_phone,
    app.iso(l.created_at), app.iso(l.updated_at))::app.location_shape)
$$;
comment on function app.location_js(app.locations) is E'Location as the API shows it, as json text.';

create or replace function app.location_json(l app.locations) returns jsonb
  language sql stable parallel safe
as $$ select app.location_js(l)::jsonb $$;
comment on function app.location_json(app.locations) is E'Location as the API shows it.';

drop type if exists app.api_key_shape cascade;
create type app.api_key_shape as (
  id uuid, location_id uuid, label text, key_prefix text, scopes text[], created_at text,
  last_used_at text, revoked_at text);
comment on type app.api_key_shape is E'The fields of the API''s api key record, in order.';

create or replace function app.api_key_js(k app.api_keys) returns json
  language sql stable parallel safe
as $$
  select to_json(row(
    k.id, k.location_id, k.label, k.key_prefix, k.scopes, app.iso(k.created_at),
    app.iso(k.last_used_at), app.iso(k.revoked_at))::app.api_key_shape)
$$;
comment on function app.api_key_js(app.api_keys) is E'API key listing record as json text: never the token or its hash.';

create or replace function app.api_key_json(k app.api_keys) returns jsonb
  language sql stable parallel safe
as $$ select app.api_key_js(k)::jsonb $$;
comment on function app.api_key_json(app.api_keys) is E'API key listing record: never the token or its hash.';

-- ---------------------------------------------------------------------------------------------
-- app.authorize, same checks in the same order (401, 404, 403): the location query runs only
-- when a location is named (GET /me names none), and the tenant is set by an assignment, which
-- PL/pgSQL evaluates as a simple expression (PERFORM always starts an executor).
/*
 * The single entry of every token request. SECURITY DEFINER (owned by switchboard_system)
 * because the token's key must be found before any tenant is known; it then pins the tenant
 * for the rest of the transaction, so the calling function runs under RLS as that location.
 * Order of checks: token (401), location (404, the same for missing and foreign), scope (403).
 */
create or replace function app.authorize(token_hash text, location_ref text, scope text) returns app.auth
  language plpgsql volatile security definer
  set search_path to pg_catalog, public, pg_temp
as $$
declare
  k app.api_keys;
  ignored text;
begin
  select * into k from app.api_keys
   where api_keys.token_hash = authorize.token_hash and revoked_at is null;
  if not found then
    perform app.raise('SB401', 'Missing, malformed, unknown or revoked bearer token');
  end if;
  if location_ref is not null then
    if not exists (
      select 1 from app.locations l
       where l.id = k.location_id and (l.id::text = lower(location_ref) or l.slug = location_ref)) then
      perform app.raise('SB404', 'Location not found');
    end if;
  end if;
  if scope is not null and not scope = any (k.scopes) then
    perform app.raise('SB403', format('This token lacks the required scope %s', scope),
                      jsonb_build_object('required_scope', scope));
  end if;
  if k.last_used_at is null or k.last_used_at < now() - interval '60 seconds' then
    update app.api_keys set last_used_at = now() where id = k.id;
  end if;
  ignored := set_config('app.location_id', k.location_id::text, true);
  return row(k.id, k.location_id, k.scopes)::app.auth;
end
$$;
alter function app.authorize(text, text, text) owner to switchboard_system;
comment on function app.authorize(text, text, text) is
  E'Authenticates a token hash, checks location and scope, and sets app.location_id for the transaction.';

-- ---------------------------------------------------------------------------------------------
-- GET /me answers json (nothing to re-print).
drop function if exists api.me(text);
create function api.me(token_hash text) returns json
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, null, null);
begin
  return (select json_build_object(
            'api_key', app.api_key_js(k),
            'location', app.location_js(l),
            'scopes', to_json(a.scopes))
            from app.api_keys k join app.locations l on l.id = k.location_id
           where k.id = a.key_id);
end
$$;
comment on function api.me(text) is E'GET /me: the calling key, its location and scopes. No scope needed.';
grant execute on function api.me(text) to switchboard_api;

-- ---------------------------------------------------------------------------------------------
-- Lists. Each returns (data json, next_cursor text): data is the page (at most `limit` rows,
-- newest first), next_cursor the cursor of its last row when more follow. Rows are read in index
-- order with one row more than the page; row_number() marks the page's last row, the only one
-- whose cursor is encoded.

drop function if exists api.calls_list(text, text, jsonb, jsonb);
create function api.calls_list(token_hash text, location_ref text, filters jsonb, page jsonb,
                               out data json, out next_cursor text)
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'calls:read');
  lim int := app.page_limit(page);
  after app.page_cursor := app.page_after(page);
  f_outcome text := filters ->> 'outcome';
  f_from timestamptz := (filters ->> 'from')::timestamptz;
  f_to timestamptz := (filters ->> 'to')::timestamptz;
  f_emergency boolean := (filters ->> 'is_emergency')::boolean;
begin
  select coalesce(json_agg(p.j order by p.n) filter (where p.n <= lim), '[]'),
         case when max(p.n) > lim then min(app.cursor_encode(p.created_at, p.id)) filter (where p.n = lim) end
    into data, next_cursor
    from (select app.call_summary_js(c) as j, c.created_at, c.id,
                 row_number() over (order by c.created_at desc, c.id desc) as n
            from app.calls c
           where c.location_id = a.location_id
             and app.before_cursor(c.created_at, c.id, after)
             and (f_outcome is null or c.outcome = f_outcome)
             and (f_from is null or c.started_at >= f_from)
             and (f_to is null or c.started_at < f_to)
             and (f_emergency is null or c.is_emergency = f_emergency)
           order by c.created_at desc, c.id desc limit lim + 1) p;
end
$$;
comment on function api.calls_list(text, text, jsonb, jsonb) is
  E'GET calls: summaries, newest first; filters { outcome, from, to (started_at, to exclusive), is_emergency }. Returns the page (data) and the next cursor.';
grant execute on function api.calls_list(text, text, jsonb, jsonb) to switchboard_api;

drop function if exists api.leads_list(text, text, text, jsonb);
create function api.leads_list(token_hash text, location_ref text, status text, page jsonb,
                               out data json, out next_cursor text)
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'leads:read');
  lim int := app.page_limit(page);
  after app.page_cursor := app.page_after(page);
begin
  select coalesce(json_agg(p.j order by p.n) filter (where p.n <= lim), '[]'),
         case when max(p.n) > lim then min(app.cursor_encode(p.created_at, p.id)) filter (where p.n = lim) end
    into data, next_cursor
    from (select app.lead_js(l) as j, l.created_at, l.id,
                 row_number() over (order by l.created_at desc, l.id desc) as n
            from app.leads l
           where l.location_id = a.location_id
             and (leads_list.status is null or l.status = leads_list.status)
             and app.before_cursor(l.created_at, l.id, after)
           order by l.created_at desc, l.id desc limit lim + 1) p;
end
$$;
comment on function api.leads_list(text, text, text, jsonb) is E'GET leads[?status=]: newest first. Returns the page (data) and the next cursor.';
grant execute on function api.leads_list(text, text, text, jsonb) to switchboard_api;

drop function if exists api.bookings_list(text, text, text, jsonb);
create function api.bookings_list(token_hash text, location_ref text, status text, page jsonb,
                                  out data json, out next_cursor text)
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'bookings:read');
  lim int := app.page_limit(page);
  after app.page_cursor := app.page_after(page);
begin
  select coalesce(json_agg(p.j order by p.n) filter (where p.n <= lim), '[]'),
         case when max(p.n) > lim then min(app.cursor_encode(p.created_at, p.id)) filter (where p.n = lim) end
    into data, next_cursor
    from (select app.booking_js(b) as j, b.created_at, b.id,
                 row_number() over (order by b.created_at desc, b.id desc) as n
            from app.bookings b
           where b.location_id = a.location_id
             and (bookings_list.status is null or b.status = bookings_list.status)
             and app.before_cursor(b.created_at, b.id, after)
           order by b.created_at desc, b.id desc limit lim + 1) p;
end
$$;
comment on function api.bookings_list(text, text, text, jsonb) is E'GET bookings[?status=]: newest first. Returns the page (data) and the next cursor.';
grant execute on function api.bookings_list(text, text, text, jsonb) to switchboard_api;

drop function if exists api.faqs_list(text, text, jsonb);
create function api.faqs_list(token_hash text, location_ref text, page jsonb,
                              out data json, out next_cursor text)
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'faqs:read');
  lim int := app.page_limit(page);
  after app.page_cursor := app.page_after(page);
begin
  select coalesce(json_agg(p.j order by p.n) filter (where p.n <= lim), '[]'),
         case when max(p.n) > lim then min(app.cursor_encode(p.created_at, p.id)) filter (where p.n = lim) end
    into data, next_cursor
    from (select app.faq_js(f) as j, f.created_at, f.id,
                 row_number() over (order by f.created_at desc, f.id desc) as n
            from app.faqs f
           where f.location_id = a.location_id and app.before_cursor(f.created_at, f.id, after)
           order by f.created_at desc, f.id desc limit lim + 1) p;
end
$$;
comment on function api.faqs_list(text, text, jsonb) is E'GET faqs: newest first. Returns the page (data) and the next cursor.';
grant execute on function api.faqs_list(text, text, jsonb) to switchboard_api;

drop function if exists api.pricebook_list(text, text, jsonb);
create function api.pricebook_list(token_hash text, location_ref text, page jsonb,
                                   out data json, out next_cursor text)
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'pricebook:read');
  lim int := app.page_limit(page);
  after app.page_cursor := app.page_after(page);
begin
  select coalesce(json_agg(x.j order by x.n) filter (where x.n <= lim), '[]'),
         case when max(x.n) > lim then min(app.cursor_encode(x.created_at, x.id)) filter (where x.n = lim) end
    into data, next_cursor
    from (select app.pricebook_item_js(p) as j, p.created_at, p.id,
                 row_number() over (order by p.created_at desc, p.id desc) as n
            from app.pricebook_items p
           where p.location_id = a.location_id and app.before_cursor(p.created_at, p.id, after)
           order by p.created_at desc, p.id desc limit lim + 1) x;
end
$$;
comment on function api.pricebook_list(text, text, jsonb) is E'GET pricebook: newest first. Returns the page (data) and the next cursor.';
grant execute on function api.pricebook_list(text, text, jsonb) to switchboard_api;

drop function if exists api.integrations_list(text, text, jsonb);
create function api.integrations_list(token_hash text, location_ref text, page jsonb,
                                      out data json, out next_cursor text)
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'integrations:read');
  lim int := app.page_limit(page);
  after app.page_cursor := app.page_after(page);
begin
  select coalesce(json_agg(p.j order by p.n) filter (where p.n <= lim), '[]'),
         case when max(p.n) > lim then min(app.cursor_encode(p.created_at, p.id)) filter (where p.n = lim) end
    into data, next_cursor
    from (select app.integration_js(i) as j, i.created_at, i.id,
                 row_number() over (order by i.created_at desc, i.id desc) as n
            from app.integrations i
           where i.location_id = a.location_id and app.before_cursor(i.created_at, i.id, after)
           order by i.created_at desc, i.id desc limit lim + 1) p;
end
$$;
comment on function api.integrations_list(text, text, jsonb) is
  E'GET integrations: connected and disconnected, newest first. Returns the page (data) and the next cursor.';
grant execute on function api.integrations_list(text, text, jsonb) to switchboard_api;

drop function if exists api.members_list(text, text, jsonb);
create function api.members_list(token_hash text, location_ref text, page jsonb,
                                 out data json, out next_cursor text)
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'members:read');
  lim int := app.page_limit(page);
  after app.page_cursor := app.page_after(page);
begin
  select coalesce(json_agg(p.j order by p.n) filter (where p.n <= lim), '[]'),
         case when max(p.n) > lim then min(app.cursor_encode(p.created_at, p.id)) filter (where p.n = lim) end
    into data, next_cursor
    from (select app.member_js(m) as j, m.created_at, m.id,
                 row_number() over (order by m.created_at desc, m.id desc) as n
            from app.members m
           where m.location_id = a.location_id and app.before_cursor(m.created_at, m.id, after)
           order by m.created_at desc, m.id desc limit lim + 1) p;
end
$$;
comment on function api.members_list(text, text, jsonb) is E'GET members: newest first. Returns the page (data) and the next cursor.';
grant execute on function api.members_list(text, text, jsonb) to switchboard_api;

drop function if exists api.locations_list(text, jsonb);
create function api.locations_list(token_hash text, page jsonb, out data json, out next_cursor text)
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, null, 'locations:read');
  lim int := app.page_limit(page);
  after app.page_cursor := app.page_after(page);
begin
  select coalesce(json_agg(p.j order by p.n) filter (where p.n <= lim), '[]'),
         case when max(p.n) > lim then min(app.cursor_encode(p.created_at, p.id)) filter (where p.n = lim) end
    into data, next_cursor
    from (select app.location_js(l) as j, l.created_at, l.id,
                 row_number() over (order by l.created_at desc, l.id desc) as n
            from app.locations l
           where app.before_cursor(l.created_at, l.id, after)
           order by l.created_at desc, l.id desc limit lim + 1) p;
end
$$;
comment on function api.locations_list(text, jsonb) is
  E'GET /locations: the locations the token can reach (its own; RLS shows no other). Returns the page (data) and the next cursor.';
grant execute on function api.locations_list(text, jsonb) to switchboard_api;

drop function if exists api.api_keys_list(text, text, jsonb);
create function api.api_keys_list(token_hash text, location_ref text, page jsonb, out data json, out next_cursor text)
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'api_keys:read');
  lim int := app.page_limit(page);
  after app.page_cursor := app.page_after(page);
begin
  select coalesce(json_agg(p.j order by p.n) filter (where p.n <= lim), '[]'),
         case when max(p.n) > lim then min(app.cursor_encode(p.created_at, p.id)) filter (where p.n = lim) end
    into data, next_cursor
    from (select app.api_key_js(k) as j, k.created_at, k.id,
                 row_number() over (order by k.created_at desc, k.id desc) as n
            from app.api_keys k
           where app.before_cursor(k.created_at, k.id, after)
           order by k.created_at desc, k.id desc limit lim + 1) p;
end
$$;
comment on function api.api_keys_list(text, text, jsonb) is
  E'GET /locations/{id}/api-keys: listing records only. Returns the page (data) and the next cursor.';
grant execute on function api.api_keys_list(text, text, jsonb) to switchboard_api;

-- =============================================================================================
-- Performance (issue 12): ingestion. Fewer writes per finalised call, same results.
--  * A call the service has not seen yet is inserted with its platform facts in one INSERT
--    (was: an empty row, then an UPDATE with the facts): one row version and one set of index
--    entries fewer. A concurrent delivery of the same call still meets ON CONFLICT and carries on
--    as an update of the row the other one inserted.
--  * The finalize_call job is removed only when one can exist, i.e. when the call was at
--    platform_status 'ended' before this webhook (the job is queued by call_ended without
--    analysis and nothing else): graphile_worker.remove_job is a SQL function planned afresh on
--    every call, a fixed cost per finalisation for a job that almost never exists.
--  * call.emergency's emergency_fired_at is set by the finalising UPDATE itself (was a second
--    UPDATE of the row).
-- =============================================================================================

create or replace function app.voice_finalize(c app.calls, analysis jsonb) returns app.calls
  language plpgsql volatile
as $$
declare
  cad jsonb := coalesce(analysis -> 'custom_analysis_data', '{}');
  v_outcome text := cad ->> 'outcome';
  urgency int := least(greatest(coalesce((cad ->> 'urgency_level')::int, 0), 0), 5);
  voicemail boolean := coalesce(c.in_voicemail, false) or c.disconnection_reason = 'voicemail_reached';
  captured boolean := cad ?| array['caller_name', 'caller_address', 'caller_email', 'service_type',
                                   'issue_summary', 'appointment_date'];
  alert boolean;
  emergency boolean;
  fire boolean;
  v_customer_id uuid;
  inserted boolean;
  known_name text;
  l app.leads;
begin
  if v_outcome is null or v_outcome not in ('booked', 'transferred', 'lead', 'spam', 'dropped', 'other') then
    v_outcome := case
      when c.disconnection_reason in ('call_transfer', 'transfer_bridged') then 'transferred'
      when c.disconnection_reason in ('marked_as_spam', 'scam_detected') then 'spam'
      when voicemail then 'lead'
      when c.disconnection_reason = 'user_hangup' and c.duration_sec < 10 and not captured then 'dropped'
      else 'other' end;
  end if;
  -- alert: the call.emergency event; emergency: the stored flag (the alert, or the analysis flag).
  alert := urgency = 5 or v_outcome = 'transferred';
  emergency := alert or coalesce((cad ->> 'is_emergency')::boolean, false);
  -- call.emergency fires once per call (a warm transfer may have fired it already).
  fire := alert and c.emergency_fired_at is null;

  if c.caller_phone is not null and v_outcome <> 'spam' then
    insert into app.customers as t (location_id, phone, name, email, address, first_call_at, last_call_at, call_count)
    values (c.location_id, c.caller_phone, left(cad ->> 'caller_name', 200), cad ->> 'caller_email',
            left(cad ->> 'caller_address', 500), coalesce(c.started_at, now()), coalesce(c.started_at, now()), 1)
    on conflict (location_id, phone) do update
       set name = coalesce(excluded.name, t.name),
           email = coalesce(excluded.email, t.email),
           address = coalesce(excluded.address, t.address),
           first_call_at = least(t.first_call_at, excluded.first_call_at),
           last_call_at = greatest(t.last_call_at, excluded.last_call_at),
           call_count = t.call_count + 1
    returning t.id, (t.xmax = 0), t.name into v_customer_id, inserted, known_name;
  end if;

  update app.calls set
    outcome = v_outcome,
    urgency_level = urgency,
    is_emergency = emergency or calls.emergency_fired_at is not null,
    emergency_fired_at = case when fire then now() else calls.emergency_fired_at end,
    customer_id = v_customer_id,
    is_returning_customer = coalesce(not inserted, false),
    caller_name = coalesce(left(cad ->> 'caller_name', 200), known_name),
    caller_address = left(cad ->> 'caller_address', 500),
    caller_email = cad ->> 'caller_email',
    service_type = left(cad ->> 'service_type', 200),
    issue_summary = left(cad ->> 'issue_summary', 10000),
    detected_intent = left(cad ->> 'detected_intent', 200),
    estimated_value = (cad ->> 'estimated_value')::numeric,
    appointment_date = (cad ->> 'appointment_date')::date,
    appointment_time = case when cad ->> 'appointment_time' ~ '^([01][0-9]|2[0-3]):[0-5][0-9]$' then cad ->> 'appointment_time' end,
    finalized_at = now()
  where id = c.id
  returning * into c;

  if v_outcome in ('lead', 'booked', 'transferred') or (voicemail and v_outcome <> 'spam') then
    insert into app.leads (location_id, call_id, customer_id, name, phone, email, address, service_type,
                           urgency_level, estimated_value, status, notes)
    values (c.location_id, c.id, c.customer_id, c.caller_name, c.caller_phone,
            case when c.caller_email ~ '^[^@\s]+@[^@\s]+\.[^@\s]+$' and length(c.caller_email) <= 320 then c.caller_email end,
            c.caller_address, c.service_type, c.urgency_level, c.estimated_value,
            case when v_outcome = 'booked' then 'booked' else 'new' end, c.issue_summary)
    returning * into l;
  end if;

  if v_outcome = 'booked' and c.appointment_date is not null then
    insert into app.bookings (location_id, call_id, lead_id, customer_id, status, scheduled_date,
                              scheduled_time, service_type, address, notes)
    values (c.location_id, c.id, l.id, c.customer_id, 'scheduled', c.appointment_date,
            c.appointment_time, c.service_type, c.caller_address, c.issue_summary);
  end if;

  if fire then
    perform app.emit(c.location_id, 'call.emergency', app.call_summary_json(c) || jsonb_build_object(
      'reason', case when v_outcome = 'transferred' and urgency < 5 then 'warm_transfer' else 'urgency' end,
      'lead_id', l.id));
  end if;

  perform app.emit(c.location_id, 'call.ended', app.call_summary_json(c));
  return c;
end
$$;
comment on function app.voice_finalize(app.calls, jsonb) is
  E'Settles a call once (outcome from custom_analysis_data, else from disconnection_reason), upserts the customer, creates lead/booking, fires call.emergency (once, only for urgency 5 or a transfer; the analysis is_emergency flag only marks the row) and call.ended. Caller holds the row lock (and removes a queued finalize_call job, see app.voice_post_call).';

create or replace function app.voice_post_call(payload jsonb) returns jsonb
  language plpgsql volatile security definer
  set search_path to pg_catalog, public, pg_temp
as $$
declare
  ev text := payload ->> 'event';
  pc jsonb := payload -> 'call';
  meta jsonb := case when jsonb_typeof(pc -> 'metadata') = 'object' then pc -> 'metadata' end;
  analysis jsonb := case when jsonb_typeof(pc -> 'call_analysis') = 'object' and pc -> 'call_analysis' <> '{}' then pc -> 'call_analysis' end;
  dir text := coalesce(pc ->> 'direction', 'inbound');
  caller app.e164 := app.voice_e164(case when dir = 'outbound' then pc ->> 'to_number' else pc ->> 'from_number' end);
  ours text := case when dir = 'outbound' then pc ->> 'from_number' else pc ->> 'to_number' end;
  uuid_re constant text := '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$';
  phone_loc uuid;
  loc uuid;
  row_id uuid;
  c app.calls;
  nc app.calls;
  prev_status text;
  new_status text := case ev when 'call_ended' then 'ended' when 'call_analyzed' then 'analyzed' else 'started' end;
begin
  if ev not in ('call_started', 'call_ended', 'call_analyzed', 'transfer_started') then
    return jsonb_build_object('status', 'ignored');
  end if;

  if ours is not null then
    select id into phone_loc from app.locations where service_phone = ours;
  end if;
  if meta ->> 'call_row_id' ~ uuid_re then
    select id, location_id into row_id, loc from app.calls where id = (meta ->> 'call_row_id')::uuid;
    if phone_loc is not null and loc is distinct from phone_loc then
      row_id := null;
    end if;
  end if;
  loc := coalesce(phone_loc, loc);
  if loc is null and meta ->> 'location_id' ~ uuid_re then
    select id into loc from app.locations where id = (meta ->> 'location_id')::uuid;
  end if;
  if loc is null then
    perform app.raise('SB404', 'No location matches this call', jsonb_build_object('call_id', pc ->> 'call_id'));
  end if;
  perform set_config('app.location_id', loc::text, true);

  loop
    if row_id is not null then
      select * into c from app.calls where id = row_id for update;
    else
      select * into c from app.calls where location_id = loc and platform_call_id = pc ->> 'call_id' for update;
    end if;
    prev_status := c.platform_status;

    -- Platform facts: newer values win, absent ones keep what we have. Nothing is written when a
    -- replay brings nothing new, so replays change nothing (not even updated_at). For a call not
    -- seen before, c is all nulls and nc is the new row.
    nc := c;
    if nc.platform_call_id like 'rejected:%' then nc.platform_call_id := pc ->> 'call_id'; end if;
    nc.direction := dir;
    nc.caller_phone := coalesce(caller, c.caller_phone);
    nc.to_phone := coalesce(pc ->> 'to_number', c.to_phone);
    nc.agent_id := coalesce(pc ->> 'agent_id', c.agent_id);
    nc.started_at := coalesce(app.voice_ms(pc -> 'start_timestamp'), c.started_at);
    nc.ended_at := coalesce(app.voice_ms(pc -> 'end_timestamp'), c.ended_at);
    nc.duration_sec := coalesce(
      case when nc.started_at is not null and nc.ended_at is not null
           then greatest(round(extract(epoch from nc.ended_at - nc.started_at)), 0)::int end,
      case when jsonb_typeof(pc -> 'duration_ms') = 'number' then round((pc ->> 'duration_ms')::numeric / 1000)::int end,
      c.duration_sec);
    nc.disconnection_reason := coalesce(pc ->> 'disconnection_reason', c.disconnection_reason);
    nc.transcript := coalesce(pc ->> 'transcript', c.transcript);
    nc.transcript_turns := coalesce(case when jsonb_typeof(pc -> 'transcript_object') = 'array' then pc -> 'transcript_object' end, c.transcript_turns);
    nc.recording_url := coalesce(pc ->> 'recording_url', c.recording_url);
    nc.public_log_url := coalesce(pc ->> 'public_log_url', c.public_log_url);
    nc.metadata := coalesce(meta, c.metadata);
    nc.call_summary := coalesce(analysis ->> 'call_summary', c.call_summary);
    nc.user_sentiment := coalesce(analysis ->> 'user_sentiment', c.user_sentiment);
    nc.in_voicemail := coalesce((analysis ->> 'in_voicemail')::boolean, c.in_voicemail);
    if app.voice_status_rank(new_status) > app.voice_status_rank(c.platform_status) then
      nc.platform_status := new_status;
    end if;

    if c.id is not null then
      if nc is distinct from c then
        update app.calls t set
          platform_call_id = nc.platform_call_id, direction = nc.direction, caller_phone = nc.caller_phone,
          to_phone = nc.to_phone, agent_id = nc.agent_id, started_at = nc.started_at, ended_at = nc.ended_at,
          duration_sec = nc.duration_sec, disconnection_reason = nc.disconnection_reason,
          transcript = nc.transcript, transcript_turns = nc.transcript_turns, recording_url = nc.recording_url,
          public_log_url = nc.public_log_url, metadata = nc.metadata, call_summary = nc.call_summary,
          user_sentiment = nc.user_sentiment, in_voicemail = nc.in_voicemail, platform_status = nc.platform_status
        where t.id = c.id
        returning * into c;
      end if;
      exit;
    end if;

    insert into app.calls (location_id, platform_call_id, direction, caller_phone, to_phone, agent_id,
                           started_at, ended_at, duration_sec, disconnection_reason, transcript,
                           transcript_turns, recording_url, public_log_url, metadata, call_summary,
                           user_sentiment, in_voicemail, platform_status)
    values (loc, pc ->> 'call_id', nc.direction, nc.caller_phone, nc.to_phone, nc.agent_id,
            nc.started_at, nc.ended_at, nc.duration_sec, nc.disconnection_reason, nc.transcript,
            nc.transcript_turns, nc.recording_url, nc.public_log_url, coalesce(nc.metadata, '{}'), nc.call_summary,
            nc.user_sentiment, nc.in_voicemail, nc.platform_status)
    on conflict (location_id, platform_call_id) do nothing
    returning * into c;
    exit when c.id is not null;
    -- Another delivery of this call inserted it first: carry on as an update of that row.
    row_id := null;
  end loop;

  if c.finalized_at is null then
    if ev = 'transfer_started' and c.emergency_fired_at is null then
      update app.calls set is_emergency = true, emergency_fired_at = now() where id = c.id returning * into c;
      perform app.emit(loc, 'call.emergency', app.call_summary_json(c)
        || jsonb_build_object('reason', 'warm_transfer', 'lead_id', null));
    elsif ev = 'call_analyzed' or (ev = 'call_ended' and analysis is not null) then
      -- Settled now: a fallback finalize_call job exists only if call_ended without analysis came
      -- first (the call was at 'ended'); it has nothing left to do, so it is taken off the queue.
      if prev_status = 'ended' then
        perform app.dequeue('finalize_call:' || c.id);
      end if;
      c := app.voice_finalize(c, coalesce(analysis, '{}'));
    elsif ev = 'call_ended' and app.voice_status_rank(prev_status) < app.voice_status_rank('ended') then
      -- If call_analyzed never comes, settle the call from its disconnection reason later.
      perform app.enqueue('finalize_call', jsonb_build_object('call_id', c.id),
                          now() + interval '10 minutes', 'finalize_call:' || c.id, 5);
    end if;
  end if;

  return jsonb_build_object('call_id', c.id, 'platform_call_id', c.platform_call_id,
    'platform_status', c.platform_status, 'outcome', c.outcome, 'finalized', c.finalized_at is not null);
end
$$;
comment on function app.voice_post_call(jsonb) is
  E'Post-call webhook (call_started | call_ended | call_analyzed | transfer_started): routes by the dialled number first (then metadata call_row_id / location_id), inserts a new call with its facts or updates a known one idempotently on the platform call_id, fires call.emergency on a warm transfer, finalises on analysis (removing a queued finalize_call job) or schedules finalize_call 10 minutes after call_ended.';

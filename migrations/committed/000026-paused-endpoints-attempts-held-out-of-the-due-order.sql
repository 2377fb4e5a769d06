--! Previous: sha1:3a2f8ef3ae57e6d2e513c4319801a8dfdc956020
--! Hash: sha1:666a6a71119ac5b607809b2c5eab89895463f178
--! Message: paused endpoints attempts held out of the due order

-- ==== Performance after a realistic history: a paused endpoint's attempts held out of the due order ====
-- After a history the claim's first step walked a paused endpoint's backlog on every claim: its
-- attempts stay pending and sit at the head of the due order, so each walk reached its bound
-- (`deep`) with too few candidates and every claim of the drain ran the skip scan over all
-- endpoints with work (docs/performance.md, "The drain after a history"). Now:
-- 1. `held`: a pending attempt of a paused or disabled endpoint, still pending for every reader
--    (the API, retention, DELETE of the endpoint), but in neither due index, so no claim walks it.
-- 2. The claim marks them: when its walk was cut short and inactive endpoints exist, it holds the
--    unleased attempts of those it can share-lock and still sees inactive (SKIP LOCKED: an endpoint
--    being changed is left for the next claim). Pausing itself writes nothing more.
-- 3. Resuming clears them: an AFTER trigger on active false -> true, in the resume's own
--    transaction. The share lock orders the two: a resume that started first is skipped by the
--    claim; one that starts later waits for the claim and then sees its marks. Any attempt written
--    later (fan-out, retry, a lapsed lease) starts unheld and the claim's endpoint check still
--    keeps it from being sent while the endpoint is inactive.

alter table app.webhook_deliveries add column if not exists held boolean not null default false;
comment on column app.webhook_deliveries.held is E'A pending attempt of a paused or disabled endpoint, out of the due indexes: set by the claim that walked past it, cleared when the endpoint is active again (docs/performance.md, "The drain after a history").';

drop index if exists app.webhook_deliveries_ready_idx;
create index webhook_deliveries_ready_idx on app.webhook_deliveries (next_attempt_at, id) include (endpoint_id, location_id)
  where status = 'pending' and lease_expires_at is null and not held;
comment on index app.webhook_deliveries_ready_idx is E'Unleased pending attempts not held, in due order, with their endpoint and location: the engine''s claim walks it index-only, passing over the attempts of endpoints that cannot take one.';
drop index if exists app.webhook_deliveries_ready_endpoint_idx;
create index webhook_deliveries_ready_endpoint_idx on app.webhook_deliveries (endpoint_id, next_attempt_at, id)
  where status = 'pending' and lease_expires_at is null and not held;
comment on index app.webhook_deliveries_ready_endpoint_idx is E'Unleased pending attempts not held, per endpoint in due order: the claim''s skip scan over endpoints with work, and holding an inactive endpoint''s attempts.';
create index if not exists webhook_deliveries_held_idx on app.webhook_deliveries (endpoint_id) where held;
comment on index app.webhook_deliveries_held_idx is E'Held attempts per endpoint: cleared when the endpoint is active again.';

create or replace function app.tg_webhook_endpoints__release_held() returns trigger
  language plpgsql
as $$
begin
  update app.webhook_deliveries d set held = false where d.endpoint_id = new.id and d.held;
  return null;
end
$$;
comment on function app.tg_webhook_endpoints__release_held() is E'active false → true: the endpoint''s held attempts are due again (their next_attempt_at unchanged).';
drop trigger if exists _300_release_held on app.webhook_endpoints;
create trigger _300_release_held after update of active on app.webhook_endpoints
  for each row when (new.active and not old.active) execute function app.tg_webhook_endpoints__release_held();

create or replace function app.webhook_claim_batch(owner text, max_claims integer, max_degraded integer, per_endpoint integer, lease_ms integer)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
declare
  t timestamptz;
  win int := greatest(max_claims * 4, 64);
  deep int := greatest(max_claims * 64, 1024);
  scanned int;
  walked int;
  skip uuid[];
  inactive uuid[];
  excl uuid[];
  busy jsonb;
  c_ids uuid[];
  c_eps uuid[];
  c_locs uuid[];
  c_dues timestamptz[];
  c_degs boolean[];
  c_rns int[];
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
    -- Candidates: each endpoint's first (per_endpoint - busy) due attempts, in two steps.
    -- 1. The first `win` due attempts in due order of endpoints that can take one: the attempts of
    --    endpoints at their cap and of paused or disabled endpoints are passed over inside the
    --    index-only walk of webhook_deliveries_ready_idx (it carries endpoint_id), up to `deep`
    --    entries. A paused endpoint's backlog sits at the head of the due order until a claim whose
    --    walk it cut short marks it held (below), which takes it out of both due indexes
    --    (docs/performance.md, "The drain after a history").
    -- 2. Only when that walk was cut short (a full window, or `deep` entries walked) and still gave
    --    less than a batch: the other endpoints with unleased attempts, found by a skip scan of
    --    webhook_deliveries_ready_endpoint_idx, one probe per endpoint. So no claim walks the
    --    attempts queued behind endpoints at their cap without bound, and the common case stays one
    --    short scan. The probes order by all three columns of that index, which only it returns in order.
    inactive := array(select e.id from app.webhook_endpoints e where not e.active);
    skip := excl || inactive;
    with cand as (
      select h.id, h.endpoint_id, h.location_id, h.next_attempt_at, h.pos
        from (select d.id, d.endpoint_id, d.location_id, d.next_attempt_at,
                     row_number() over (order by d.next_attempt_at, d.id) as pos
                from app.webhook_deliveries d
               where d.status = 'pending' and d.lease_expires_at is null and not d.held and d.next_attempt_at <= t
               order by d.next_attempt_at, d.id
               limit deep) h
       where not (h.endpoint_id = any (skip)) or h.pos = deep  -- the last entry walked tells the walk was cut short
       order by h.next_attempt_at, h.id
       limit win
    ), per_ep as (
      select c.*, e.failure_count > 0 as degraded,
             row_number() over (partition by c.endpoint_id order by c.next_attempt_at, c.id)::int as rn
        from cand c
        join app.webhook_endpoints e on e.id = c.endpoint_id and e.active and not (e.id = any (excl))
    )
    select (select count(*) from cand)::int, (select coalesce(max(pos), 0) from cand)::int,
           coalesce(array_agg(p.id), '{}'), coalesce(array_agg(p.endpoint_id), '{}'),
           coalesce(array_agg(p.location_id), '{}'), coalesce(array_agg(p.next_attempt_at), '{}'),
           coalesce(array_agg(p.degraded), '{}'), coalesce(array_agg(p.rn), '{}')
      into scanned, walked, c_ids, c_eps, c_locs, c_dues, c_degs, c_rns
      from per_ep p
     where p.rn <= per_endpoint - coalesce((busy ->> p.endpoint_id::text)::int, 0);

    -- A walk cut short may have been filled by paused or disabled endpoints' attempts: they are held
    -- (out of both due indexes) so that no later claim walks them again. Each endpoint is
    -- share-locked and seen inactive first, so a resume (which clears held in its own transaction,
    -- app.tg_webhook_endpoints__release_held) waits for this claim or is skipped by it.
    if walked >= deep and cardinality(inactive) > 0 then
      with e as (
        select w.id from app.webhook_endpoints w where w.id = any (inactive) and not w.active
         order by w.id for share skip locked
      )
      update app.webhook_deliveries d set held = true
        from e
       where d.endpoint_id = e.id and d.status = 'pending' and d.lease_expires_at is null and not d.held;
    end if;

    if (scanned >= win or walked >= deep) and cardinality(c_ids) < max_claims then
      excl := excl || array(select distinct x from unnest(c_eps) x);
      with recursive eps as (
        (select d.endpoint_id from app.webhook_deliveries d
          where d.status = 'pending' and d.lease_expires_at is null and not d.held and d.endpoint_id is not null
          order by d.endpoint_id, d.next_attempt_at, d.id limit 1)
        union all
        select (select d.endpoint_id from app.webhook_deliveries d
                 where d.status = 'pending' and d.lease_expires_at is null and not d.held and d.endpoint_id > eps.endpoint_id
                 order by d.endpoint_id, d.next_attempt_at, d.id limit 1)
          from eps where eps.endpoint_id is not null
      ), per_ep as (
        select x.id, e.id as endpoint_id, x.location_id, x.next_attempt_at, e.failure_count > 0 as degraded,
               row_number() over (partition by e.id order by x.next_attempt_at, x.id)::int as rn
          from eps
          join app.webhook_endpoints e on e.id = eps.endpoint_id and e.active and not (e.id = any (excl))
          cross join lateral (
            select d.id, d.location_id, d.next_attempt_at from app.webhook_deliveries d
             where d.endpoint_id = e.id and d.status = 'pending' and d.lease_expires_at is null and not d.held
               and d.next_attempt_at <= t
             order by d.endpoint_id, d.next_attempt_at, d.id
             limit greatest(per_endpoint - coalesce((busy ->> e.id::text)::int, 0), 0)) x
      )
      select c_ids || coalesce(array_agg(p.id), '{}'), c_eps || coalesce(array_agg(p.endpoint_id), '{}'),
             c_locs || coalesce(array_agg(p.location_id), '{}'), c_dues || coalesce(array_agg(p.next_attempt_at), '{}'),
             c_degs || coalesce(array_agg(p.degraded), '{}'), c_rns || coalesce(array_agg(p.rn), '{}')
        into c_ids, c_eps, c_locs, c_dues, c_degs, c_rns
        from per_ep p;
    end if;

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
         and d.status = 'pending' and d.lease_expires_at is null and not d.held
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
   where d.status = 'pending' and d.lease_expires_at is null and not d.held and d.next_attempt_at > t;
  return jsonb_build_object('claims', coalesce(claims, '[]'::jsonb), 'next_due_at', app.iso(next_due));
end
$function$;comment on function app.webhook_claim_batch(text,integer,integer,integer,integer) is E'Delivery engine: leases up to max_claims due attempts (per-endpoint cap across workers, fair across endpoints and locations, failing endpoints capped at max_degraded) and returns what to send; holds the attempts of inactive endpoints its walk was cut short by. SECURITY DEFINER (switchboard_system): the worker is not a tenant.';

-- The queue gauge counts due attempts of active endpoints: held ones are never among them, and
-- saying so keeps the count on the due index.
create or replace function app.metrics_queues()
 RETURNS json
 LANGUAGE plpgsql
 STABLE
AS $function$
declare
  t timestamptz := clock_timestamp();
  hooks json;
  notes json;
  eps json;
  jobs json := null;
begin
  -- Due now and unleased, on an active endpoint (a paused endpoint's attempts wait on purpose):
  -- webhook_deliveries_ready_idx.
  select json_build_object('depth', count(*), 'oldest_due_age_s', coalesce(extract(epoch from t - min(d.next_attempt_at)), 0),
                           'leased', (select count(*) from app.webhook_deliveries l
                                       where l.status = 'pending' and l.lease_expires_at is not null))
    into hooks
    from app.webhook_deliveries d
    join app.webhook_endpoints e on e.id = d.endpoint_id and e.location_id = d.location_id and e.active
   where d.status = 'pending' and d.lease_expires_at is null and not d.held and d.next_attempt_at <= t;
  -- Per channel: notifications_due_idx; every channel appears, with 0 when nothing waits.
  select json_agg(json_build_object('channel', c.channel, 'depth', coalesce(n.depth, 0),
                                    'oldest_due_age_s', coalesce(extract(epoch from t - n.oldest), 0)) order by c.channel)
    into notes
    from unnest(app.notification_channels()) c(channel)
    left join (select n.channel, count(*) as depth, min(n.next_attempt_at) as oldest
                 from app.notifications n
                where n.status = 'pending' and n.lease_expires_at is null and n.next_attempt_at <= t
                group by n.channel) n on n.channel = c.channel;
  select json_build_object('disabled', count(*) filter (where e.disabled_at is not null),
                           'failing', count(*) filter (where e.active and e.failure_count > 0))
    into eps
    from app.webhook_endpoints e;
  -- graphile-worker's table exists once a worker has started: its jobs_main_index.
  if to_regclass('graphile_worker._private_jobs') is not null then
    execute $q$
      select json_build_object('depth', count(*), 'oldest_due_age_s', coalesce(extract(epoch from $1 - min(j.run_at)), 0))
        from graphile_worker._private_jobs j
       where j.is_available and j.run_at <= $1$q$
      into jobs using t;
  end if;
  return json_build_object('webhooks', hooks, 'notifications', notes, 'endpoints', eps, 'jobs', jobs);
end
$function$;
comment on function app.metrics_queues() is E'Queue depth (due, unleased) and age of the oldest due item per lane (webhooks, notifications per channel, graphile-worker jobs), leased webhook attempts, and endpoints disabled and failing: the gauges of one metrics scrape. Called by the owner role (its system_all policies see every location; it owns graphile_worker).';
revoke execute on function app.metrics_queues() from public;

--! Previous: sha1:666a6a71119ac5b607809b2c5eab89895463f178
--! Hash: sha1:08bff989e1ca34c9fa795607dd7bbb1c1c2db76d
--! Message: delivery claim and record per attempt

-- ==== Performance after a realistic history: the claim's lease update reads its endpoints once ====
-- The lease update joined app.webhook_endpoints for each attempt it leased; under the claim's
-- generic plan that was a scan of the whole endpoints table per attempt (32 scans of 183 rows
-- for a claim of 32 in the bench, 256 of the update's buffers). The picked endpoints are now
-- share-locked, in id order as before, and read in one materialised step that the update joins.

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
    -- The picked endpoints, share-locked in id order and still active, read once: the lease
    -- update joins this handful of rows (before, a generic plan scanned the endpoints table once
    -- for every attempt leased).
    with ep as materialized (
      select e.id, e.url, e.failure_count, e.secret, e.previous_secret, e.previous_secret_expires_at
        from app.webhook_endpoints e
       where e.id = any (picked_eps) and e.active
       order by e.id
         for share
    ), upd as (
      update app.webhook_deliveries d
         set lease_expires_at = t + make_interval(secs => lease_ms / 1000.0),
             lease_owner = owner,
             attempted_at = t,
             url = ep.url
        from ep
       where d.id = any (picked) and ep.id = d.endpoint_id
         and d.status = 'pending' and d.lease_expires_at is null and not d.held
      returning d.id, d.event_id, d.event, d.attempt, d.endpoint_id, d.location_id, ep.url, ep.failure_count,
                ep.secret, ep.previous_secret, ep.previous_secret_expires_at
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
$function$;

-- ==== Recording a batch of successes in one pass ====
-- app.webhook_record_batch ran app.webhook_record once per outcome: four statements and a
-- function call for each delivery, about 460 µs an attempt in the drain (pg_stat_statements,
-- docs/performance.md, "The drain after a history: the claim is the bound"). When every outcome of
-- the batch is a success (the drain's and the burst's common case) it now records them set-wise,
-- in the same lock order as one by one: the endpoints key-share-locked in id order, then the
-- attempts, then (at most once a second, or after failures) each endpoint's health, updated in id
-- order. A batch with any failure is recorded one by one as before (retries, health rules, alerts).
create or replace function app.webhook_record_batch(results jsonb, retry_delays integer[], disable_after_failures integer, disable_after_seconds integer)
 returns jsonb
 language plpgsql
 security definer
 set search_path to 'pg_catalog', 'public', 'pg_temp'
as $function$
declare
  r record;
  done jsonb := '[]';
  ids uuid[];
  recorded uuid[];
begin
  if not exists (select 1 from jsonb_array_elements(results) x
                  where not coalesce((x -> 'result' ->> 'ok')::boolean, false)) then
    ids := array(select (x ->> 'delivery_id')::uuid from jsonb_array_elements(results) x);
    perform 1 from app.webhook_endpoints e
     where e.id in (select w.endpoint_id from app.webhook_deliveries w where w.id = any (ids))
     order by e.id
       for key share;
    with res as (
      select (x ->> 'delivery_id')::uuid as id, x -> 'result' as result
        from jsonb_array_elements(results) x
    ), upd as (
      update app.webhook_deliveries w
         set status = 'delivered',
             response_status = (res.result ->> 'response_status')::int,
             response_body = res.result ->> 'response_body',
             error = res.result ->> 'error',
             duration_ms = (res.result ->> 'duration_ms')::int,
             attempted_at = coalesce((res.result ->> 'attempted_at')::timestamptz, w.attempted_at, now()),
             next_attempt_at = null,
             lease_expires_at = null,
             lease_owner = null
        from res
       where w.id = res.id and w.status = 'pending'
      returning w.id, w.endpoint_id
    )
    select coalesce(array_agg(u.id), '{}') into recorded from upd u;
    perform 1 from (
      select e.id from app.webhook_endpoints e
       where e.id in (select w.endpoint_id from app.webhook_deliveries w where w.id = any (recorded))
         and (e.failure_count <> 0 or e.last_success_at is null or e.last_success_at < now() - interval '1 second')
       order by e.id
         for no key update) x;
    update app.webhook_endpoints e set failure_count = 0, failing_since = null, last_success_at = now()
     where e.id in (select w.endpoint_id from app.webhook_deliveries w where w.id = any (recorded))
       and (e.failure_count <> 0 or e.last_success_at is null or e.last_success_at < now() - interval '1 second');
    select coalesce(jsonb_agg(case when x.id = any (recorded)
                                   then jsonb_build_object('delivery_id', x.id, 'status', 'delivered',
                                                           'next_delivery_id', null, 'disabled', false)
                              end order by x.endpoint_id, x.id::text), '[]')
      into done
      from (select (x ->> 'delivery_id')::uuid as id, x ->> 'endpoint_id' as endpoint_id from jsonb_array_elements(results) x) x;
    return done;
  end if;
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
$function$;
comment on function app.webhook_record_batch(jsonb,integer[],integer,integer) is E'Worker: records a batch of { delivery_id, endpoint_id, result }: a batch of successes in one pass (endpoints key-share-locked in id order, then the attempts, then the endpoints'' health at most once a second), otherwise app.webhook_record for each, in endpoint order.';

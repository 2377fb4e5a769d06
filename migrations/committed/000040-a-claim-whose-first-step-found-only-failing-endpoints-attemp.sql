--! Previous: sha1:0ca1f6ba40ed7c789aa79949c4d0a2f347ff8eff
--! Hash: sha1:9845ecd286bc2f4d103b78c212bbcfa77d9dfac4
--! Message: A claim whose first step found only failing endpoints' attempts beyond their share goes on to probe the other endpoints

-- A claim whose first step found only failing endpoints' attempts beyond their share (the
-- degraded half of a worker's slots taken) now goes on to its second step, the probe of the
-- other endpoints with unleased attempts; before, a failing backlog that filled the claim's
-- window kept every healthy endpoint waiting until that backlog was worked off
-- (test/webhooks/isolation.test.ts; docs/delivery-engine.md, "Claim").

CREATE OR REPLACE FUNCTION app.webhook_claim_batch(owner text, max_claims integer, max_degraded integer, per_endpoint integer, lease_ms integer)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
 SET plan_cache_mode TO 'force_generic_plan'
 SET enable_seqscan TO 'off'
 SET enable_bitmapscan TO 'off'
AS $function$
declare
  t timestamptz;
  win int := greatest(max_claims * 4, 64);
  deep int := greatest(max_claims * 64, 1024);
  scanned int;
  walked int;
  skip uuid[];
  inactive uuid[];
  hold_step constant int := 256;
  excl uuid[];
  moved uuid[];
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
    -- Held attempts of endpoints active again (resumed or re-enabled) are released, `hold_step`
    -- a claim, before the walk, so this claim can already take them. Each endpoint is share-locked
    -- (SKIP LOCKED) and seen active, so a pause in progress either waits for this claim or is
    -- skipped by it; an endpoint with nothing held costs one probe of webhook_deliveries_held_idx.
    with recursive held_eps as (
      (select d.endpoint_id from app.webhook_deliveries d where d.held order by d.endpoint_id limit 1)
      union all
      select (select d.endpoint_id from app.webhook_deliveries d
               where d.held and d.endpoint_id > h.endpoint_id order by d.endpoint_id limit 1)
        from held_eps h where h.endpoint_id is not null
    ), back as (
      select w.id from app.webhook_endpoints w
       where w.id in (select h.endpoint_id from held_eps h) and w.active
       order by w.id for share skip locked
    )
    -- The ids first, then the update by primary key: as `d.id in (select … limit …)` the update
    -- could be planned as a nested loop that ran the subquery's scan again for every row of the
    -- table, and the generic plan made while nothing was held did exactly that once a burst had
    -- doubled the table: one claim ran for a minute and a half (docs/performance.md, "the third round").
    select coalesce(array_agg(r.id), '{}') into moved
      from (select x.id from back b
              cross join lateral (select x.id from app.webhook_deliveries x
                                   where x.held and x.endpoint_id = b.id limit hold_step) x
             limit hold_step) r;
    if cardinality(moved) > 0 then
      update app.webhook_deliveries d set held = false where d.id = any (moved) and d.held;
    end if;
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

    -- A walk cut short may have been filled by paused or disabled endpoints' attempts: up to
    -- `hold_step` of them, first due first, are held (out of both due indexes) so that no later
    -- claim walks them again. Each endpoint is share-locked (SKIP LOCKED) and seen inactive first,
    -- so a resume in progress either waits for this claim or is skipped by it. Bounded both ways,
    -- holding and releasing cost a claim a few tens of milliseconds at most, and a resume writes
    -- one row whatever the backlog.
    if walked >= deep and cardinality(inactive) > 0 then
      with e as (
        select w.id from app.webhook_endpoints w where w.id = any (inactive) and not w.active
         order by w.id for share skip locked
      )
      select coalesce(array_agg(r.id), '{}') into moved
        from (select x.id from app.webhook_deliveries x
               where x.endpoint_id in (select e.id from e)
                 and x.status = 'pending' and x.lease_expires_at is null and not x.held
               order by x.endpoint_id, x.next_attempt_at, x.id
               limit hold_step) r;
      if cardinality(moved) > 0 then
        update app.webhook_deliveries d set held = true
         where d.id = any (moved) and d.status = 'pending' and d.lease_expires_at is null and not d.held;
      end if;
    end if;

    -- The first step's candidates count as the claim can take them: those of failing endpoints
    -- beyond `max_degraded` are dropped below, so they must not keep the second step from finding
    -- the other endpoints (a failing backlog that filled the window held every healthy endpoint
    -- back once the failing share was in flight).
    if (scanned >= win or walked >= deep)
       and (select count(*) filter (where not x.deg) + least(count(*) filter (where x.deg), max_degraded)
              from unnest(c_degs) as x(deg)) < max_claims then
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
alter function app.webhook_claim_batch(text,integer,integer,integer,integer) owner to switchboard_system;
comment on function app.webhook_claim_batch(text,integer,integer,integer,integer) is E'Delivery engine: leases up to max_claims due attempts (per-endpoint cap across workers, fair across endpoints and locations, failing endpoints capped at max_degraded) and returns what to send; holds the attempts of inactive endpoints its walk was cut short by. SECURITY DEFINER (switchboard_system): the worker is not a tenant.';
revoke execute on function app.webhook_claim_batch(text,integer,integer,integer,integer) from public;

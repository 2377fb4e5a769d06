--! Previous: sha1:ef520e9804aaeb6d885b7da86576d3f8473b424f
--! Hash: sha1:0b60d477908ab2034190ebf9a0910f3c06856997
--! Message: delivery claim after a history

-- ==== Performance after a realistic history: delivery drain ====
-- After a history every claim of the drain over 150 endpoints ran the claim's second step: a
-- paused endpoint's held attempts (and an endpoint at its cap with a backlog) sit at the head of
-- the due order, filled the claim's first window, and sent each claim to the skip scan over all
-- endpoints with work, about 1,500 more blocks a claim (docs/performance.md, "The drain after a
-- history").
-- 1. The due index carries endpoint_id and location_id, so the claim's first step walks it
--    index-only and passes over the attempts of endpoints that cannot take one (at their cap,
--    paused or disabled) without visiting the heap, up to a bound; then the window as before.
-- 2. The queue tables are vacuumed at 2 % of changed rows instead of 20 %: the walk above is
--    index-only only on pages the visibility map marks all-visible, and dead entries of claimed
--    and recorded attempts stay out of the due indexes.

drop index if exists app.webhook_deliveries_ready_idx;
create index webhook_deliveries_ready_idx on app.webhook_deliveries (next_attempt_at, id) include (endpoint_id, location_id)
  where status = 'pending' and lease_expires_at is null;
comment on index app.webhook_deliveries_ready_idx is E'Unleased pending attempts in due order, with their endpoint and location: the engine''s claim walks it index-only, passing over the attempts of endpoints that cannot take one.';
create index if not exists webhook_endpoints_inactive_idx on app.webhook_endpoints (id) where not active;
comment on index app.webhook_endpoints_inactive_idx is E'Paused or disabled endpoints: the engine''s claim passes over their held attempts.';

alter table app.webhook_deliveries set (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_insert_scale_factor = 0.02,
                                        autovacuum_analyze_scale_factor = 0.02);
alter table app.notifications set (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_insert_scale_factor = 0.02,
                                   autovacuum_analyze_scale_factor = 0.02);

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
    --    endpoints at their cap and of paused or disabled endpoints (held) are passed over inside
    --    the index-only walk of webhook_deliveries_ready_idx (it carries endpoint_id), up to `deep`
    --    entries. A paused endpoint's backlog sits at the head of the due order; before, it filled
    --    the window on every claim and sent each one to step 2 (docs/performance.md, "The drain
    --    after a history").
    -- 2. Only when that walk was cut short (a full window, or `deep` entries walked) and still gave
    --    less than a batch: the other endpoints with unleased attempts, found by a skip scan of
    --    webhook_deliveries_ready_endpoint_idx, one probe per endpoint. So no claim walks the
    --    attempts queued behind endpoints at their cap without bound, and the common case stays one
    --    short scan. The probes order by all three columns of that index, which only it returns in order.
    skip := excl || array(select e.id from app.webhook_endpoints e where not e.active);
    with cand as (
      select h.id, h.endpoint_id, h.location_id, h.next_attempt_at, h.pos
        from (select d.id, d.endpoint_id, d.location_id, d.next_attempt_at,
                     row_number() over (order by d.next_attempt_at, d.id) as pos
                from app.webhook_deliveries d
               where d.status = 'pending' and d.lease_expires_at is null and d.next_attempt_at <= t
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

    if (scanned >= win or walked >= deep) and cardinality(c_ids) < max_claims then
      excl := excl || array(select distinct x from unnest(c_eps) x);
      with recursive eps as (
        (select d.endpoint_id from app.webhook_deliveries d
          where d.status = 'pending' and d.lease_expires_at is null and d.endpoint_id is not null
          order by d.endpoint_id, d.next_attempt_at, d.id limit 1)
        union all
        select (select d.endpoint_id from app.webhook_deliveries d
                 where d.status = 'pending' and d.lease_expires_at is null and d.endpoint_id > eps.endpoint_id
                 order by d.endpoint_id, d.next_attempt_at, d.id limit 1)
          from eps where eps.endpoint_id is not null
      ), per_ep as (
        select x.id, e.id as endpoint_id, x.location_id, x.next_attempt_at, e.failure_count > 0 as degraded,
               row_number() over (partition by e.id order by x.next_attempt_at, x.id)::int as rn
          from eps
          join app.webhook_endpoints e on e.id = eps.endpoint_id and e.active and not (e.id = any (excl))
          cross join lateral (
            select d.id, d.location_id, d.next_attempt_at from app.webhook_deliveries d
             where d.endpoint_id = e.id and d.status = 'pending' and d.lease_expires_at is null
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
$function$;
alter function app.webhook_claim_batch(text,integer,integer,integer,integer) owner to switchboard_system;
comment on function app.webhook_claim_batch(text,integer,integer,integer,integer) is E'Delivery engine: leases up to max_claims due attempts (per-endpoint cap across workers, fair across endpoints and locations, failing endpoints capped at max_degraded) and returns what to send. SECURITY DEFINER (switchboard_system): the worker is not a tenant.';
revoke execute on function app.webhook_claim_batch(text,integer,integer,integer,integer) from public;

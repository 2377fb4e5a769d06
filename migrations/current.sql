-- Enter migration here

-- ==== demo rows of every resource ====
-- admin.demo_seed_finish runs each app_private.demo_seed__<table>(uuid) a resource's migration
-- adds (migrations/CONVENTIONS.md, "Adding a tenant table").
CREATE OR REPLACE FUNCTION admin.demo_seed_finish(location_ref text)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
declare
  loc uuid := admin.resolve_location(location_ref);
  n_leads int;
  n_bookings int;
  hook regproc;
begin
  perform set_config('app.location_id', loc::text, true);
  perform set_config('app.seeding', 'on', true);
  -- Statistics first: the calls just seeded may be unknown to them (docs/performance.md).
  perform app_private.demo_seed_analyze();

  update app.customers cu
     set first_call_at = s.first_at, last_call_at = s.last_at, call_count = s.n
    from (select customer_id, min(started_at) first_at, max(started_at) last_at, count(*)::int n
            from app.calls where location_id = loc group by customer_id) s
   where cu.id = s.customer_id;
  -- Before leads and bookings are written: the foreign-key actions of this delete then find no
  -- row of this run to walk.
  delete from app.customers cu where cu.location_id = loc and cu.call_count = 0
     and not exists (select 1 from app.calls c where c.customer_id = cu.id);

  insert into app.leads (location_id, call_id, customer_id, name, phone, address, service_type,
                         urgency_level, estimated_value, status, status_changed_at, created_at, updated_at)
  select c.location_id, c.id, c.customer_id, c.caller_name, c.caller_phone, c.caller_address, c.service_type,
         c.urgency_level, c.estimated_value,
         case when c.outcome = 'booked' then 'booked'
              else (array['new','new','contacted','closed','lost'])[1 + floor(random() * 5)::int] end,
         c.ended_at, c.ended_at, c.ended_at
    from app.calls c
   where c.location_id = loc and c.outcome in ('booked', 'lead', 'transferred')
     and not exists (select 1 from app.leads l where l.call_id = c.id);
  get diagnostics n_leads = row_count;

  insert into app.bookings (location_id, call_id, lead_id, customer_id, status, scheduled_date,
                            scheduled_time, service_type, address, created_at, updated_at)
  select c.location_id, c.id, l.id, c.customer_id,
         case when c.appointment_date < current_date then 'completed' else 'scheduled' end,
         c.appointment_date, c.appointment_time, c.service_type, c.caller_address, c.ended_at, c.ended_at
    from app.calls c join app.leads l on l.call_id = c.id
   where c.location_id = loc and c.outcome = 'booked' and c.appointment_date is not null
     and not exists (select 1 from app.bookings b where b.call_id = c.id);
  get diagnostics n_bookings = row_count;

  -- Every other resource's demo rows: each app_private.demo_seed__<table>(location uuid), in name
  -- order, so a new tenant table gets demo rows (and test/db/rls.test.ts its rows) from its own
  -- migration (migrations/CONVENTIONS.md, "Adding a tenant table"). Only the migrating role
  -- creates functions in app_private.
  for hook in
    select p.oid::regproc from pg_catalog.pg_proc p join pg_catalog.pg_namespace n on n.oid = p.pronamespace
     where n.nspname = 'app_private' and p.proname like 'demo\_seed\_\_%'
       and p.pronargs = 1 and p.proargtypes[0] = 'uuid'::regtype
     order by p.proname
  loop
    execute pg_catalog.format('select %s($1)', hook) using loc;
  end loop;

  return jsonb_build_object(
    'location_id', loc, 'leads', n_leads, 'bookings', n_bookings,
    'calls', (select count(*) from app.calls where location_id = loc),
    'customers', (select count(*) from app.customers where location_id = loc));
end
$function$;
alter function admin.demo_seed_finish(text) owner to switchboard_system;
comment on function admin.demo_seed_finish(text) is E'Demo seed, step 3: customer call statistics (customers no call picked are deleted), then leads and bookings from the seeded calls, then each resource''s app_private.demo_seed__<table>(location); statistics are refreshed first (app_private.demo_seed_analyze).';
revoke execute on function admin.demo_seed_finish(text) from public;

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

-- ==== Idempotency-Key: a key just released is taken ====
-- app.idempotency_begin tries the key's lock for up to 40 ms before answering 409 (docs/api-contract.md §5).
CREATE OR REPLACE FUNCTION app.idempotency_begin(token_hash text, location_ref text, scope text, idempotency_key text, fingerprint text, OUT replayed_status integer, OUT replayed_body text)
 RETURNS record
 LANGUAGE plpgsql
AS $function$
declare
  loc uuid := app.idempotency_location(token_hash);
  k app_private.idempotency_keys;
begin
  if idempotency_key is null or length(idempotency_key) not between 1 and 255 then
    perform app.raise('SB400', 'Idempotency-Key must be 1 to 255 characters');
  end if;
  -- An unknown token: the operation's own app.authorize answers 401 and nothing is stored.
  if loc is null then
    return;
  end if;
  -- The token's own location, as app.authorize pins it (RLS on the keys).
  perform set_config('app.location_id', loc::text, true);
  -- Concurrent duplicates: the first holds this lock until its transaction ends; the others answer
  -- 409 instead of waiting for it, and a retry after the commit finds the stored answer. The lock
  -- is tried for up to 40 ms: a request whose error the client has already read may still be
  -- releasing it (a backend reports the error before it ends the transaction), and a client that
  -- retries at once with a corrected body must not get a spurious 409.
  for attempt in 1..5 loop
    exit when pg_try_advisory_xact_lock(7302, hashtext(loc::text || '/' || idempotency_key));
    if attempt = 5 then
      perform app.authorize(token_hash, location_ref, scope);
      perform app.raise('SBIK9', 'A request with this Idempotency-Key is still being processed; retry after it has finished');
    end if;
    perform pg_sleep(0.01);
  end loop;
  select * into k from app_private.idempotency_keys i
   where i.location_id = loc and i.idempotency_key = idempotency_begin.idempotency_key;
  if found and k.created_at <= now() - interval '24 hours' then
    -- Expired (not pruned yet): the key is free again.
    delete from app_private.idempotency_keys i where i.location_id = loc and i.idempotency_key = idempotency_begin.idempotency_key;
  elsif found then
    -- A stored answer goes only to a request the operation itself would have let through.
    perform app.authorize(token_hash, location_ref, scope);
    if k.fingerprint <> idempotency_begin.fingerprint then
      perform app.raise('SBIK2', 'This Idempotency-Key was already used for a different request');
    end if;
    -- The answer held a caller's data that has since been erased: neither replayed nor run again.
    if k.erased_at is not null then
      perform app.raise('SBIK7', 'The answer stored under this Idempotency-Key held personal data that has since been erased; it is not replayed and the request is not run again. Use a new key to repeat the request.');
    end if;
    replayed_status := k.response_status;
    replayed_body := k.response_body;
  end if;
  -- Nothing stored: the operation runs and authorizes (401, 404, 403 roll everything back).
end
$function$;
comment on function app.idempotency_begin(text,text,text,text,text) is E'First half of a token-API POST with an Idempotency-Key: takes the key of the token''s location for the transaction (409 idempotency_key_in_use while another request holds it) and returns the stored answer of the same request (null when there is none: the operation then runs and authorizes itself), or refuses another request''s key (422 idempotency_key_reused) or an answer erased with its caller''s data (410 idempotency_answer_erased); both after app.authorize with the operation''s scope. docs/rest-api.md "Idempotency-Key".';
revoke execute on function app.idempotency_begin(text,text,text,text,text) from public;
grant execute on function app.idempotency_begin(text,text,text,text,text) to switchboard_api;

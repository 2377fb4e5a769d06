--! Previous: sha1:4994e8adfeb89e8d832718db021022770a26111c
--! Hash: sha1:195f5859feb906cdd9bfe929a364fe621b121b70
--! Message: webhooks and delivery engine

-- Outbound webhooks and the delivery engine (docs/webhooks.md, docs/delivery-engine.md):
-- endpoints, one row per delivery attempt, fan-out from events, leases, health, retention, and the
-- endpoint API.

create table app.webhook_endpoints (
  id uuid default gen_random_uuid() not null,
  location_id uuid not null,
  label text,
  url app.https_url not null,
  events text[] not null,
  secret text not null,
  previous_secret text,
  previous_secret_expires_at timestamp with time zone,
  active boolean default true not null,
  failure_count integer default 0 not null,
  last_success_at timestamp with time zone,
  last_failure_at timestamp with time zone,
  created_at timestamp with time zone default now() not null,
  updated_at timestamp with time zone default now() not null,
  failing_since timestamp with time zone,
  disabled_at timestamp with time zone,
  disabled_reason text,
  constraint webhook_endpoints_pkey primary key (id, location_id),
  constraint webhook_endpoints_label_check check ((length(label) <= 200)),
  constraint webhook_endpoints_events_check check (((cardinality(events) > 0) AND (events <@ app.event_types()))),
  constraint webhook_endpoints_failure_count_check check ((failure_count >= 0)),
  constraint webhook_endpoints_secret_check check ((secret ~ '^whsec_([A-Za-z0-9+/]{43}=|[A-Za-z0-9_-]{43})$'::text)),
  constraint webhook_endpoints_disabled_check check ((((disabled_at IS NULL) = (disabled_reason IS NULL)) AND ((disabled_at IS NULL) OR (NOT active)) AND (length(disabled_reason) <= 500))),
  constraint webhook_endpoints_location_id_fkey foreign key (location_id) references app.locations (id) on delete cascade
);
comment on table app.webhook_endpoints is E'HTTPS receivers of signed events.';
comment on column app.webhook_endpoints.secret is E'@behavior -select -filterBy -orderBy\nHMAC key, shown once: whsec_ + 32 random bytes in padded base64 (older secrets: base64url, unpadded).';
comment on column app.webhook_endpoints.previous_secret is E'@behavior -select -filterBy -orderBy\nThe secret before the last rotation; still signs until previous_secret_expires_at.';
comment on column app.webhook_endpoints.active is E'false pauses: no new deliveries, pending retries held.';
comment on column app.webhook_endpoints.failure_count is E'Consecutive failed attempts; any 2xx resets it.';
comment on column app.webhook_endpoints.failing_since is E'When the first failure of the current run of consecutive failures was recorded; null while failure_count = 0.';
comment on column app.webhook_endpoints.disabled_at is E'When the endpoint was disabled automatically (consecutive failures over time, or a 410 Gone answer); null while enabled. Disabled = active false + this; PATCH active=true clears it.';
comment on column app.webhook_endpoints.disabled_reason is E'Why it was disabled (names the 410 or the failure run); null while enabled.';
select app.secure_tenant_table('app.webhook_endpoints');
create index webhook_endpoints_location_created_idx on app.webhook_endpoints (location_id, created_at DESC, id DESC);

create table app.webhook_deliveries (
  id uuid default gen_random_uuid() not null,
  location_id uuid not null,
  event_id uuid not null,
  endpoint_id uuid,
  event text not null,
  attempt integer default 1 not null,
  status text default 'pending'::text not null,
  url text not null,
  response_status integer,
  response_body text,
  error text,
  duration_ms integer,
  created_at timestamp with time zone default now() not null,
  attempted_at timestamp with time zone,
  next_attempt_at timestamp with time zone,
  lease_expires_at timestamp with time zone,
  lease_owner text,
  constraint webhook_deliveries_pkey primary key (id, location_id),
  constraint webhook_deliveries_attempt_check check ((attempt >= 1)),
  constraint webhook_deliveries_status_check check ((status = ANY (ARRAY['pending'::text, 'delivered'::text, 'failed'::text, 'dead'::text]))),
  constraint webhook_deliveries_response_body_check check ((octet_length(response_body) <= 16384)),
  constraint webhook_deliveries_location_id_fkey foreign key (location_id) references app.locations (id) on delete cascade,
  constraint webhook_deliveries_event_id_fkey foreign key (location_id, event_id) references app.events (location_id, id) on delete cascade,
  constraint webhook_deliveries_endpoint_id_fkey foreign key (location_id, endpoint_id) references app.webhook_endpoints (location_id, id) on delete set null (endpoint_id)
);
comment on table app.webhook_deliveries is E'One row per delivery attempt; its id is the svc-delivery-id header.';
comment on column app.webhook_deliveries.endpoint_id is E'null once the endpoint is deleted (history kept, pending attempts discarded).';
comment on column app.webhook_deliveries.attempt is E'1 for the first try, then 2… up to the retry schedule''s length + 1.';
comment on column app.webhook_deliveries.status is E'pending | delivered | failed (a retry follows) | dead (no more attempts).';
comment on column app.webhook_deliveries.response_body is E'First 16 KiB of the receiver''s answer.';
comment on column app.webhook_deliveries.attempted_at is E'When the request of this attempt was started.';
comment on column app.webhook_deliveries.next_attempt_at is E'pending: when this attempt is due; failed: when the following attempt is due; delivered/dead: null.';
comment on column app.webhook_deliveries.lease_expires_at is E'@behavior -filterBy -orderBy\nWhile a worker sends this pending attempt: when its claim lapses (time-out + grace). Null when not in flight; an expired lease without a result is a dead attempt the sweeper re-queues.';
comment on column app.webhook_deliveries.lease_owner is E'@behavior -filterBy -orderBy\nThe delivery engine (worker process) that holds the lease.';
select app.secure_tenant_table('app.webhook_deliveries');
create index webhook_deliveries_location_created_idx on app.webhook_deliveries (location_id, created_at DESC, id DESC);
create index webhook_deliveries_ready_idx on app.webhook_deliveries (next_attempt_at, id) WHERE ((status = 'pending'::text) AND (lease_expires_at IS NULL));
create index webhook_deliveries_leased_idx on app.webhook_deliveries (lease_expires_at) INCLUDE (endpoint_id) WHERE ((status = 'pending'::text) AND (lease_expires_at IS NOT NULL));
create index webhook_deliveries_location_status_created_idx on app.webhook_deliveries (location_id, status, created_at DESC, id DESC);
create index webhook_deliveries_location_event_created_idx on app.webhook_deliveries (location_id, event, created_at DESC, id DESC);
create index webhook_deliveries_endpoint_idx on app.webhook_deliveries (endpoint_id, location_id, status);
create index webhook_deliveries_event_idx on app.webhook_deliveries (event_id, location_id);
create index webhook_deliveries_ready_endpoint_idx on app.webhook_deliveries (endpoint_id, next_attempt_at, id) WHERE ((status = 'pending'::text) AND (lease_expires_at IS NULL));
comment on index app.webhook_deliveries_ready_endpoint_idx is E'Unleased pending attempts per endpoint in due order: the engine''s claim (skip scan over endpoints, then each endpoint''s first due attempts).';

create function app.tg_events__body()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
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
$function$;
comment on function app.tg_events__body() is E'Freezes the delivery body text of an event at insert (a webhook.test carrying a sample gets the sample''s body).';

create function app.webhook_endpoint_json(e app.webhook_endpoints)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
AS $function$
  select jsonb_build_object(
    'id', e.id, 'location_id', e.location_id, 'label', e.label, 'url', e.url,
    'events', to_jsonb(e.events), 'active', e.active, 'failure_count', e.failure_count,
    'failing_since', app.iso(e.failing_since),
    'last_success_at', app.iso(e.last_success_at), 'last_failure_at', app.iso(e.last_failure_at),
    'disabled_at', app.iso(e.disabled_at), 'disabled_reason', e.disabled_reason,
    'created_at', app.iso(e.created_at), 'updated_at', app.iso(e.updated_at))
$function$;
comment on function app.webhook_endpoint_json(app.webhook_endpoints) is E'Webhook endpoint as the API shows it (health included: failure_count, failing_since, disabled_at, disabled_reason); never the secret.';

create function app.webhook_delivery_json(d app.webhook_deliveries)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
AS $function$
  select jsonb_build_object(
    'id', d.id, 'event_id', d.event_id, 'endpoint_id', d.endpoint_id, 'event', d.event,
    'attempt', d.attempt, 'status', d.status, 'url', d.url, 'response_status', d.response_status,
    'response_body', d.response_body, 'error', d.error, 'duration_ms', d.duration_ms,
    'created_at', app.iso(d.created_at), 'attempted_at', app.iso(d.attempted_at),
    'next_attempt_at', app.iso(d.next_attempt_at))
$function$;
comment on function app.webhook_delivery_json(app.webhook_deliveries) is E'One delivery attempt as the API shows it.';

create function app.webhook_new_secret()
 RETURNS text
 LANGUAGE sql
AS $function$ select 'whsec_' || encode(public.gen_random_bytes(32), 'base64') $function$;
comment on function app.webhook_new_secret() is E'whsec_ + 32 random bytes in standard, padded base64 (what Standard Webhooks libraries decode).';

create function app.webhook_enqueue(delivery_id uuid, location_id uuid, due timestamp with time zone)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
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
    perform app.webhook_wake();
  end if;
end
$function$;
alter function app.webhook_enqueue(uuid,uuid,timestamp with time zone) owner to switchboard_system;
comment on function app.webhook_enqueue(uuid,uuid,timestamp with time zone) is E'Schedules one pending attempt of the caller''s tenant at `due` (now or later) and wakes the delivery engines when it is due (unless the transaction defers its wake-ups to app.flush_deferred_jobs()); no-op for any other row. SECURITY DEFINER (switchboard_system) so API transactions (resume, retry) can schedule without rights on the worker''s wake-up channel or other tenants'' rows.';

create function app.tg_events__webhook_fanout()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
begin
  -- Fresh attempts are due now: no per-attempt app.webhook_enqueue (it would read each row back
  -- only to find nothing to move); one wake-up for the insert.
  with eps as (
    select e.id, e.url from app.webhook_endpoints e
     where e.location_id = new.location_id
       and case when new.type = 'webhook.test' then e.id = (new.data ->> 'endpoint_id')::uuid
                else e.active and new.type = any (e.events) end
       for key share skip locked)
  insert into app.webhook_deliveries (location_id, event_id, endpoint_id, event, attempt, status, url, next_attempt_at)
  select new.location_id, new.id, eps.id, new.type, 1, 'pending', eps.url, now() from eps;
  if found then
    perform app.webhook_wake();
  end if;
  return null;
end
$function$;
alter function app.tg_events__webhook_fanout() owner to switchboard_system;
comment on function app.tg_events__webhook_fanout() is E'Creates and queues the first attempt for every subscribed active endpoint of the event''s location.';

create function app.webhook_sweep(grace_seconds integer)
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
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
$function$;
alter function app.webhook_sweep(integer) owner to switchboard_system;
comment on function app.webhook_sweep(integer) is E'Worker (cron): re-queues pending attempts whose lease lapsed without a result (the worker died); discards those of deleted endpoints.';

create function api.webhook_endpoints_create(token_hash text, location_ref text, attrs jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'webhooks:write');
  e app.webhook_endpoints;
begin
  insert into app.webhook_endpoints (location_id, label, url, events, active, secret)
  values (a.location_id, attrs ->> 'label', attrs ->> 'url',
          array(select distinct jsonb_array_elements_text(attrs -> 'events')),
          coalesce((attrs ->> 'active')::boolean, true), app.webhook_new_secret())
  returning * into e;
  return app.webhook_endpoint_json(e) || jsonb_build_object('secret', e.secret);
end
$function$;
comment on function api.webhook_endpoints_create(text,text,jsonb) is E'POST webhook-endpoints: the only response (with rotate-secret) that carries the secret.';

create function api.webhook_endpoints_list(token_hash text, location_ref text, page jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'webhooks:read');
  lim int := app.page_limit(page);
  after app.page_cursor := app.page_after(page);
begin
  return app.page_result(array(
    select app.page_item(e.created_at, e.id, app.webhook_endpoint_json(e)) from app.webhook_endpoints e
     where app.before_cursor(e.created_at, e.id, after)
     order by e.created_at desc, e.id desc limit lim + 1), lim);
end
$function$;
comment on function api.webhook_endpoints_list(text,text,jsonb) is E'GET webhook-endpoints: newest first; never the secret.';

create function api.webhook_endpoint_get(token_hash text, location_ref text, endpoint_id uuid)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'webhooks:read');
begin
  return (select app.webhook_endpoint_json(e) from app.webhook_endpoints e where e.id = endpoint_id);
end
$function$;
comment on function api.webhook_endpoint_get(text,text,uuid) is E'GET webhook-endpoints/{id}.';

create function api.webhook_endpoint_patch(token_hash text, location_ref text, endpoint_id uuid, patch jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
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
$function$;
comment on function api.webhook_endpoint_patch(text,text,uuid,jsonb) is E'PATCH webhook-endpoints/{id}: label, url, events, active. active=false holds pending attempts; false → true re-queues them and clears a disable (disabled_at, disabled_reason, failure_count, failing_since).';

create function api.webhook_endpoint_delete(token_hash text, location_ref text, endpoint_id uuid)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
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
$function$;
comment on function api.webhook_endpoint_delete(text,text,uuid) is E'DELETE webhook-endpoints/{id}: discards pending attempts at once; an attempt already in flight may finish and is recorded (history keeps it with endpoint_id null); none starts afterwards.';

create function api.webhook_endpoint_rotate_secret(token_hash text, location_ref text, endpoint_id uuid)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'webhooks:write');
  e app.webhook_endpoints;
begin
  update app.webhook_endpoints w
     set previous_secret = w.secret, previous_secret_expires_at = now() + interval '24 hours',
         secret = app.webhook_new_secret()
   where w.id = endpoint_id
  returning * into e;
  if not found then return null; end if;
  return app.webhook_endpoint_json(e) || jsonb_build_object('secret', e.secret);
end
$function$;
comment on function api.webhook_endpoint_rotate_secret(text,text,uuid) is E'POST webhook-endpoints/{id}/rotate-secret: new secret shown once; the old one keeps signing (second signature) for 24 h.';

create function api.webhook_deliveries_list(token_hash text, location_ref text, filters jsonb, page jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'webhooks:read');
  lim int := app.page_limit(page);
  after app.page_cursor := app.page_after(page);
  f_endpoint uuid := (filters ->> 'endpoint_id')::uuid;
  f_event_id uuid := (filters ->> 'event_id')::uuid;
  f_type text := filters ->> 'event';
  f_status text := filters ->> 'status';
begin
  if f_endpoint is null and f_event_id is null and f_type is null and f_status is null then
    -- Unfiltered pages: planned once per connection (see api.calls_list).
    return app.page_result(array(
      select app.page_item(d.created_at, d.id, app.webhook_delivery_json(d)) from app.webhook_deliveries d
       where (d.created_at, d.id) < (select after.created_at, after.id)
       order by d.created_at desc, d.id desc limit (select lim + 1)), lim);
  end if;
  -- Filtered pages: planned per request, so the status, event and endpoint indexes serve them.
  return app.page_result(array(
    select app.page_item(d.created_at, d.id, app.webhook_delivery_json(d)) from app.webhook_deliveries d
     where app.before_cursor(d.created_at, d.id, after)
       and (f_endpoint is null or d.endpoint_id = f_endpoint)
       and (f_event_id is null or d.event_id = f_event_id)
       and (f_type is null or d.event = f_type)
       and (f_status is null or d.status = f_status)
     order by d.created_at desc, d.id desc limit lim + 1), lim);
end
$function$;
comment on function api.webhook_deliveries_list(text,text,jsonb,jsonb) is E'GET webhook-deliveries: attempts newest first; filters endpoint_id, event_id, event (type), status.';

create function api.webhook_delivery_retry(token_hash text, location_ref text, delivery_id uuid)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'webhooks:write');
  d app.webhook_deliveries;
  pending_id uuid;
  nd app.webhook_deliveries;
begin
  select * into d from app.webhook_deliveries w where w.id = delivery_id;
  if not found then return null; end if;
  if d.status not in ('failed', 'dead') then
    perform app.raise('SB409', format('Only a failed or dead delivery can be retried; this one is %s', d.status),
      jsonb_build_object('status', d.status));
  end if;
  if d.endpoint_id is null then
    perform app.raise('SB409', 'The endpoint of this delivery was deleted', '{}');
  end if;
  perform 1 from app.webhook_endpoints w where w.id = d.endpoint_id for key share;
  select w.id into pending_id from app.webhook_deliveries w
   where w.event_id = d.event_id and w.endpoint_id = d.endpoint_id and w.status = 'pending' limit 1;
  if pending_id is not null then
    perform app.raise('SB409', 'An attempt of this event is already pending for the endpoint',
      jsonb_build_object('pending_delivery_id', pending_id));
  end if;
  insert into app.webhook_deliveries (location_id, event_id, endpoint_id, event, attempt, status, url, next_attempt_at)
  select d.location_id, d.event_id, d.endpoint_id, d.event,
         (select max(w.attempt) + 1 from app.webhook_deliveries w where w.event_id = d.event_id and w.endpoint_id = d.endpoint_id),
         'pending', e.url, now()
    from app.webhook_endpoints e where e.id = d.endpoint_id
  returning * into nd;
  perform app.webhook_enqueue(nd.id, nd.location_id, nd.next_attempt_at);
  return app.webhook_delivery_json(nd);
end
$function$;
comment on function api.webhook_delivery_retry(text,text,uuid) is E'POST webhook-deliveries/{id}/retry: a new attempt (new id, same event id) of a failed or dead delivery; one attempt, no automatic retries beyond the schedule.';

create function app.webhook_claim_batch(owner text, max_claims integer, max_degraded integer, per_endpoint integer, lease_ms integer)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
declare
  t timestamptz;
  win int := greatest(max_claims * 4, 64);
  scanned int;
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
    -- 1. The first `win` due attempts in due order, whatever their endpoint (the usual case: many
    --    endpoints with work, and the window holds more than a batch).
    -- 2. Only when that window was full and still gave less than a batch (its attempts belong to
    --    endpoints already at their cap, as when a few busy endpoints hold a backlog): the other
    --    endpoints with unleased attempts, found by a skip scan of
    --    webhook_deliveries_ready_endpoint_idx, one probe per endpoint. So no claim walks the
    --    attempts queued behind endpoints at their cap, and the common case stays one short scan.
    --    The probes order by all three columns of that index, which only it returns in order.
    with cand as (
      select d.id, d.endpoint_id, d.location_id, d.next_attempt_at
        from app.webhook_deliveries d
       where d.status = 'pending' and d.lease_expires_at is null and d.next_attempt_at <= t
       order by d.next_attempt_at, d.id
       limit win
    ), per_ep as (
      select c.*, e.failure_count > 0 as degraded,
             row_number() over (partition by c.endpoint_id order by c.next_attempt_at, c.id)::int as rn
        from cand c
        join app.webhook_endpoints e on e.id = c.endpoint_id and e.active and not (e.id = any (excl))
    )
    select (select count(*) from cand)::int,
           coalesce(array_agg(p.id), '{}'), coalesce(array_agg(p.endpoint_id), '{}'),
           coalesce(array_agg(p.location_id), '{}'), coalesce(array_agg(p.next_attempt_at), '{}'),
           coalesce(array_agg(p.degraded), '{}'), coalesce(array_agg(p.rn), '{}')
      into scanned, c_ids, c_eps, c_locs, c_dues, c_degs, c_rns
      from per_ep p
     where p.rn <= per_endpoint - coalesce((busy ->> p.endpoint_id::text)::int, 0);

    if scanned >= win and cardinality(c_ids) < max_claims then
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

create function app.webhook_release(owner text, delivery_ids uuid[])
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
declare
  n int;
begin
  update app.webhook_deliveries d set lease_expires_at = null, lease_owner = null
   where d.id = any (delivery_ids) and d.status = 'pending' and d.lease_owner = webhook_release.owner;
  get diagnostics n = row_count;
  if n > 0 then perform pg_notify('switchboard_webhooks', ''); end if;
  return n;
end
$function$;
alter function app.webhook_release(text,uuid[]) owner to switchboard_system;
comment on function app.webhook_release(text,uuid[]) is E'Worker: ends the leases of attempts it claimed but did not send (shutdown), so they are due again at once.';

create function api.webhook_endpoint_test(token_hash text, location_ref text, endpoint_id uuid, sample jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
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
$function$;
comment on function api.webhook_endpoint_test(text,text,uuid,jsonb) is E'POST webhook-endpoints/{id}/test: a signed test send to this endpoint only (svc-test: true); sample null → webhook.test, else { event, data } of a catalog example sent as that event type. Returns the queued attempt.';

create function api.webhook_endpoint_recover(token_hash text, location_ref text, endpoint_id uuid, since timestamp with time zone, retention_days integer, max_events integer)
 RETURNS jsonb
 LANGUAGE plpgsql
 SET enable_seqscan TO 'off'
 SET enable_nestloop TO 'off'
AS $function$
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
$function$;
comment on function api.webhook_endpoint_recover(text,text,uuid,timestamp with time zone,integer,integer) is E'POST webhook-endpoints/{id}/recover: a new first attempt for each subscribed event since `since` without a delivered or pending attempt to the endpoint (oldest first, at most max_events per call; a hash anti join, linear in the window). 400 outside [now - retention, now], 409 when inactive.';

create function app.retention_prune(kind text, retention_days integer, batch_size integer)
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
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
$function$;
alter function app.retention_prune(text,integer,integer) owner to switchboard_system;
comment on function app.retention_prune(text,integer,integer) is E'Worker (prune_deliveries): deletes one batch of settled deliveries | notifications (with their log) | events older than the retention window; returns the count.';

create function app.tg_webhook_endpoints__reenable()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
  new.disabled_at := null;
  new.disabled_reason := null;
  new.failure_count := 0;
  new.failing_since := null;
  return new;
end
$function$;
comment on function app.tg_webhook_endpoints__reenable() is E'active false → true: clears disabled_at/disabled_reason and restarts the failure run (failure_count 0, failing_since null).';

create function app.webhook_endpoint_alert(type text, e app.webhook_endpoints, d app.webhook_deliveries, disable_after_failures integer, disable_after_seconds integer)
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
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
$function$;
alter function app.webhook_endpoint_alert(text,app.webhook_endpoints,app.webhook_deliveries,integer,integer) owner to switchboard_system;
comment on function app.webhook_endpoint_alert(text,app.webhook_endpoints,app.webhook_deliveries,integer,integer) is E'Worker: notifies the location (routes of webhook_endpoint.failing / webhook_endpoint.disabled) about one endpoint''s health; data names the endpoint, the failure run and the last error.';

create function app.webhook_record(delivery_id uuid, result jsonb, retry_delays integer[], disable_after_failures integer, disable_after_seconds integer)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
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
$function$;
alter function app.webhook_record(uuid,jsonb,integer[],integer,integer) owner to switchboard_system;
comment on function app.webhook_record(uuid,jsonb,integer[],integer,integer) is E'Worker: stores a leased attempt''s outcome, ends the lease, schedules the next attempt (Retry-After on 429/503, capped at the largest delay) or marks the delivery dead, and applies the endpoint health rules (auto-disable, 410 Gone, warning at half the threshold).';

create function app.webhook_record_batch(results jsonb, retry_delays integer[], disable_after_failures integer, disable_after_seconds integer)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
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
$function$;
alter function app.webhook_record_batch(jsonb,integer[],integer,integer) owner to switchboard_system;
comment on function app.webhook_record_batch(jsonb,integer[],integer,integer) is E'Worker: app.webhook_record for each { delivery_id, endpoint_id, result } of a batch, in endpoint order.';

create function app.webhook_wake()
 RETURNS void
 LANGUAGE sql
AS $function$ select app.engine_wake('switchboard_webhooks') $function$;
comment on function app.webhook_wake() is E'Wakes the webhook engines (app.engine_wake on switchboard_webhooks) when attempts became due: for app.webhook_enqueue and the event fan-out.';

-- Triggers (name prefix = firing order; see migrations/CONVENTIONS.md)
create trigger _100_body BEFORE INSERT ON app.events FOR EACH ROW
  execute function app.tg_events__body();
create trigger _500_webhook_fanout AFTER INSERT ON app.events FOR EACH ROW
  execute function app.tg_events__webhook_fanout();
create trigger _100_set_updated_at BEFORE UPDATE ON app.webhook_endpoints FOR EACH ROW
  execute function app.tg__set_updated_at();
create trigger _200_reenable BEFORE UPDATE ON app.webhook_endpoints FOR EACH ROW WHEN ((new.active AND (NOT old.active)))
  execute function app.tg_webhook_endpoints__reenable();

-- Grants: the one place for this concern's privileges (tenant tables get theirs from
-- app.secure_tenant_table above; only departures from it are here).
revoke execute on function app.webhook_enqueue(uuid,uuid,timestamp with time zone) from public;
grant execute on function app.webhook_enqueue(uuid,uuid,timestamp with time zone) to switchboard_api;
revoke execute on function app.webhook_sweep(integer) from public;
grant execute on function api.webhook_endpoints_create(text,text,jsonb) to switchboard_api;
grant execute on function api.webhook_endpoints_list(text,text,jsonb) to switchboard_api;
grant execute on function api.webhook_endpoint_get(text,text,uuid) to switchboard_api;
grant execute on function api.webhook_endpoint_patch(text,text,uuid,jsonb) to switchboard_api;
grant execute on function api.webhook_endpoint_delete(text,text,uuid) to switchboard_api;
grant execute on function api.webhook_endpoint_rotate_secret(text,text,uuid) to switchboard_api;
grant execute on function api.webhook_deliveries_list(text,text,jsonb,jsonb) to switchboard_api;
grant execute on function api.webhook_delivery_retry(text,text,uuid) to switchboard_api;
revoke execute on function app.webhook_claim_batch(text,integer,integer,integer,integer) from public;
revoke execute on function app.webhook_release(text,uuid[]) from public;
grant execute on function api.webhook_endpoint_test(text,text,uuid,jsonb) to switchboard_api;
grant execute on function api.webhook_endpoint_recover(text,text,uuid,timestamp with time zone,integer,integer) to switchboard_api;
revoke execute on function app.retention_prune(text,integer,integer) from public;
revoke execute on function app.webhook_endpoint_alert(text,app.webhook_endpoints,app.webhook_deliveries,integer,integer) from public;
revoke execute on function app.webhook_record(uuid,jsonb,integer[],integer,integer) from public;
revoke execute on function app.webhook_record_batch(jsonb,integer[],integer,integer) from public;

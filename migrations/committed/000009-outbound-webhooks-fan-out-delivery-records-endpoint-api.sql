--! Previous: sha1:ece0554f60f4621d0c74e3e86f103ee4fb7e1943
--! Hash: sha1:fa3c10103b49f7b2d095185b69ed2dfc512d652c
--! Message: outbound webhooks: fan-out, delivery records, endpoint API

-- Outbound webhooks (issue 5): exact event bodies, DB fan-out, claim/record of attempts, sweeper, REST functions.

-- Foundation fix: encode(..., 'base64') wraps lines every 76 characters, so cursors of long sort
-- keys carried a newline (%0A in the Link header) that broke app.page_after's padding → 400.
create or replace function app.cursor_encode(created_at timestamptz, id uuid) returns text
  language sql immutable parallel safe
as $$
  select translate(encode(convert_to(
    to_char(created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') || '|' || id, 'UTF8'), 'base64'),
    E'+/=\n', '-_')
$$;

-- ---------------------------------------------------------------------------------------------
-- Exact body bytes: computed once when the event is written, so every attempt (and every retry
-- days later) sends and signs identical bytes.
alter table app.events add column body text;
comment on column app.events.body is E'@behavior -filterBy -orderBy\nThe exact JSON text POSTed to webhook endpoints ({ event, location_id, created_at, data }); signed as is.';

create function app.tg_events__body() returns trigger
  language plpgsql
as $$
begin
  new.body := jsonb_build_object(
    'event', new.type,
    'location_id', new.location_id,
    'created_at', app.iso(new.created_at),
    'data', new.data)::text;
  return new;
end
$$;
comment on function app.tg_events__body() is E'Freezes the delivery body text of an event at insert.';
create trigger _100_body before insert on app.events
  for each row execute function app.tg_events__body();

comment on column app.webhook_deliveries.next_attempt_at is
  E'pending: when this attempt is due; failed: when the following attempt is due; delivered/dead: null.';
comment on column app.webhook_deliveries.attempted_at is E'When the request of this attempt was started.';
comment on column app.webhook_deliveries.endpoint_id is E'null once the endpoint is deleted (history kept, pending attempts discarded).';
create index webhook_deliveries_pending_due_idx on app.webhook_deliveries (next_attempt_at) where status = 'pending';

-- ---------------------------------------------------------------------------------------------
-- JSON shapes.
create function app.webhook_endpoint_json(e app.webhook_endpoints) returns jsonb
  language sql stable
as $$
  select jsonb_build_object(
    'id', e.id, 'location_id', e.location_id, 'label', e.label, 'url', e.url,
    'events', to_jsonb(e.events), 'active', e.active, 'failure_count', e.failure_count,
    'last_success_at', app.iso(e.last_success_at), 'last_failure_at', app.iso(e.last_failure_at),
    'created_at', app.iso(e.created_at), 'updated_at', app.iso(e.updated_at))
$$;
comment on function app.webhook_endpoint_json(app.webhook_endpoints) is E'Webhook endpoint as the API shows it: never the secret.';

create function app.webhook_delivery_json(d app.webhook_deliveries) returns jsonb
  language sql stable
as $$
  select jsonb_build_object(
    'id', d.id, 'event_id', d.event_id, 'endpoint_id', d.endpoint_id, 'event', d.event,
    'attempt', d.attempt, 'status', d.status, 'url', d.url, 'response_status', d.response_status,
    'response_body', d.response_body, 'error', d.error, 'duration_ms', d.duration_ms,
    'created_at', app.iso(d.created_at), 'attempted_at', app.iso(d.attempted_at),
    'next_attempt_at', app.iso(d.next_attempt_at))
$$;
comment on function app.webhook_delivery_json(app.webhook_deliveries) is E'One delivery attempt as the API shows it.';

create function app.webhook_new_secret() returns text
  language sql volatile
as $$ select 'whsec_' || translate(rtrim(encode(public.gen_random_bytes(32), 'base64'), '='), '+/', '-_') $$;
comment on function app.webhook_new_secret() is E'whsec_ + 32 random bytes, base64url without padding.';

-- ---------------------------------------------------------------------------------------------
-- Queueing. job_key per delivery: enqueueing the same delivery twice replaces the queued job
-- (or, when that job is locked by a worker, adds a fresh one); the task is idempotent anyway.
create function app.webhook_enqueue(delivery_id uuid, location_id uuid, due timestamptz) returns void
  language sql volatile
as $$
  select app.enqueue('deliver_webhook',
    jsonb_build_object('delivery_id', delivery_id, 'location_id', location_id),
    greatest(due, now()), 'delivery:' || delivery_id)
$$;
comment on function app.webhook_enqueue(uuid, uuid, timestamptz) is E'Queues the deliver_webhook job of one attempt, due at `due` (or now).';

/*
 * Fan-out: one pending attempt per active endpoint of the event's location subscribed to its
 * type (webhook.test: only the tested endpoint). SECURITY DEFINER (owned by switchboard_system)
 * because events are written from several contexts (API role under RLS, ingestion, staff) and
 * the fan-out must see the location's endpoints whatever the writer's tenant setting; it only
 * reads endpoints of new.location_id. Endpoints locked FOR UPDATE (being deleted) are skipped so
 * a concurrent DELETE cannot make the event's transaction fail on the foreign key.
 */
create function app.tg_events__webhook_fanout() returns trigger
  language plpgsql volatile security definer
  set search_path to pg_catalog, public, pg_temp
as $$
declare
  d record;
begin
  for d in
    with eps as (
      select e.id, e.url from app.webhook_endpoints e
       where e.location_id = new.location_id
         and case when new.type = 'webhook.test' then e.id = (new.data ->> 'endpoint_id')::uuid
                  else e.active and new.type = any (e.events) end
         for key share skip locked)
    insert into app.webhook_deliveries (location_id, event_id, endpoint_id, event, attempt, status, url, next_attempt_at)
    select new.location_id, new.id, eps.id, new.type, 1, 'pending', eps.url, now() from eps
    returning id, location_id, next_attempt_at
  loop
    perform app.webhook_enqueue(d.id, d.location_id, d.next_attempt_at);
  end loop;
  return null;
end
$$;
alter function app.tg_events__webhook_fanout() owner to switchboard_system;
comment on function app.tg_events__webhook_fanout() is E'Creates and queues the first attempt for every subscribed active endpoint of the event''s location.';
create trigger _500_webhook_fanout after insert on app.events
  for each row execute function app.tg_events__webhook_fanout();

-- ---------------------------------------------------------------------------------------------
-- Worker side. The task opens a transaction, claims the attempt (row lock on the delivery,
-- KEY SHARE on the endpoint), sends, records the result, commits. The locks make two promises:
-- DELETE of the endpoint (FOR UPDATE) waits for an in-flight send, so nothing is sent after it
-- returns; and a live attempt's delivery row stays locked, which is how the sweeper tells a live
-- attempt from one whose worker died (its connection closed, its transaction rolled back).

/*
 * SECURITY DEFINER (owned by switchboard_system): the worker is not a tenant; the delivery id
 * from the job payload decides the location. Returns null when there is nothing to send now:
 * delivery gone (discarded), not pending, locked by another live attempt, endpoint deleted or
 * paused (held; resume re-enqueues it).
 */
create function app.webhook_claim(delivery_id uuid, timeout_ms int) returns jsonb
  language plpgsql volatile security definer
  set search_path to pg_catalog, public, pg_temp
as $$
declare
  d app.webhook_deliveries;
  e app.webhook_endpoints;
  ev app.events;
begin
  -- A worker vanishing mid-request (network partition) must not hold the row forever.
  perform set_config('idle_in_transaction_session_timeout', (timeout_ms + 30000)::text, true);
  select * into d from app.webhook_deliveries where id = delivery_id for update skip locked;
  if not found or d.status <> 'pending' or d.endpoint_id is null then return null; end if;
  select * into e from app.webhook_endpoints where id = d.endpoint_id for key share;
  if not found or not e.active then return null; end if;
  select * into ev from app.events where id = d.event_id;
  update app.webhook_deliveries set url = e.url, attempted_at = now() where id = d.id;
  return jsonb_build_object(
    'delivery_id', d.id, 'event_id', d.event_id, 'event', d.event, 'attempt', d.attempt,
    'url', e.url, 'body', ev.body,
    'secrets', to_jsonb(array_remove(array[e.secret,
       case when e.previous_secret_expires_at > now() then e.previous_secret end], null)));
end
$$;
alter function app.webhook_claim(uuid, int) owner to switchboard_system;
comment on function app.webhook_claim(uuid, int) is E'Worker: locks and returns what to send for a pending attempt, or null when it must not be sent now.';
revoke execute on function app.webhook_claim(uuid, int) from public;

/*
 * Records the outcome of a claimed attempt (same transaction as the claim). 2xx → delivered and
 * the endpoint's failure_count resets; otherwise failed + the next attempt scheduled after
 * retry_delays[attempt] seconds, or dead when attempt = cardinality(retry_delays) + 1 (or
 * beyond, for a manual retry). SECURITY DEFINER (switchboard_system) like webhook_claim.
 */
create function app.webhook_record(delivery_id uuid, result jsonb, retry_delays int[]) returns jsonb
  language plpgsql volatile security definer
  set search_path to pg_catalog, public, pg_temp
as $$
declare
  d app.webhook_deliveries;
  ok boolean := coalesce((result ->> 'ok')::boolean, false);
  next_at timestamptz;
  nd app.webhook_deliveries;
begin
  select * into d from app.webhook_deliveries where id = delivery_id for update;
  if not found or d.status <> 'pending' then return null; end if;
  if not ok and d.attempt <= cardinality(retry_delays) then
    next_at := now() + make_interval(secs => retry_delays[d.attempt]);
  end if;
  update app.webhook_deliveries
     set status = case when ok then 'delivered' when next_at is null then 'dead' else 'failed' end,
         response_status = (result ->> 'response_status')::int,
         response_body = result ->> 'response_body',
         error = result ->> 'error',
         duration_ms = (result ->> 'duration_ms')::int,
         attempted_at = coalesce((result ->> 'attempted_at')::timestamptz, attempted_at, now()),
         next_attempt_at = next_at
   where id = d.id
  returning * into d;
  if ok then
    update app.webhook_endpoints set failure_count = 0, last_success_at = now() where id = d.endpoint_id;
  else
    update app.webhook_endpoints set failure_count = failure_count + 1, last_failure_at = now() where id = d.endpoint_id;
  end if;
  if next_at is not null and d.endpoint_id is not null then
    insert into app.webhook_deliveries (location_id, event_id, endpoint_id, event, attempt, status, url, next_attempt_at)
    values (d.location_id, d.event_id, d.endpoint_id, d.event, d.attempt + 1, 'pending', d.url, next_at)
    returning * into nd;
    perform app.webhook_enqueue(nd.id, nd.location_id, nd.next_attempt_at);
  end if;
  return jsonb_build_object('status', d.status, 'next_delivery_id', nd.id);
end
$$;
alter function app.webhook_record(uuid, jsonb, int[]) owner to switchboard_system;
comment on function app.webhook_record(uuid, jsonb, int[]) is E'Worker: stores an attempt''s outcome and schedules the next attempt or marks the delivery dead.';
revoke execute on function app.webhook_record(uuid, jsonb, int[]) from public;

/*
 * At-least-once despite graphile-worker's 4-hour lock expiry: a pending attempt of an active
 * endpoint that has been due for more than grace_seconds and whose row is not locked (no live
 * attempt holds it) is queued again. Runs from the crontab every minute. SECURITY DEFINER
 * (switchboard_system) because it looks across locations.
 */
create function app.webhook_sweep(grace_seconds int) returns int
  language plpgsql volatile security definer
  set search_path to pg_catalog, public, pg_temp
as $$
declare
  d record;
  n int := 0;
begin
  for d in
    select w.id, w.location_id, w.next_attempt_at
      from app.webhook_deliveries w join app.webhook_endpoints e on e.id = w.endpoint_id
     where w.status = 'pending' and e.active
       and w.next_attempt_at < now() - make_interval(secs => grace_seconds)
     order by w.next_attempt_at
     limit 1000
       for update of w skip locked
  loop
    perform app.webhook_enqueue(d.id, d.location_id, d.next_attempt_at);
    n := n + 1;
  end loop;
  return n;
end
$$;
alter function app.webhook_sweep(int) owner to switchboard_system;
comment on function app.webhook_sweep(int) is E'Worker (cron): re-queues pending attempts that are overdue and not held by a live worker.';
revoke execute on function app.webhook_sweep(int) from public;

-- ---------------------------------------------------------------------------------------------
-- REST functions. location_ref is null for the absolute /webhook-endpoints/{id} paths: the
-- token's location (set by app.authorize) and RLS confine the lookup; another location's id is
-- simply not found.

create function api.webhook_endpoints_create(token_hash text, location_ref text, attrs jsonb) returns jsonb
  language plpgsql volatile
as $$
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
$$;
comment on function api.webhook_endpoints_create(text, text, jsonb) is E'POST webhook-endpoints: the only response (with rotate-secret) that carries the secret.';

create function api.webhook_endpoints_list(token_hash text, location_ref text, page jsonb) returns jsonb
  language plpgsql volatile
as $$
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
$$;
comment on function api.webhook_endpoints_list(text, text, jsonb) is E'GET webhook-endpoints: newest first; never the secret.';

create function api.webhook_endpoint_get(token_hash text, location_ref text, endpoint_id uuid) returns jsonb
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'webhooks:read');
begin
  return (select app.webhook_endpoint_json(e) from app.webhook_endpoints e where e.id = endpoint_id);
end
$$;
comment on function api.webhook_endpoint_get(text, text, uuid) is E'GET webhook-endpoints/{id}.';

create function api.webhook_endpoint_patch(token_hash text, location_ref text, endpoint_id uuid, patch jsonb) returns jsonb
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'webhooks:write');
  old app.webhook_endpoints;
  e app.webhook_endpoints;
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
  -- Resume: held attempts go back on the queue (overdue ones at once).
  if e.active and not old.active then
    perform app.webhook_enqueue(d.id, d.location_id, d.next_attempt_at)
       from app.webhook_deliveries d where d.endpoint_id = e.id and d.status = 'pending';
  end if;
  return app.webhook_endpoint_json(e);
end
$$;
comment on function api.webhook_endpoint_patch(text, text, uuid, jsonb) is
  E'PATCH webhook-endpoints/{id}: label, url, events, active. active=false holds pending attempts; true re-queues them.';

create function api.webhook_endpoint_delete(token_hash text, location_ref text, endpoint_id uuid) returns jsonb
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'webhooks:write');
  e app.webhook_endpoints;
begin
  -- FOR UPDATE waits for in-flight sends (they hold KEY SHARE) and stops new claims and fan-out.
  perform 1 from app.webhook_endpoints w where w.id = endpoint_id for update;
  if not found then return null; end if;
  delete from app.webhook_deliveries d where d.endpoint_id = webhook_endpoint_delete.endpoint_id and d.status = 'pending';
  delete from app.webhook_endpoints w where w.id = endpoint_id returning * into e;
  return app.webhook_endpoint_json(e);
end
$$;
comment on function api.webhook_endpoint_delete(text, text, uuid) is
  E'DELETE webhook-endpoints/{id}: discards pending attempts; returns after any in-flight send has finished, so nothing is sent afterwards.';

create function api.webhook_endpoint_rotate_secret(token_hash text, location_ref text, endpoint_id uuid) returns jsonb
  language plpgsql volatile
as $$
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
$$;
comment on function api.webhook_endpoint_rotate_secret(text, text, uuid) is
  E'POST webhook-endpoints/{id}/rotate-secret: new secret shown once; the old one keeps signing (second signature) for 24 h.';

create function api.webhook_endpoint_test(token_hash text, location_ref text, endpoint_id uuid) returns jsonb
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'webhooks:write');
  ev_id uuid;
begin
  if not exists (select 1 from app.webhook_endpoints w where w.id = endpoint_id) then return null; end if;
  ev_id := app.emit(a.location_id, 'webhook.test', jsonb_build_object(
    'endpoint_id', endpoint_id, 'message', 'This is a test event sent from the API.'));
  return (select app.webhook_delivery_json(d) from app.webhook_deliveries d where d.event_id = ev_id);
end
$$;
comment on function api.webhook_endpoint_test(text, text, uuid) is
  E'POST webhook-endpoints/{id}/test: a signed webhook.test event to this endpoint only; returns the queued attempt.';

create function api.webhook_deliveries_list(token_hash text, location_ref text, filters jsonb, page jsonb) returns jsonb
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'webhooks:read');
  lim int := app.page_limit(page);
  after app.page_cursor := app.page_after(page);
  f_endpoint uuid := (filters ->> 'endpoint_id')::uuid;
  f_event uuid := (filters ->> 'event_id')::uuid;
  f_status text := filters ->> 'status';
begin
  return app.page_result(array(
    select app.page_item(d.created_at, d.id, app.webhook_delivery_json(d)) from app.webhook_deliveries d
     where app.before_cursor(d.created_at, d.id, after)
       and (f_endpoint is null or d.endpoint_id = f_endpoint)
       and (f_event is null or d.event_id = f_event)
       and (f_status is null or d.status = f_status)
     order by d.created_at desc, d.id desc limit lim + 1), lim);
end
$$;
comment on function api.webhook_deliveries_list(text, text, jsonb, jsonb) is
  E'GET webhook-deliveries: attempts newest first; filters endpoint_id, event_id, status.';

create function api.webhook_delivery_retry(token_hash text, location_ref text, delivery_id uuid) returns jsonb
  language plpgsql volatile
as $$
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
$$;
comment on function api.webhook_delivery_retry(text, text, uuid) is
  E'POST webhook-deliveries/{id}/retry: a new attempt (new id, same event id) of a failed or dead delivery; one attempt, no automatic retries beyond the schedule.';

grant execute on function
  api.webhook_endpoints_create(text, text, jsonb), api.webhook_endpoints_list(text, text, jsonb),
  api.webhook_endpoint_get(text, text, uuid), api.webhook_endpoint_patch(text, text, uuid, jsonb),
  api.webhook_endpoint_delete(text, text, uuid), api.webhook_endpoint_rotate_secret(text, text, uuid),
  api.webhook_endpoint_test(text, text, uuid), api.webhook_deliveries_list(text, text, jsonb, jsonb),
  api.webhook_delivery_retry(text, text, uuid)
  to switchboard_api;

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

/*
 * MERGE NOTE (issue 10 rewrites this function): the only change to the 000009 definition is the
 * `test` key of the result, true for an attempt of a webhook.test event, which makes the sender
 * add `svc-test: true`. Keep that key in the rewritten claim.
 *
 * SECURITY DEFINER (owned by switchboard_system): the worker is not a tenant; the delivery id
 * from the job payload decides the location. Returns null when there is nothing to send now:
 * delivery gone (discarded), not pending, locked by another live attempt, endpoint deleted or
 * paused (held; resume re-enqueues it).
 */
create or replace function app.webhook_claim(delivery_id uuid, timeout_ms int) returns jsonb
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
    'url', e.url, 'body', ev.body, 'test', ev.type = 'webhook.test',
    'secrets', to_jsonb(array_remove(array[e.secret,
       case when e.previous_secret_expires_at > now() then e.previous_secret end], null)));
end
$$;
alter function app.webhook_claim(uuid, int) owner to switchboard_system;
comment on function app.webhook_claim(uuid, int) is
  E'Worker: locks and returns what to send for a pending attempt (test = a webhook.test send), or null when it must not be sent now.';
revoke execute on function app.webhook_claim(uuid, int) from public;

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

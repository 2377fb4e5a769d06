--! Previous: sha1:e60d2f1023de047cfbe92fe57b28878ab366d4f2
--! Hash: sha1:c83da13e6b54e02c1176a75b6e80b5e385488b3d
--! Message: Endpoint health: auto-disable, 410 Gone, failing and disabled notices, Retry-After

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

--! Previous: sha1:fa3c10103b49f7b2d095185b69ed2dfc512d652c
--! Hash: sha1:7de16d2967ba06192ea706e8c17648e06c343b6e
--! Message: notifications: routing, fan-out from events, send log, API

-- Notifications (issue 6, DESIGN.md §9): routing settings, fan-out from events, send bookkeeping, API.

create function app.notification_channels() returns text[]
  language sql immutable parallel safe
as $$ select array['sms', 'email', 'chat', 'automation'] $$;
comment on function app.notification_channels() is E'Notification channels: sms | email | chat (Slack) | automation (zapier, make, n8n, calcom).';

create function app.notification_routes_default() returns jsonb
  language sql immutable parallel safe
as $$
  select '{
    "call.emergency": ["sms", "email", "chat"],
    "lead.created": ["email", "chat"],
    "lead.updated": [],
    "booking.created": ["email", "chat"],
    "booking.updated": ["email", "chat"],
    "call.ended": [],
    "spam.blocked": []
  }'::jsonb
$$;
comment on function app.notification_routes_default() is
  E'DESIGN defaults: emergencies → sms + email + chat; leads and bookings → email + chat; spam and the rest → none.';

create function app.notification_routes_valid(routes jsonb) returns boolean
  language sql immutable parallel safe
as $$
  select jsonb_typeof(routes) = 'object'
     and not exists (
       select 1 from jsonb_each(routes) r(event, channels)
        where not r.event = any (app.event_types())
           or jsonb_typeof(r.channels) <> 'array'
           or exists (select 1 from jsonb_array_elements(r.channels) c
                       where jsonb_typeof(c) <> 'string' or not (c #>> '{}') = any (app.notification_channels()))
           or jsonb_array_length(r.channels) <> (select count(distinct c) from jsonb_array_elements(r.channels) c))
$$;
comment on function app.notification_routes_valid(jsonb) is
  E'True when routes is { known event type: [distinct known channels] }. The API validates first; this keeps staff and SQL writers honest too.';

create function app.emails_valid(emails text[]) returns boolean
  language sql immutable parallel safe
as $$
  select coalesce(bool_and(e ~ '^[^@\s]+@[^@\s]+\.[^@\s]+$' and length(e) <= 320), true) from unnest(emails) e
$$;
comment on function app.emails_valid(text[]) is E'True when every element looks like an e-mail address (same rule as members.email).';

alter table app.notification_settings
  alter column routes set default app.notification_routes_default(),
  add constraint notification_settings_routes_valid check (app.notification_routes_valid(routes)),
  add constraint notification_settings_sms_recipients_valid
    check (array_to_string(sms_recipients, ',') ~ '^(\+[1-9][0-9]{6,14}(,|$))*$' and cardinality(sms_recipients) <= 20),
  add constraint notification_settings_email_recipients_valid
    check (cardinality(email_recipients) <= 20 and app.emails_valid(email_recipients));
comment on column app.notification_settings.routes is
  E'{ event type: [channel…] } with channels sms | email | chat | automation; an event type absent here sends nothing.';

alter table app.notifications
  add column integration_id uuid references app.integrations on delete set null;
create index notifications_integration_idx on app.notifications (integration_id);
comment on column app.notifications.integration_id is
  E'The Slack or automation integration a chat/automation notification posts to; its URL is read at send time and never copied here (Slack URLs are secrets).';
comment on column app.notifications.recipient is
  E'Phone (sms), address (email), or the integration''s label or provider (chat, automation); null when skipped for want of one.';
comment on column app.notifications.attempts is E'Tries made so far (each is a row in notification_log).';
comment on column app.notifications.status is
  E'pending (queued or between retries) | sent | failed (after the last try) | skipped (no recipient, or channel not configured).';
comment on column app.notification_log.detail is E'What happened: provider answer, error, or why it was skipped.';
comment on column app.notification_log.response_status is E'HTTP status (or SMTP reply code) of the try, when there was one.';

/*
 * Fan-out: each event becomes one notification per routed channel × recipient, each with its own
 * send job. A routed channel with nobody to reach is recorded as skipped with the reason, so the
 * log explains silence. SECURITY DEFINER (owned by switchboard_system) because events are written
 * by API transactions, ingestion and staff alike, and the recipients (members, integrations,
 * owner_cell) must be read whatever the writer's role; it only reads rows of NEW.location_id.
 */
create function app.tg_events__notify() returns trigger
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
      perform app.enqueue('send_notification',
        jsonb_build_object('notification_id', n.id, 'location_id', n.location_id),
        null, 'notification:' || n.id, 4);
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
  E'Creates the notifications an event routes to (one per channel × recipient) and enqueues send_notification for each; unreachable channels are logged skipped.';
create trigger _600_notify after insert on app.events
  for each row execute function app.tg_events__notify();

/*
 * Worker side. The send task runs on the owner pool with no tenant set; these two functions are
 * SECURITY DEFINER (owned by switchboard_system, the role RLS lets see every location) so the task
 * reads and records exactly one notification by id, whatever the pool's role. Not granted to the
 * API role.
 */
create function app.notification_for_send(notification_id uuid) returns jsonb
  language sql stable security definer
  set search_path to pg_catalog, public, pg_temp
as $$
  select jsonb_build_object(
    'id', n.id, 'location_id', n.location_id, 'channel', n.channel, 'provider', n.provider,
    'recipient', n.recipient, 'status', n.status, 'attempts', n.attempts,
    'target_url', case when i.status = 'connected' then i.webhook_url end,
    'integration_status', i.status,
    'location', jsonb_build_object('name', l.name, 'timezone', l.timezone, 'service_phone', l.service_phone),
    'event', jsonb_build_object('event', e.type, 'location_id', e.location_id,
                                'created_at', app.iso(e.created_at), 'data', e.data),
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
    join app.events e on e.id = n.event_id
    left join app.integrations i on i.id = n.integration_id
   where n.id = notification_for_send.notification_id
$$;
alter function app.notification_for_send(uuid) owner to switchboard_system;
comment on function app.notification_for_send(uuid) is
  E'Everything the send task needs for one notification: channel, recipient, target URL (only while the integration is connected), event body, location and the unmasked callback number.';
revoke execute on function app.notification_for_send(uuid) from public;

create function app.notification_record(notification_id uuid, status text, detail text, response_status int, final boolean)
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
                       else notification_record.status end
   where t.id = notification_record.notification_id and t.status = 'pending'
  returning * into n;
  if n.id is null then return null; end if;
  insert into app.notification_log (location_id, notification_id, status, detail, response_status)
  values (n.location_id, n.id, notification_record.status, left(detail, 2000), response_status);
  return jsonb_build_object('id', n.id, 'status', n.status, 'attempts', n.attempts);
end
$$;
alter function app.notification_record(uuid, text, text, int, boolean) owner to switchboard_system;
comment on function app.notification_record(uuid, text, text, int, boolean) is
  E'Appends one try to notification_log and moves the notification: sent | skipped | failed (final) or back to pending (a retry follows). Only a pending notification moves, so a replayed job records nothing twice.';
revoke execute on function app.notification_record(uuid, text, text, int, boolean) from public;

-- API.

create function app.notification_settings_json(s app.notification_settings) returns jsonb
  language sql stable parallel safe
as $$
  select jsonb_build_object(
    'location_id', s.location_id,
    'routes', (select jsonb_object_agg(t, coalesce(s.routes -> t, '[]'::jsonb) order by o)
                 from unnest(app.event_types()) with ordinality u(t, o)),
    'sms_recipients', to_jsonb(s.sms_recipients),
    'email_recipients', to_jsonb(s.email_recipients),
    'updated_at', app.iso(s.updated_at))
$$;
comment on function app.notification_settings_json(app.notification_settings) is
  E'Notification settings as the API shows them: routes list every event type (an empty list = no notification).';

create function app.notification_json(n app.notifications, with_log boolean) returns jsonb
  language sql stable parallel safe
as $$
  select jsonb_build_object(
    'id', n.id, 'location_id', n.location_id, 'event_id', n.event_id, 'event', n.event,
    'channel', n.channel, 'provider', n.provider, 'recipient', n.recipient, 'status', n.status,
    'attempts', n.attempts, 'created_at', app.iso(n.created_at), 'updated_at', app.iso(n.updated_at))
  || case when with_log then jsonb_build_object('log', coalesce((
       select jsonb_agg(jsonb_build_object('at', app.iso(g.at), 'status', g.status, 'detail', g.detail,
                                           'response_status', g.response_status) order by g.at, g.id)
         from app.notification_log g where g.notification_id = n.id), '[]'::jsonb))
     else '{}'::jsonb end
$$;
comment on function app.notification_json(app.notifications, boolean) is E'Notification as the API shows it; with_log adds its tries, oldest first.';

create function api.notification_settings_get(token_hash text, location_ref text) returns jsonb
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'settings:read');
begin
  return (select app.notification_settings_json(s) from app.notification_settings s where s.location_id = a.location_id);
end
$$;
comment on function api.notification_settings_get(text, text) is E'GET notification-settings.';

create function api.notification_settings_patch(token_hash text, location_ref text, patch jsonb) returns jsonb
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'settings:write');
  s app.notification_settings;
begin
  -- routes merge per event type: a PATCH naming lead.created leaves the other event types alone.
  update app.notification_settings t
     set routes = t.routes || coalesce(patch -> 'routes', '{}'::jsonb),
         sms_recipients = case when patch ? 'sms_recipients'
           then array(select jsonb_array_elements_text(patch -> 'sms_recipients')) else t.sms_recipients end,
         email_recipients = case when patch ? 'email_recipients'
           then array(select jsonb_array_elements_text(patch -> 'email_recipients')) else t.email_recipients end
   where t.location_id = a.location_id
  returning * into s;
  return app.notification_settings_json(s);
end
$$;
comment on function api.notification_settings_patch(text, text, jsonb) is
  E'PATCH notification-settings: routes merge per event type; recipient lists present in the body replace the stored ones.';

create function api.notifications_list(token_hash text, location_ref text, page jsonb, with_log boolean) returns jsonb
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'notifications:read');
  lim int := app.page_limit(page);
  after app.page_cursor := app.page_after(page);
begin
  return app.page_result(array(
    select app.page_item(n.created_at, n.id, app.notification_json(n, coalesce(with_log, false)))
      from app.notifications n
     where app.before_cursor(n.created_at, n.id, after)
     order by n.created_at desc, n.id desc limit lim + 1), lim);
end
$$;
comment on function api.notifications_list(text, text, jsonb, boolean) is
  E'GET notifications[?include=log]: newest first, keyset pages.';

grant execute on function api.notification_settings_get(text, text),
  api.notification_settings_patch(text, text, jsonb),
  api.notifications_list(text, text, jsonb, boolean) to switchboard_api;

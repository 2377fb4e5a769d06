--! Previous: sha1:bc40a56f8e1cd0ddadf9f24e62f5f35f1d3aa2e8
--! Hash: sha1:4994e8adfeb89e8d832718db021022770a26111c
--! Message: notification settings and log

-- Notifications (docs/notifications.md): routing settings, one row per message with its log, the
-- fan-out from events and operational notices, and the lane's claim / record / release / sweep.

create function app.emails_valid(emails text[])
 RETURNS boolean
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
  select coalesce(bool_and(e ~ '^[^@\s]+@[^@\s]+\.[^@\s]+$' and length(e) <= 320), true) from unnest(emails) e
$function$;
comment on function app.emails_valid(text[]) is E'True when every element looks like an e-mail address (same rule as members.email).';

create function app.notification_routes_default()
 RETURNS jsonb
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
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
$function$;
comment on function app.notification_routes_default() is E'Defaults: emergencies → sms + email + chat; leads and bookings → email + chat; webhook endpoint failing/disabled → email + chat; spam and the rest → none.';

create function app.operational_notification_types()
 RETURNS text[]
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$ select array['webhook_endpoint.failing', 'webhook_endpoint.disabled'] $function$;
comment on function app.operational_notification_types() is E'Notification types that are not events (never sent as webhooks): a failing webhook endpoint, a disabled one.';

create function app.notification_types()
 RETURNS text[]
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$ select app.event_types() || app.operational_notification_types() $function$;
comment on function app.notification_types() is E'Every type notification-settings routes: the event types, then the operational ones.';

create function app.notification_channels()
 RETURNS text[]
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$ select array['sms', 'email', 'chat', 'automation'] $function$;
comment on function app.notification_channels() is E'Notification channels: sms | email | chat (Slack) | automation (zapier, make, n8n, calcom).';

create function app.notification_routes_valid(routes jsonb)
 RETURNS boolean
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
  select jsonb_typeof(routes) = 'object'
     and not exists (
       select 1 from jsonb_each(routes) r(event, channels)
        where not r.event = any (app.notification_types())
           or jsonb_typeof(r.channels) <> 'array'
           or exists (select 1 from jsonb_array_elements(r.channels) c
                       where jsonb_typeof(c) <> 'string' or not (c #>> '{}') = any (app.notification_channels()))
           or jsonb_array_length(r.channels) <> (select count(distinct c) from jsonb_array_elements(r.channels) c))
$function$;
comment on function app.notification_routes_valid(jsonb) is E'True when routes is { known notification type: [distinct known channels] }. The API validates first; this keeps staff and SQL writers honest too.';

create table app.notification_settings (
  location_id uuid not null,
  routes jsonb default app.notification_routes_default() not null,
  sms_recipients text[] default '{}'::text[] not null,
  email_recipients text[] default '{}'::text[] not null,
  updated_at timestamp with time zone default now() not null,
  constraint notification_settings_pkey primary key (location_id),
  constraint notification_settings_routes_check check ((jsonb_typeof(routes) = 'object'::text)),
  constraint notification_settings_routes_valid check (app.notification_routes_valid(routes)),
  constraint notification_settings_sms_recipients_valid check (((array_to_string(sms_recipients, ','::text) ~ '^(\+[1-9][0-9]{6,14}(,|$))*$'::text) AND (cardinality(sms_recipients) <= 20))),
  constraint notification_settings_email_recipients_valid check (((cardinality(email_recipients) <= 20) AND app.emails_valid(email_recipients))),
  constraint notification_settings_location_id_fkey foreign key (location_id) references app.locations (id) on delete cascade
);
comment on table app.notification_settings is E'Which events notify which channels, and extra recipients. A location without a row uses the defaults.';
comment on column app.notification_settings.routes is E'{ event type: [channel…] } with channels sms | email | chat | automation; an event type absent here sends nothing.';
comment on column app.notification_settings.sms_recipients is E'E.164 numbers texted besides the owner''s cell.';
comment on column app.notification_settings.email_recipients is E'Addresses e-mailed besides owners and admins.';
select app.secure_tenant_table('app.notification_settings');

create table app.notifications (
  id uuid default gen_random_uuid() not null,
  location_id uuid not null,
  event_id uuid,
  event text not null,
  channel text not null,
  provider text not null,
  recipient text,
  status text default 'pending'::text not null,
  attempts integer default 0 not null,
  created_at timestamp with time zone default now() not null,
  updated_at timestamp with time zone default now() not null,
  integration_id uuid,
  lease_expires_at timestamp with time zone,
  lease_owner text,
  data jsonb,
  next_attempt_at timestamp with time zone default now(),
  priority smallint default 0 not null,
  constraint notifications_pkey primary key (id, location_id),
  constraint notifications_channel_check check ((channel = ANY (ARRAY['sms'::text, 'email'::text, 'chat'::text, 'automation'::text]))),
  constraint notifications_status_check check ((status = ANY (ARRAY['pending'::text, 'sent'::text, 'failed'::text, 'skipped'::text]))),
  constraint notifications_source_check check (((event_id IS NOT NULL) OR (jsonb_typeof(data) = 'object'::text))),
  constraint notifications_provider_check check ((provider = ANY (ARRAY['twilio'::text, 'smtp'::text, 'slack'::text, 'zapier'::text, 'make'::text, 'n8n'::text, 'calcom'::text, 'automation'::text]))),
  constraint notifications_location_id_fkey foreign key (location_id) references app.locations (id) on delete cascade,
  constraint notifications_event_id_fkey foreign key (location_id, event_id) references app.events (location_id, id) on delete cascade,
  constraint notifications_integration_id_fkey foreign key (location_id, integration_id) references app.integrations (location_id, id) on delete set null (integration_id)
);
comment on table app.notifications is E'One message to a person or room (SMS, e-mail, chat, automation) derived from an event.';
comment on column app.notifications.provider is E'twilio (sms) | smtp (email) | slack (chat) | zapier | make | n8n | calcom (automation) | automation (an automation notification skipped: no such integration connected).';
comment on column app.notifications.recipient is E'Phone (sms), address (email), or the integration''s label or provider (chat, automation); null when skipped for want of one.';
comment on column app.notifications.status is E'pending (queued or between retries) | sent | failed (after the last try) | skipped (no recipient, or channel not configured).';
comment on column app.notifications.attempts is E'Tries made so far (each is a row in notification_log).';
comment on column app.notifications.integration_id is E'The Slack or automation integration a chat/automation notification posts to; its URL is read at send time and never copied here (Slack URLs are secrets).';
comment on column app.notifications.lease_expires_at is E'@behavior -filterBy -orderBy\nWhile a worker sends this notification: when its claim lapses. Null otherwise; an expired lease without a result is a dead try the sweeper re-queues.';
comment on column app.notifications.lease_owner is E'@behavior -filterBy -orderBy\nThe graphile-worker pool (locked_by) whose job holds the lease.';
comment on column app.notifications.data is E'@behavior -filterBy -orderBy\nWhat an operational notification (no event_id: webhook_endpoint.failing, webhook_endpoint.disabled) is about; null when the notification comes from an event (the event''s data is used).';
comment on column app.notifications.next_attempt_at is E'@behavior -filterBy -orderBy\nWhile pending: when the next try is due (now for a new one, later after a failed try). Null once settled.';
comment on column app.notifications.priority is E'@behavior -filterBy -orderBy\nClaim order: lower first (app.notification_priority: emergencies -10, the rest 0).';
select app.secure_tenant_table('app.notifications');
create index notifications_location_created_idx on app.notifications (location_id, created_at DESC, id DESC);
create index notifications_leased_idx on app.notifications (lease_expires_at) WHERE ((status = 'pending'::text) AND (lease_expires_at IS NOT NULL));
create index notifications_event_idx on app.notifications (event_id, location_id);
create index notifications_integration_idx on app.notifications (integration_id, location_id);
create index notifications_due_idx on app.notifications (priority, next_attempt_at, id) WHERE ((status = 'pending'::text) AND (lease_expires_at IS NULL));

create table app.notification_log (
  id uuid default gen_random_uuid() not null,
  location_id uuid not null,
  notification_id uuid not null,
  at timestamp with time zone default now() not null,
  status text not null,
  detail text,
  response_status integer,
  constraint notification_log_pkey primary key (id, location_id),
  constraint notification_log_status_check check ((status = ANY (ARRAY['pending'::text, 'sent'::text, 'failed'::text, 'skipped'::text]))),
  constraint notification_log_location_id_fkey foreign key (location_id) references app.locations (id) on delete cascade,
  constraint notification_log_notification_id_fkey foreign key (location_id, notification_id) references app.notifications (location_id, id) on delete cascade
);
comment on table app.notification_log is E'Each try of a notification, with its outcome.';
comment on column app.notification_log.detail is E'What happened: provider answer, error, or why it was skipped.';
comment on column app.notification_log.response_status is E'HTTP status (or SMTP reply code) of the try, when there was one.';
select app.secure_tenant_table('app.notification_log');
create index notification_log_location_idx on app.notification_log (location_id);
create index notification_log_notification_idx on app.notification_log (notification_id, location_id, at);

create function app.tg_events__notify()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
begin
  if new.type = 'webhook.test' then return null; end if;
  perform app.notification_fanout(new.location_id, new.id, new.type, new.data);
  return null;
end
$function$;
alter function app.tg_events__notify() owner to switchboard_system;
comment on function app.tg_events__notify() is E'Creates the notifications an event routes to (app.notification_fanout); webhook.test never notifies. SECURITY DEFINER (switchboard_system) for the same reason as the fan-out.';

create function app.notification_settings_json(s app.notification_settings)
 RETURNS jsonb
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$
  select jsonb_build_object(
    'location_id', s.location_id,
    'routes', (select jsonb_object_agg(t, coalesce(s.routes -> t, '[]'::jsonb) order by o)
                 from unnest(app.notification_types()) with ordinality u(t, o)),
    'sms_recipients', to_jsonb(s.sms_recipients),
    'email_recipients', to_jsonb(s.email_recipients),
    'updated_at', app.iso(s.updated_at))
$function$;
comment on function app.notification_settings_json(app.notification_settings) is E'Notification settings as the API shows them: routes list every notification type (an empty list = no notification).';

create function app.notification_json(n app.notifications, with_log boolean)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE PARALLEL SAFE
AS $function$
declare
  j jsonb := jsonb_build_object(
    'id', n.id, 'location_id', n.location_id, 'event_id', n.event_id, 'event', n.event,
    'channel', n.channel, 'provider', n.provider, 'recipient', n.recipient, 'status', n.status,
    'attempts', n.attempts, 'created_at', app.iso(n.created_at), 'updated_at', app.iso(n.updated_at));
begin
  if not with_log then
    return j;
  end if;
  return j || jsonb_build_object('log', coalesce((
    select jsonb_agg(jsonb_build_object('at', app.iso(g.at), 'status', g.status, 'detail', g.detail,
                                        'response_status', g.response_status) order by g.at, g.id)
      from app.notification_log g where g.notification_id = n.id), '[]'::jsonb));
end
$function$;
comment on function app.notification_json(app.notifications,boolean) is E'Notification as the API shows it; with_log adds its tries, oldest first. plpgsql for the same reason as app.page_result: the log sub-select kept it from being inlined.';

create function api.notification_settings_get(token_hash text, location_ref text)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'settings:read');
begin
  return (select app.notification_settings_json(s) from app.notification_settings s where s.location_id = a.location_id);
end
$function$;
comment on function api.notification_settings_get(text,text) is E'GET notification-settings.';

create function api.notification_settings_patch(token_hash text, location_ref text, patch jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
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
$function$;
comment on function api.notification_settings_patch(text,text,jsonb) is E'PATCH notification-settings: routes merge per event type; recipient lists present in the body replace the stored ones.';

create function api.notifications_list(token_hash text, location_ref text, page jsonb, with_log boolean)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'notifications:read');
  lim int := app.page_limit(page);
  after app.page_cursor := app.page_after(page);
begin
  -- Every value sits behind a sub-select, so the cached generic plan is chosen (see api.calls_list).
  return app.page_result(array(
    select app.page_item(n.created_at, n.id, app.notification_json(n, coalesce(with_log, false)))
      from app.notifications n
     where (n.created_at, n.id) < (select after.created_at, after.id)
     order by n.created_at desc, n.id desc limit (select lim + 1)), lim);
end
$function$;
comment on function api.notifications_list(text,text,jsonb,boolean) is E'GET notifications[?include=log]: newest first, keyset pages.';

create function app.notification_priority(event text)
 RETURNS integer
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$ select case when event = 'call.emergency' then -10 else 0 end $function$;
comment on function app.notification_priority(text) is E'Claim order of a notification (app.notifications.priority): emergencies (-10) before everything else (0).';

create function app.notification_sweep(grace_seconds integer)
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
declare
  cutoff timestamptz := now() - make_interval(secs => grace_seconds);
  n int;
begin
  update app.notifications t set lease_expires_at = null, lease_owner = null, next_attempt_at = now()
   where t.id in (select x.id from app.notifications x
                   where x.status = 'pending' and x.lease_expires_at < cutoff
                     for update skip locked);
  get diagnostics n = row_count;
  if n > 0 then perform app.notification_wake(); end if;
  return n;
end
$function$;
alter function app.notification_sweep(integer) owner to switchboard_system;
comment on function app.notification_sweep(integer) is E'Worker (cron): queues again, due at once, the notifications whose lease lapsed without a result (the engine died).';

create function app.notification_fanout(location_id uuid, event_id uuid, type text, data jsonb)
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
declare
  loc uuid := notification_fanout.location_id;
  routes jsonb;
  chans text[];
  reached text[];
  queued int;
  skipped int;
begin
  select s.routes into routes from app.notification_settings s where s.location_id = loc;
  chans := array(select distinct c from jsonb_array_elements_text(coalesce(coalesce(routes, app.notification_routes_default()) -> type, '[]')) c);
  if cardinality(chans) = 0 then return 0; end if;
  -- Every routed channel's recipients in one insert (one statement per event, not per channel);
  -- the rows are the notification engines' queue.
  with rcpt as (
      (select 'sms'::text as channel, 'twilio'::text as provider, r.recipient, null::uuid as integration_id
        from (select l.owner_cell::text as recipient, 0 as ord from app.locations l where l.id = loc
              union all
              select x, o from app.notification_settings s, unnest(s.sms_recipients) with ordinality u(x, o)
               where s.location_id = loc) r
       where 'sms' = any (chans) and r.recipient is not null
       group by r.recipient order by min(r.ord))
      union all
      (select 'email', 'smtp', min(e.email), null::uuid
        from (select m.email, 0 as ord from app.members m
               where m.location_id = loc and m.role in ('owner', 'admin')
              union all
              select x, o from app.notification_settings s, unnest(s.email_recipients) with ordinality u(x, o)
               where s.location_id = loc) e
       where 'email' = any (chans)
       group by lower(e.email) order by min(e.ord), lower(e.email))
      union all
      (select case when i.provider = 'slack' then 'chat' else 'automation' end, i.provider, coalesce(i.label, i.provider), i.id
        from app.integrations i
       where i.location_id = loc and i.status = 'connected' and i.webhook_url is not null
         and ((i.provider = 'slack' and 'chat' = any (chans))
           or (i.provider in ('zapier', 'make', 'n8n', 'calcom') and 'automation' = any (chans)))
       order by i.created_at, i.id)
  ), made_rows as (
    insert into app.notifications (location_id, event_id, event, channel, provider, recipient, integration_id, data, priority)
    select loc, event_id, type, r.channel, r.provider, r.recipient, r.integration_id,
           case when event_id is null then data end, app.notification_priority(type)
      from rcpt r
    returning channel
  )
  select count(*)::int, coalesce(array_agg(distinct m.channel), '{}') into queued, reached from made_rows m;
  if queued > 0 then perform app.notification_wake(); end if;
  if cardinality(reached) = cardinality(chans) then return queued; end if;
  -- A routed channel with nobody to reach gets one skipped notification with the reason, so silence is explained.
  with unreached as (
    select c as channel from unnest(chans) c where not c = any (reached)
  ), made as (
    insert into app.notifications (location_id, event_id, event, channel, provider, status, data, next_attempt_at)
    select loc, event_id, type, u.channel,
           case u.channel when 'sms' then 'twilio' when 'email' then 'smtp' when 'chat' then 'slack' else 'automation' end,
           'skipped', case when event_id is null then data end, null
      from unreached u
    returning id, channel
  )
  insert into app.notification_log (location_id, notification_id, status, detail)
  select loc, m.id, 'skipped', case m.channel
    when 'sms' then 'no SMS recipient: owner_cell is unset and sms_recipients is empty'
    when 'email' then 'no e-mail recipient: no owner or admin member and email_recipients is empty'
    when 'chat' then 'no slack integration connected'
    else 'no automation integration connected (zapier, make, n8n, calcom)' end
    from made m;
  get diagnostics skipped = row_count;
  return queued + skipped;
end
$function$;
alter function app.notification_fanout(uuid,uuid,text,jsonb) owner to switchboard_system;
comment on function app.notification_fanout(uuid,uuid,text,jsonb) is E'Creates the notifications one occurrence routes to (channel × recipient; event_id null + data for operational ones) due at once in the notification queue (emergencies first; one wake-up for the engines); unreachable channels are logged skipped.';

create function app.notification_wake()
 RETURNS void
 LANGUAGE sql
AS $function$ select app.engine_wake('switchboard_notifications') $function$;
comment on function app.notification_wake() is E'Wakes the notification engines (app.engine_wake on switchboard_notifications) when notifications became due.';

create function app.notification_claim_batch(owner text, max_claims integer, lease_ms integer)
 RETURNS json
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
declare
  t timestamptz := clock_timestamp();
  ids uuid[];
  next_due timestamptz;
begin
  select array_agg(p.id order by p.priority, p.next_attempt_at, p.id) into ids
    from (select n.id, n.priority, n.next_attempt_at from app.notifications n
           where n.status = 'pending' and n.lease_expires_at is null and n.next_attempt_at <= t
           order by n.priority, n.next_attempt_at, n.id
           limit greatest(max_claims, 0)
             for update skip locked) p;
  if ids is not null then
    update app.notifications n
       set lease_expires_at = t + make_interval(secs => lease_ms / 1000.0), lease_owner = owner
     where n.id = any (ids);
  end if;
  if coalesce(cardinality(ids), 0) < max_claims then
    -- The queue has nothing more due: when the engine should look again (a retry's backoff).
    select min(n.next_attempt_at) into next_due from app.notifications n
     where n.status = 'pending' and n.lease_expires_at is null;
  end if;
  return json_build_object(
    'claims', app.notification_for_send(coalesce(ids, '{}')),
    'next_due_at', app.iso(next_due));
end
$function$;
alter function app.notification_claim_batch(text,integer,integer) owner to switchboard_system;
comment on function app.notification_claim_batch(text,integer,integer) is E'Notification engine: leases up to max_claims due notifications (emergencies first, then by due time) for one try each and returns what to send, plus when the next one falls due when the queue ran dry.';

create function app.notification_record_batch(owner text, results jsonb, max_attempts integer)
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
declare
  bad text;
  n int;
begin
  select x.status into bad
    from jsonb_to_recordset(results) x(status text)
   where x.status is null or x.status not in ('sent', 'failed', 'skipped') limit 1;
  if found then
    perform app.raise('SB400', format('Unknown notification outcome %s', coalesce(bad, 'null')));
  end if;
  with r as (
    select x.id, x.status, x.detail, x.response_status,
           x.status = 'failed' and not coalesce(x.permanent, false) as retryable
      from jsonb_to_recordset(results) x(id uuid, status text, detail text, response_status integer, permanent boolean)
  ), moved as (
    update app.notifications t
       set attempts = t.attempts + case when r.status = 'skipped' then 0 else 1 end,
           status = case when r.retryable and t.attempts + 1 < max_attempts then 'pending' else r.status end,
           -- graphile-worker's backoff, which this lane used before: e^attempts seconds (2.7 s, 7.4 s, 20 s).
           next_attempt_at = case when r.retryable and t.attempts + 1 < max_attempts
                                  then now() + make_interval(secs => exp(least(10, t.attempts + 1))) end,
           lease_expires_at = null,
           lease_owner = null
      from r
     -- The ids as an array: an index scan of the primary key (joined to the recordset alone, whose
     -- size the planner cannot know, it would read the whole table).
     where t.id = any (array(select x.id from jsonb_to_recordset(results) x(id uuid)))
       and t.id = r.id and t.status = 'pending' and t.lease_owner = owner
    returning t.id, t.location_id, r.status, r.detail, r.response_status
  )
  insert into app.notification_log (location_id, notification_id, status, detail, response_status)
  select m.location_id, m.id, m.status, left(m.detail, 2000), m.response_status from moved m;
  get diagnostics n = row_count;
  return n;
end
$function$;
alter function app.notification_record_batch(text,jsonb,integer) owner to switchboard_system;
comment on function app.notification_record_batch(text,jsonb,integer) is E'Notification engine: records tries [{id, status sent|failed|skipped, detail, response_status, permanent}] held by owner. Each appends to notification_log, ends its lease and moves the notification: sent | skipped | failed (permanent, or the max_attempts-th try) or pending again after e^attempts seconds. A try whose lease was swept and taken by another engine is not recorded twice. Returns how many were recorded.';

create function app.notification_release(owner text, ids uuid[])
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
declare
  n int;
begin
  update app.notifications t set lease_expires_at = null, lease_owner = null, next_attempt_at = now()
   where t.id = any (ids) and t.status = 'pending' and t.lease_owner = owner;
  get diagnostics n = row_count;
  if n > 0 then perform app.notification_wake(); end if;
  return n;
end
$function$;
alter function app.notification_release(text,uuid[]) owner to switchboard_system;
comment on function app.notification_release(text,uuid[]) is E'Notification engine: ends the leases of tries abandoned unsent (shutdown); they are due again at once, no try is counted.';

create function app.notification_for_send(ids uuid[])
 RETURNS json
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
begin
  -- plpgsql, not sql: its plan is kept for the session (a SQL function's body is planned on every call).
  return (select coalesce(json_agg(jsonb_build_object(
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
      case when e.type like 'call.%' then (select c.caller_phone from app.calls c
                                            where c.id = app.uuid_or_null(e.data ->> 'id') and c.location_id = n.location_id) end,
      case when e.type like 'lead.%' then e.data ->> 'phone' end,
      case when e.type like 'booking.%' then (
        select coalesce(ld.phone, cu.phone) from (select 1) one
          left join app.leads ld on ld.id = app.uuid_or_null(e.data ->> 'lead_id') and ld.location_id = n.location_id
          left join app.customers cu on cu.id = app.uuid_or_null(e.data ->> 'customer_id') and cu.location_id = n.location_id) end,
      case when e.type = 'spam.blocked' then null end)) order by x.o), '[]'::json)
    from unnest(ids) with ordinality x(id, o)
    join app.notifications n on n.id = x.id
    join app.locations l on l.id = n.location_id
    left join app.events e on e.id = n.event_id
    left join app.integrations i on i.id = n.integration_id);
end
$function$;
alter function app.notification_for_send(uuid[]) owner to switchboard_system;
comment on function app.notification_for_send(uuid[]) is E'Everything the engine needs to send these notifications, as a JSON array in the order of ids: channel, recipient, target URL (only while the integration is connected), the body (the event''s, or the notification''s own data for an operational one), location and the unmasked callback number.';

-- Triggers (name prefix = firing order; see migrations/CONVENTIONS.md)
create trigger _600_notify AFTER INSERT ON app.events FOR EACH ROW
  execute function app.tg_events__notify();
create trigger _100_set_updated_at BEFORE UPDATE ON app.notification_settings FOR EACH ROW
  execute function app.tg__set_updated_at();
create trigger _100_set_updated_at BEFORE UPDATE ON app.notifications FOR EACH ROW
  execute function app.tg__set_updated_at();

-- Grants: the one place for this concern's privileges (tenant tables get theirs from
-- app.secure_tenant_table above; only departures from it are here).
grant execute on function api.notification_settings_get(text,text) to switchboard_api;
grant execute on function api.notification_settings_patch(text,text,jsonb) to switchboard_api;
grant execute on function api.notifications_list(text,text,jsonb,boolean) to switchboard_api;
revoke execute on function app.notification_sweep(integer) from public;
revoke execute on function app.notification_fanout(uuid,uuid,text,jsonb) from public;
revoke execute on function app.notification_claim_batch(text,integer,integer) from public;
revoke execute on function app.notification_record_batch(text,jsonb,integer) from public;
revoke execute on function app.notification_release(text,uuid[]) from public;
revoke execute on function app.notification_for_send(uuid[]) from public;

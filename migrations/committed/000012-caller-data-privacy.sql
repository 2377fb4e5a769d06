--! Previous: sha1:f0eebb16105b5652e2048b16766879204cbde756
--! Hash: sha1:1464fa98e0d4ec140960d6e6194493f63cf5f22a
--! Message: caller-data privacy

-- Caller-data privacy settings per location (docs/privacy.md). A location without a row has the
-- defaults: redaction on, content and personal data kept until erased.
create table app.privacy_settings (
  location_id uuid not null,
  redact_sensitive_data boolean default true not null,
  content_retention_days integer,
  personal_data_retention_days integer,
  updated_at timestamp with time zone default now() not null,
  constraint privacy_settings_pkey primary key (location_id),
  constraint privacy_settings_content_retention_days_check check ((content_retention_days between 1 and 36500)),
  constraint privacy_settings_personal_data_retention_days_check check ((personal_data_retention_days between 1 and 36500)),
  constraint privacy_settings_location_id_fkey foreign key (location_id) references app.locations (id) on delete cascade
);
comment on table app.privacy_settings is E'Caller-data redaction and retention of a location; no row means the defaults.';
comment on column app.privacy_settings.redact_sensitive_data is E'Card numbers, security codes, expiry dates and SSNs are replaced at ingestion.';
comment on column app.privacy_settings.content_retention_days is E'Days after which a call''s transcript, turns, recording and log URLs are cleared; null keeps them.';
comment on column app.privacy_settings.personal_data_retention_days is E'Days after which caller personal data is anonymised; null keeps it.';
select app.secure_tenant_table('app.privacy_settings');

create or replace function app.tg_locations__defaults()
 returns trigger
 language plpgsql
as $function$
begin
  insert into app.call_forwarding (location_id) values (new.id);
  insert into app.agent_settings (location_id) values (new.id);
  insert into app.notification_settings (location_id) values (new.id);
  insert into app.privacy_settings (location_id) values (new.id);
  return null;
end
$function$;
comment on function app.tg_locations__defaults() is E'Creates the call forwarding, agent, notification and privacy settings rows of a new location.';

insert into app.privacy_settings (location_id) select id from app.locations on conflict do nothing;

-- ============================================================================================
-- Caller-data lifecycle: retention, erasure, export (docs/privacy.md).
-- ============================================================================================

-- Marks on the records the lifecycle clears. A customer's phone may now be null: an anonymised
-- customer keeps its row (and its counts) but no longer answers to its number.
alter table app.customers alter column phone drop not null;
alter table app.customers add column anonymised_at timestamp with time zone;
comment on column app.customers.anonymised_at is E'When the customer''s phone, name, e-mail and address were cleared (retention or erasure; docs/privacy.md); the row and its counts stay.';
alter table app.calls add column content_purged_at timestamp with time zone;
alter table app.calls add column anonymised_at timestamp with time zone;
comment on column app.calls.content_purged_at is E'When the call''s transcript, turns, recording and log URLs, platform summary and metadata were cleared (content retention or erasure; docs/privacy.md).';
comment on column app.calls.anonymised_at is E'When the caller''s phone, name, address, e-mail and the issue summary were cleared (personal-data retention or erasure); outcome, times, value and service stay, so counts and insights do not change.';
alter table app.leads add column anonymised_at timestamp with time zone;
comment on column app.leads.anonymised_at is E'When name, phone, e-mail, address and notes were cleared (personal-data retention or erasure).';
alter table app.bookings add column anonymised_at timestamp with time zone;
comment on column app.bookings.anonymised_at is E'When address and notes were cleared (personal-data retention or erasure).';
alter table app.events add column redacted_at timestamp with time zone;
comment on column app.events.redacted_at is E'When the caller''s personal fields were cleared from data and body (erasure or personal-data retention); a retry or recovery sends the cleared body.';

-- Erasure look-ups (one caller among a million calls) and the retention prune's batches: each
-- partial index holds only the rows still to be cleared, so a batch starts at its first row.
create index customers_location_email_idx on app.customers (location_id, lower(email)) where email is not null;
create index customers_personal_retention_idx on app.customers (location_id, coalesce(last_call_at, created_at)) where anonymised_at is null;
create index calls_location_caller_phone_idx on app.calls (location_id, caller_phone) where caller_phone is not null;
create index calls_location_caller_email_idx on app.calls (location_id, lower(caller_email)) where caller_email is not null;
create index calls_content_retention_idx on app.calls (location_id, created_at) where content_purged_at is null;
create index calls_personal_retention_idx on app.calls (location_id, created_at) where anonymised_at is null;
create index leads_location_phone_idx on app.leads (location_id, phone) where phone is not null;
create index leads_location_email_idx on app.leads (location_id, lower(email)) where email is not null;
create index leads_personal_retention_idx on app.leads (location_id, created_at) where anonymised_at is null;
create index bookings_personal_retention_idx on app.bookings (location_id, created_at) where anonymised_at is null;
create index events_location_data_id_idx on app.events (location_id, (data ->> 'id'));
create index events_location_spam_call_idx on app.events (location_id, (data ->> 'call_id')) where type = 'spam.blocked';
create index events_personal_retention_idx on app.events (location_id, created_at) where redacted_at is null;

-- One row per erasure request. The identifier is never stored in clear: identifier_hashes holds
-- SHA-256 of "location_id:kind:normalised value" per kind given.
create table app.erasures (
  id uuid default gen_random_uuid() not null,
  location_id uuid not null,
  identifier_kinds text[] not null,
  identifier_hashes jsonb not null,
  source text not null,
  api_key_id uuid,
  status text default 'completed'::text not null,
  matched jsonb not null,
  event_id uuid,
  created_at timestamp with time zone default now() not null,
  completed_at timestamp with time zone,
  updated_at timestamp with time zone default now() not null,
  constraint erasures_pkey primary key (id, location_id),
  constraint erasures_identifier_kinds_check check ((cardinality(identifier_kinds) >= 1 and identifier_kinds <@ array['phone', 'email', 'customer_id'])),
  constraint erasures_source_check check ((source = any (array['api'::text, 'cli'::text]))),
  constraint erasures_status_check check ((status = any (array['processing'::text, 'completed'::text, 'completed_with_failures'::text]))),
  constraint erasures_location_id_fkey foreign key (location_id) references app.locations (id) on delete cascade
);
comment on table app.erasures is E'A request to erase one caller''s personal data in a location (docs/privacy.md "Erasure"): what was matched per kind and, when the voice platform is configured, its deletions.';
comment on column app.erasures.identifier_kinds is E'Which identifiers the request gave: phone, email, customer_id.';
comment on column app.erasures.identifier_hashes is E'@behavior -filterBy -orderBy\n{ kind: SHA-256 hex of "location_id:kind:normalised value" }: lets staff confirm a given identifier was erased without keeping it in clear.';
comment on column app.erasures.source is E'api (a token with privacy:write) | cli (staff).';
comment on column app.erasures.api_key_id is E'The API key that asked (source api).';
comment on column app.erasures.status is E'processing (voice-platform deletions pending) | completed | completed_with_failures (a platform deletion failed after its last try). Our own data is cleared before the request answers.';
comment on column app.erasures.matched is E'Rows cleared per kind: customers, calls, leads, bookings, notifications, webhook_attempts, events.';
comment on column app.erasures.event_id is E'The customer.erased event (ids only); null when nothing matched.';
select app.secure_tenant_table('app.erasures', 'select');
create index erasures_location_created_idx on app.erasures (location_id, created_at desc, id desc);

-- Per matched call: its deletion at the voice platform (erasure_platform_delete job).
create table app.erasure_platform_calls (
  id uuid default gen_random_uuid() not null,
  location_id uuid not null,
  erasure_id uuid not null,
  call_id uuid,
  platform_call_id text not null,
  status text default 'pending'::text not null,
  attempts integer default 0 not null,
  response_status integer,
  last_error text,
  updated_at timestamp with time zone default now() not null,
  constraint erasure_platform_calls_pkey primary key (id, location_id),
  constraint erasure_platform_calls_erasure_call_key unique (location_id, erasure_id, platform_call_id),
  constraint erasure_platform_calls_status_check check ((status = any (array['pending'::text, 'deleted'::text, 'failed'::text]))),
  constraint erasure_platform_calls_location_id_fkey foreign key (location_id) references app.locations (id) on delete cascade,
  constraint erasure_platform_calls_erasure_id_fkey foreign key (location_id, erasure_id) references app.erasures (location_id, id) on delete cascade,
  constraint erasure_platform_calls_call_id_fkey foreign key (location_id, call_id) references app.calls (location_id, id) on delete set null (call_id)
);
comment on table app.erasure_platform_calls is E'One matched call of an erasure to delete at the voice platform (Retell delete-call): pending until deleted (204, or 404: already gone) or failed after the last try.';
comment on column app.erasure_platform_calls.platform_call_id is E'The platform''s call_id the DELETE names.';
comment on column app.erasure_platform_calls.attempts is E'DELETE requests made so far.';
comment on column app.erasure_platform_calls.last_error is E'Why the last try failed (status or connection error; never a response body).';
select app.secure_tenant_table('app.erasure_platform_calls', 'select');
create index erasure_platform_calls_erasure_idx on app.erasure_platform_calls (erasure_id, location_id);
create index erasure_platform_calls_call_idx on app.erasure_platform_calls (call_id, location_id);

-- Scopes and the event type of this concern.
create or replace function app.known_scopes()
 returns text[]
 language sql
 immutable parallel safe
as $function$
  select array[
    'locations:read', 'locations:write', 'api_keys:read', 'calls:read', 'transcripts:read',
    'recordings:read', 'leads:read', 'leads:write', 'bookings:read', 'bookings:write',
    'insights:read', 'faqs:read', 'faqs:write', 'pricebook:read', 'pricebook:write',
    'settings:read', 'settings:write', 'integrations:read', 'integrations:write',
    'webhooks:read', 'webhooks:write', 'notifications:read', 'members:read',
    'privacy:read', 'privacy:write'
  ]
$function$;

create or replace function app.event_types()
 returns text[]
 language plpgsql
 immutable parallel safe
as $function$
begin
  return array['call.ended', 'call.emergency', 'lead.created', 'lead.updated',
               'booking.created', 'booking.updated', 'spam.blocked', 'customer.erased'];
end
$function$;

-- customer.erased notifies nobody by default (it carries ids only; it is for integrations).
create or replace function app.notification_routes_default()
 returns jsonb
 language sql
 immutable parallel safe
as $function$
  select '{
    "call.emergency": ["sms", "email", "chat"],
    "lead.created": ["email", "chat"],
    "lead.updated": [],
    "booking.created": ["email", "chat"],
    "booking.updated": ["email", "chat"],
    "call.ended": [],
    "spam.blocked": [],
    "customer.erased": [],
    "webhook_endpoint.failing": ["email", "chat"],
    "webhook_endpoint.disabled": ["email", "chat"]
  }'::jsonb
$function$;
comment on function app.notification_routes_default() is E'Defaults: emergencies → sms + email + chat; leads and bookings → email + chat; webhook endpoint failing/disabled → email + chat; spam, customer.erased and the rest → none.';

-- Call detail says when its content or caller data was cleared.
create or replace function app.call_detail_json(c app.calls, scopes text[])
 returns jsonb
 language sql
 stable parallel safe
as $function$
  select app.call_summary_json(c) || jsonb_build_object(
    'recording_url', case when 'recordings:read' = any (scopes) then c.recording_url end,
    'public_log_url', c.public_log_url,
    'transcript', case when 'transcripts:read' = any (scopes) then c.transcript end,
    'transcript_turns', case when 'transcripts:read' = any (scopes) then c.transcript_turns end,
    'call_summary', c.call_summary, 'user_sentiment', c.user_sentiment,
    'in_voicemail', c.in_voicemail,
    'content_purged_at', app.iso(c.content_purged_at), 'anonymised_at', app.iso(c.anonymised_at))
$function$;
comment on function app.call_detail_json(app.calls,text[]) is E'Call detail: the summary plus recording (recordings:read) and transcript (transcripts:read), else null, and when its content was purged or its caller data anonymised (docs/privacy.md).';

-- Retention settings (GET/PATCH data-retention).
create function app.data_retention_json(loc uuid)
 returns jsonb
 language sql
 stable
as $function$
  select jsonb_build_object(
    'location_id', loc,
    'redact_sensitive_data', coalesce(s.redact_sensitive_data, true),
    'content_retention_days', s.content_retention_days,
    'personal_data_retention_days', s.personal_data_retention_days,
    'updated_at', app.iso(coalesce(s.updated_at, l.created_at)))
    from app.locations l left join app.privacy_settings s on s.location_id = l.id
   where l.id = loc
$function$;
comment on function app.data_retention_json(uuid) is E'A location''s privacy settings as GET data-retention shows them (the defaults when it has no row).';

create function api.data_retention_get(token_hash text, location_ref text)
 returns jsonb
 language plpgsql
as $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'settings:read');
begin
  return app.data_retention_json(a.location_id);
end
$function$;
comment on function api.data_retention_get(text,text) is E'GET data-retention: redaction switch and the two retention windows (null = kept until erased).';
grant execute on function api.data_retention_get(text,text) to switchboard_api;

create function api.data_retention_patch(token_hash text, location_ref text, patch jsonb)
 returns jsonb
 language plpgsql
as $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'settings:write');
begin
  insert into app.privacy_settings (location_id) values (a.location_id) on conflict (location_id) do nothing;
  update app.privacy_settings t
     set (redact_sensitive_data, content_retention_days, personal_data_retention_days)
       = (select p.redact_sensitive_data, p.content_retention_days, p.personal_data_retention_days
            from jsonb_populate_record(t, patch) p),
         updated_at = now()
   where t.location_id = a.location_id;
  return app.data_retention_json(a.location_id);
end
$function$;
comment on function api.data_retention_patch(text,text,jsonb) is E'PATCH data-retention: fields present replace theirs (null turns a window off).';
grant execute on function api.data_retention_patch(text,text,jsonb) to switchboard_api;

-- Which rows hold one caller's data in one location (erasure and export share it).
create type app.privacy_match as (
  customer_ids uuid[],
  call_ids uuid[],
  lead_ids uuid[],
  booking_ids uuid[],
  event_ids uuid[]
);
comment on type app.privacy_match is E'The ids of one caller''s rows per kind (app.privacy_match_ids).';

create function app.privacy_match_ids(loc uuid, phone text, email text, customer_id uuid, only_uncleared boolean)
 returns app.privacy_match
 language plpgsql
 stable
as $function$
declare
  m app.privacy_match;
  em text := lower(email);
  phones text[];
  emails text[];
  ids text[];
  call_texts text[];
begin
  -- Customers by phone (unique per location), e-mail or id; their phones and e-mails widen the
  -- search to calls and leads that never got a customer (unfinalised calls, API leads).
  select coalesce(array_agg(c.id), '{}'),
         array_remove(array_agg(c.phone::text), null), array_remove(array_agg(lower(c.email)), null)
    into m.customer_ids, phones, emails
    from app.customers c
   where c.location_id = loc
     and (c.phone = privacy_match_ids.phone or lower(c.email) = em or c.id = privacy_match_ids.customer_id)
     and (not only_uncleared or c.anonymised_at is null);
  phones := array(select distinct x from unnest(phones || privacy_match_ids.phone) x where x is not null);
  emails := array(select distinct x from unnest(emails || em) x where x is not null);
  select coalesce(array_agg(c.id), '{}') into m.call_ids
    from app.calls c
   where c.location_id = loc
     and (c.customer_id = any (m.customer_ids) or c.caller_phone = any (phones) or lower(c.caller_email) = any (emails))
     and (not only_uncleared or c.anonymised_at is null or c.content_purged_at is null);
  select coalesce(array_agg(l.id), '{}') into m.lead_ids
    from app.leads l
   where l.location_id = loc
     and (l.customer_id = any (m.customer_ids) or l.call_id = any (m.call_ids)
          or l.phone = any (phones) or lower(l.email) = any (emails))
     and (not only_uncleared or l.anonymised_at is null);
  select coalesce(array_agg(b.id), '{}') into m.booking_ids
    from app.bookings b
   where b.location_id = loc
     and (b.customer_id = any (m.customer_ids) or b.call_id = any (m.call_ids) or b.lead_id = any (m.lead_ids))
     and (not only_uncleared or b.anonymised_at is null);
  -- Events name their record by data.id (calls, leads, bookings) or, for spam.blocked, data.call_id.
  ids := (m.call_ids || m.lead_ids || m.booking_ids)::text[];
  call_texts := m.call_ids::text[];
  select coalesce(array_agg(e.id), '{}') into m.event_ids
    from app.events e
   where e.location_id = loc
     and ((e.data ->> 'id') = any (ids) or (e.type = 'spam.blocked' and (e.data ->> 'call_id') = any (call_texts)))
     and e.type not in ('customer.erased', 'webhook.test')
     and (not only_uncleared or e.redacted_at is null);
  return m;
end
$function$;
comment on function app.privacy_match_ids(uuid,text,text,uuid,boolean) is E'One caller''s rows in one location: customers by phone, e-mail or id; calls by customer, phone or e-mail; leads by customer, call, phone or e-mail; bookings by customer, call or lead; events naming any of them. only_uncleared leaves out rows already cleared (erasure); every look-up is an index scan (docs/privacy.md "Erasure").';

create function app.privacy_scrub(data jsonb)
 returns jsonb
 language sql
 immutable parallel safe
as $function$
  select data || coalesce((
    select jsonb_object_agg(k, null)
      from unnest(array['caller_phone', 'caller_name', 'caller_address', 'caller_email', 'name', 'phone', 'email',
                        'address', 'notes', 'issue_summary', 'call_summary', 'transcript', 'transcript_turns',
                        'recording_url', 'public_log_url']) k
     where data ? k), '{}'::jsonb)
$function$;
comment on function app.privacy_scrub(jsonb) is E'An event''s data with every caller personal field present set to null (the ids, times, outcome and amounts stay).';

create function app.privacy_event_body(e app.events)
 returns text
 language sql
 stable parallel safe
as $function$
  select jsonb_build_object('event', e.type, 'location_id', e.location_id, 'created_at', app.iso(e.created_at),
                            'data', e.data)::text
$function$;
comment on function app.privacy_event_body(app.events) is E'The delivery body of an event rebuilt from its (cleared) data, as app.tg_events__body builds it at insert.';

-- The erasure itself: one transaction, set-based updates by id.
create function app.erasure_perform(loc uuid, phone text, email text, customer_id uuid, source text, api_key_id uuid, platform boolean)
 returns uuid
 language plpgsql
 security definer
 set search_path to 'pg_catalog', 'public', 'pg_temp'
as $function$
declare
  m app.privacy_match;
  erasure_id uuid := gen_random_uuid();
  kinds text[] := '{}';
  hashes jsonb := '{}';
  n_customers int; n_calls int; n_leads int; n_bookings int; n_events int; n_attempts int; n_notifications int;
  ev uuid;
  n_platform int := 0;
  h text;
begin
  if loc is null or loc is distinct from app.current_location_id() then
    perform app.raise('SB400', 'app.erasure_perform runs for the pinned location only');
  end if;
  if phone is null and email is null and customer_id is null then
    perform app.raise('SB400', 'Give a phone, an email or a customer_id',
      jsonb_build_object('issues', jsonb_build_array(jsonb_build_object('path', '', 'message', 'Give a phone, an email or a customer_id'))));
  end if;
  if customer_id is not null
     and not exists (select 1 from app.customers c where c.location_id = loc and c.id = erasure_perform.customer_id) then
    perform app.raise('SB404', 'Customer not found');
  end if;
  foreach h in array array['phone', 'email', 'customer_id'] loop
    continue when (case h when 'phone' then phone when 'email' then lower(email) else customer_id::text end) is null;
    kinds := kinds || h;
    hashes := hashes || jsonb_build_object(h, encode(sha256(convert_to(
      loc::text || ':' || h || ':' || (case h when 'phone' then phone when 'email' then lower(email) else customer_id::text end),
      'UTF8')), 'hex'));
  end loop;

  m := app.privacy_match_ids(loc, phone, email, customer_id, true);

  update app.customers c set phone = null, name = null, email = null, address = null, anonymised_at = now()
   where c.location_id = loc and c.id = any (m.customer_ids);
  get diagnostics n_customers = row_count;
  update app.calls c
     set caller_phone = null, caller_name = null, caller_address = null, caller_email = null, issue_summary = null,
         transcript = null, transcript_turns = null, recording_url = null, public_log_url = null, call_summary = null,
         metadata = '{}', anonymised_at = coalesce(c.anonymised_at, now()), content_purged_at = coalesce(c.content_purged_at, now())
   where c.location_id = loc and c.id = any (m.call_ids);
  get diagnostics n_calls = row_count;
  update app.leads l set name = null, phone = null, email = null, address = null, notes = null, anonymised_at = now()
   where l.location_id = loc and l.id = any (m.lead_ids);
  get diagnostics n_leads = row_count;
  update app.bookings b set address = null, notes = null, anonymised_at = now()
   where b.location_id = loc and b.id = any (m.booking_ids);
  get diagnostics n_bookings = row_count;
  update app.events e set data = app.privacy_scrub(e.data), redacted_at = now()
   where e.location_id = loc and e.id = any (m.event_ids);
  get diagnostics n_events = row_count;
  update app.events e set body = app.privacy_event_body(e)
   where e.location_id = loc and e.id = any (m.event_ids);
  -- Attempts keep no payload (they send the event's body) but may keep a receiver's echo of it.
  update app.webhook_deliveries d set response_body = null
   where d.location_id = loc and d.event_id = any (m.event_ids);
  get diagnostics n_attempts = row_count;
  -- Notifications render from the event at send time; their log keeps provider answers, which
  -- can quote the message (an SMS API answers with the text it sent).
  select count(*)::int into n_notifications from app.notifications n
   where n.location_id = loc and n.event_id = any (m.event_ids);
  update app.notification_log g set detail = null
    from app.notifications n
   where n.location_id = loc and n.event_id = any (m.event_ids)
     and g.location_id = loc and g.notification_id = n.id;

  insert into app.erasures (id, location_id, identifier_kinds, identifier_hashes, source, api_key_id, status, matched)
  values (erasure_id, loc, kinds, hashes, source, api_key_id, 'completed', jsonb_build_object(
    'customers', n_customers, 'calls', n_calls, 'leads', n_leads, 'bookings', n_bookings,
    'notifications', n_notifications, 'webhook_attempts', n_attempts, 'events', n_events));

  if n_customers + n_calls + n_leads + n_bookings + n_events > 0 then
    ev := app.emit(loc, 'customer.erased', jsonb_build_object(
      'erasure_id', erasure_id, 'customer_ids', to_jsonb(m.customer_ids), 'call_ids', to_jsonb(m.call_ids),
      'lead_ids', to_jsonb(m.lead_ids), 'booking_ids', to_jsonb(m.booking_ids)));
  end if;

  if platform then
    insert into app.erasure_platform_calls (location_id, erasure_id, call_id, platform_call_id)
    select loc, erasure_id, c.id, c.platform_call_id from app.calls c
     where c.location_id = loc and c.id = any (m.call_ids)
    on conflict do nothing;
    get diagnostics n_platform = row_count;
  end if;
  update app.erasures e
     set event_id = ev,
         status = case when n_platform > 0 then 'processing' else 'completed' end,
         completed_at = case when n_platform > 0 then null else now() end
   where e.location_id = loc and e.id = erasure_id;
  if n_platform > 0 then
    perform app.enqueue('erasure_platform_delete', jsonb_build_object('erasure_id', erasure_id, 'location_id', loc),
                        null, 'erasure_platform_delete:' || erasure_id, 10);
  end if;
  return erasure_id;
end
$function$;
alter function app.erasure_perform(uuid,text,text,uuid,text,uuid,boolean) owner to switchboard_system;
comment on function app.erasure_perform(uuid,text,text,uuid,text,uuid,boolean) is E'Erases one caller''s personal data in the pinned location (docs/privacy.md "Erasure"): customers, calls (caller fields and content), leads, bookings, event data and bodies, webhook attempt response bodies, notification log details; rows stay, so counts and insights do not change. Records the erasure (identifiers hashed), emits customer.erased (ids only) when anything matched, and with platform queues the voice-platform deletions. SECURITY DEFINER (switchboard_system) because events are append-only to the API role; it refuses any location but the one app.authorize pinned, and filters every statement by it.';
revoke execute on function app.erasure_perform(uuid,text,text,uuid,text,uuid,boolean) from public;
grant execute on function app.erasure_perform(uuid,text,text,uuid,text,uuid,boolean) to switchboard_api;

create function app.erasure_json(e app.erasures, with_calls boolean)
 returns jsonb
 language plpgsql
 stable
as $function$
declare
  j jsonb;
begin
  select jsonb_build_object(
    'id', e.id, 'location_id', e.location_id, 'status', e.status, 'identifier_kinds', to_jsonb(e.identifier_kinds),
    'source', e.source, 'matched', e.matched, 'event_id', e.event_id,
    'platform_deletions', jsonb_build_object(
      'pending', count(*) filter (where p.status = 'pending'), 'deleted', count(*) filter (where p.status = 'deleted'),
      'failed', count(*) filter (where p.status = 'failed')),
    'created_at', app.iso(e.created_at), 'completed_at', app.iso(e.completed_at))
    into j
    from app.erasure_platform_calls p
   where p.location_id = e.location_id and p.erasure_id = e.id;
  if with_calls then
    j := j || jsonb_build_object('platform_calls', coalesce((
      select jsonb_agg(jsonb_build_object(
               'call_id', p.call_id, 'platform_call_id', p.platform_call_id, 'status', p.status, 'attempts', p.attempts,
               'response_status', p.response_status, 'last_error', p.last_error, 'updated_at', app.iso(p.updated_at))
             order by p.platform_call_id)
        from app.erasure_platform_calls p
       where p.location_id = e.location_id and p.erasure_id = e.id), '[]'::jsonb));
  end if;
  return j;
end
$function$;
comment on function app.erasure_json(app.erasures,boolean) is E'Erasure record as the API shows it (never the identifiers); with_calls adds each voice-platform deletion.';

create function api.erasure_create(token_hash text, location_ref text, body jsonb, platform boolean)
 returns jsonb
 language plpgsql
as $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'privacy:write');
  new_id uuid;
begin
  new_id := app.erasure_perform(a.location_id, body ->> 'phone', body ->> 'email', (body ->> 'customer_id')::uuid,
                            'api', a.key_id, coalesce(platform, false));
  return (select app.erasure_json(e, true) from app.erasures e where e.location_id = a.location_id and e.id = new_id);
end
$function$;
comment on function api.erasure_create(text,text,jsonb,boolean) is E'POST erasures: erases the caller named by phone, email and/or customer_id (app.erasure_perform); platform = the voice-platform API key is configured.';
grant execute on function api.erasure_create(text,text,jsonb,boolean) to switchboard_api;

create function api.erasure_get(token_hash text, location_ref text, erasure_id uuid)
 returns jsonb
 language plpgsql
as $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'privacy:read');
begin
  return (select app.erasure_json(e, true) from app.erasures e where e.location_id = a.location_id and e.id = erasure_id);
end
$function$;
comment on function api.erasure_get(text,text,uuid) is E'GET erasures/{id}: status, matches per kind and each voice-platform deletion.';
grant execute on function api.erasure_get(text,text,uuid) to switchboard_api;

create function api.erasures_list(token_hash text, location_ref text, page jsonb)
 returns jsonb
 language plpgsql
as $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'privacy:read');
  lim int := app.page_limit(page);
  after app.page_cursor := app.page_after(page);
begin
  return app.page_result(array(
    select app.page_item(e.created_at, e.id, app.erasure_json(e, false))
      from app.erasures e
     where e.location_id = a.location_id and (e.created_at, e.id) < (select after.created_at, after.id)
     order by e.created_at desc, e.id desc limit (select lim + 1)), lim);
end
$function$;
comment on function api.erasures_list(text,text,jsonb) is E'GET erasures: newest first, keyset pages (counts of platform deletions, not each one).';
grant execute on function api.erasures_list(text,text,jsonb) to switchboard_api;

-- Export (right to know): everything held about one caller, in one document.
create function api.caller_data_get(token_hash text, location_ref text, phone text, email text, customer_id uuid)
 returns jsonb
 language plpgsql
as $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'privacy:read');
  m app.privacy_match;
begin
  if phone is null and email is null and customer_id is null then
    perform app.raise('SB400', 'Give a phone, an email or a customer_id',
      jsonb_build_object('issues', jsonb_build_array(jsonb_build_object('path', 'phone', 'message', 'Give a phone, an email or a customer_id'))));
  end if;
  m := app.privacy_match_ids(a.location_id, phone, email, customer_id, false);
  return jsonb_build_object(
    'location_id', a.location_id,
    'generated_at', app.iso(now()),
    'customers', coalesce((
      select jsonb_agg(jsonb_build_object(
               'id', c.id, 'phone', c.phone, 'name', c.name, 'email', c.email, 'address', c.address,
               'first_call_at', app.iso(c.first_call_at), 'last_call_at', app.iso(c.last_call_at), 'call_count', c.call_count,
               'created_at', app.iso(c.created_at), 'updated_at', app.iso(c.updated_at), 'anonymised_at', app.iso(c.anonymised_at))
             order by c.created_at, c.id)
        from app.customers c where c.location_id = a.location_id and c.id = any (m.customer_ids)), '[]'),
    'calls', coalesce((
      select jsonb_agg(app.call_detail_json(c, a.scopes) order by c.created_at, c.id)
        from app.calls c where c.location_id = a.location_id and c.id = any (m.call_ids)), '[]'),
    'leads', coalesce((
      select jsonb_agg(app.lead_json(l) order by l.created_at, l.id)
        from app.leads l where l.location_id = a.location_id and l.id = any (m.lead_ids)), '[]'),
    'bookings', coalesce((
      select jsonb_agg(app.booking_json(b) order by b.created_at, b.id)
        from app.bookings b where b.location_id = a.location_id and b.id = any (m.booking_ids)), '[]'),
    'events', coalesce((
      select jsonb_agg(jsonb_build_object('id', e.id, 'type', e.type, 'created_at', app.iso(e.created_at), 'data', e.data)
             order by e.created_at, e.id)
        from app.events e where e.location_id = a.location_id and e.id = any (m.event_ids)), '[]'),
    'notifications', coalesce((
      select jsonb_agg(app.notification_json(n, true) order by n.created_at, n.id)
        from app.notifications n where n.location_id = a.location_id and n.event_id = any (m.event_ids)), '[]'));
end
$function$;
comment on function api.caller_data_get(text,text,text,text,uuid) is E'GET caller-data: one caller''s customers, calls (transcript with transcripts:read, recording with recordings:read), leads, bookings, events and notifications in the location (docs/privacy.md "Export").';
grant execute on function api.caller_data_get(text,text,text,text,uuid) to switchboard_api;

-- The CLI's erasure (staff): the same work for a location named by id or slug.
create function admin.erasure_create(location_ref text, phone text, email text, customer_id uuid, platform boolean)
 returns jsonb
 language plpgsql
 security definer
 set search_path to 'pg_catalog', 'public', 'pg_temp'
as $function$
declare
  loc uuid := admin.resolve_location(location_ref);
  new_id uuid;
  ignored text;
begin
  ignored := set_config('app.location_id', loc::text, true);
  new_id := app.erasure_perform(loc, phone, email, customer_id, 'cli', null, coalesce(platform, false));
  return (select app.erasure_json(e, true) from app.erasures e where e.location_id = loc and e.id = new_id);
end
$function$;
alter function admin.erasure_create(text,text,text,uuid,boolean) owner to switchboard_system;
comment on function admin.erasure_create(text,text,text,uuid,boolean) is E'CLI: erasure create (app.erasure_perform for the location, source cli).';
revoke execute on function admin.erasure_create(text,text,text,uuid,boolean) from public;

-- Worker side of the voice-platform deletions (erasure_platform_delete job).
create function app.erasure_platform_pending(erasure_id uuid, location_id uuid)
 returns jsonb
 language sql
 stable security definer
 set search_path to 'pg_catalog', 'public', 'pg_temp'
as $function$
  select coalesce(jsonb_agg(jsonb_build_object('id', p.id, 'platform_call_id', p.platform_call_id, 'attempts', p.attempts)
                  order by p.platform_call_id), '[]')
    from app.erasure_platform_calls p
   where p.location_id = erasure_platform_pending.location_id and p.erasure_id = erasure_platform_pending.erasure_id
     and p.status = 'pending'
$function$;
alter function app.erasure_platform_pending(uuid,uuid) owner to switchboard_system;
comment on function app.erasure_platform_pending(uuid,uuid) is E'Worker (erasure_platform_delete): the erasure''s calls still to delete at the voice platform. SECURITY DEFINER: the worker''s role pins no tenant.';
revoke execute on function app.erasure_platform_pending(uuid,uuid) from public;

create function app.erasure_platform_record(erasure_id uuid, location_id uuid, results jsonb, final boolean)
 returns integer
 language plpgsql
 security definer
 set search_path to 'pg_catalog', 'public', 'pg_temp'
as $function$
declare
  loc uuid := erasure_platform_record.location_id;
  eid uuid := erasure_platform_record.erasure_id;
  left_pending int;
begin
  update app.erasure_platform_calls p
     set attempts = p.attempts + 1,
         status = case r.outcome when 'deleted' then 'deleted' when 'failed' then 'failed'
                                 else case when final then 'failed' else 'pending' end end,
         response_status = r.response_status,
         last_error = case when r.outcome = 'deleted' then null else left(r.error, 500) end,
         updated_at = now()
    from jsonb_to_recordset(results) r(id uuid, outcome text, response_status int, error text)
   where p.location_id = loc and p.erasure_id = eid and p.id = r.id and p.status = 'pending';
  if final then
    update app.erasure_platform_calls p set status = 'failed', updated_at = now(),
           last_error = coalesce(p.last_error, 'not tried before the last attempt')
     where p.location_id = loc and p.erasure_id = eid and p.status = 'pending';
  end if;
  select count(*)::int into left_pending from app.erasure_platform_calls p
   where p.location_id = loc and p.erasure_id = eid and p.status = 'pending';
  if left_pending = 0 then
    update app.erasures e
       set status = case when exists (select 1 from app.erasure_platform_calls p
                                       where p.location_id = loc and p.erasure_id = eid and p.status = 'failed')
                         then 'completed_with_failures' else 'completed' end,
           completed_at = now(), updated_at = now()
     where e.location_id = loc and e.id = eid and e.status = 'processing';
  end if;
  return left_pending;
end
$function$;
alter function app.erasure_platform_record(uuid,uuid,jsonb,boolean) owner to switchboard_system;
comment on function app.erasure_platform_record(uuid,uuid,jsonb,boolean) is E'Worker (erasure_platform_delete): records one round of DELETEs, results [{ id, outcome deleted|retry|failed, response_status, error }]; final turns what is still pending into failed. Settles the erasure when nothing is pending; returns how many are. SECURITY DEFINER like app.erasure_platform_pending.';
revoke execute on function app.erasure_platform_record(uuid,uuid,jsonb,boolean) from public;

-- Retention (hourly prune job): one batch of one kind across the locations that set a window.
create function app.privacy_prune(kind text, batch_size integer)
 returns integer
 language plpgsql
 security definer
 set search_path to 'pg_catalog', 'public', 'pg_temp'
as $function$
declare
  n int;
begin
  if kind = 'content' then
    update app.calls c
       set transcript = null, transcript_turns = null, recording_url = null, public_log_url = null,
           call_summary = null, metadata = '{}', content_purged_at = now()
      from (select x.id, x.location_id from app.privacy_settings s cross join lateral (
              select k.id, k.location_id from app.calls k
               where k.location_id = s.location_id and k.content_purged_at is null
                 and k.created_at < now() - make_interval(days => s.content_retention_days)
               order by k.created_at limit batch_size
                 for update of k skip locked) x
             where s.content_retention_days is not null
             limit batch_size) b
     where c.id = b.id and c.location_id = b.location_id;
  elsif kind = 'personal_calls' then
    update app.calls c
       set caller_phone = null, caller_name = null, caller_address = null, caller_email = null, issue_summary = null,
           transcript = null, transcript_turns = null, recording_url = null, public_log_url = null,
           call_summary = null, metadata = '{}', anonymised_at = now(), content_purged_at = coalesce(c.content_purged_at, now())
      from (select x.id, x.location_id from app.privacy_settings s cross join lateral (
              select k.id, k.location_id from app.calls k
               where k.location_id = s.location_id and k.anonymised_at is null
                 and k.created_at < now() - make_interval(days => s.personal_data_retention_days)
               order by k.created_at limit batch_size
                 for update of k skip locked) x
             where s.personal_data_retention_days is not null
             limit batch_size) b
     where c.id = b.id and c.location_id = b.location_id;
  elsif kind = 'personal_customers' then
    update app.customers c set phone = null, name = null, email = null, address = null, anonymised_at = now()
      from (select x.id, x.location_id from app.privacy_settings s cross join lateral (
              select k.id, k.location_id from app.customers k
               where k.location_id = s.location_id and k.anonymised_at is null
                 and coalesce(k.last_call_at, k.created_at) < now() - make_interval(days => s.personal_data_retention_days)
               order by coalesce(k.last_call_at, k.created_at) limit batch_size
                 for update of k skip locked) x
             where s.personal_data_retention_days is not null
             limit batch_size) b
     where c.id = b.id and c.location_id = b.location_id;
  elsif kind = 'personal_leads' then
    update app.leads l set name = null, phone = null, email = null, address = null, notes = null, anonymised_at = now()
      from (select x.id, x.location_id from app.privacy_settings s cross join lateral (
              select k.id, k.location_id from app.leads k
               where k.location_id = s.location_id and k.anonymised_at is null
                 and k.created_at < now() - make_interval(days => s.personal_data_retention_days)
               order by k.created_at limit batch_size
                 for update of k skip locked) x
             where s.personal_data_retention_days is not null
             limit batch_size) b
     where l.id = b.id and l.location_id = b.location_id;
  elsif kind = 'personal_bookings' then
    update app.bookings t set address = null, notes = null, anonymised_at = now()
      from (select x.id, x.location_id from app.privacy_settings s cross join lateral (
              select k.id, k.location_id from app.bookings k
               where k.location_id = s.location_id and k.anonymised_at is null
                 and k.created_at < now() - make_interval(days => s.personal_data_retention_days)
               order by k.created_at limit batch_size
                 for update of k skip locked) x
             where s.personal_data_retention_days is not null
             limit batch_size) b
     where t.id = b.id and t.location_id = b.location_id;
  elsif kind = 'personal_events' then
    -- Events naming a call, lead or booking lose their personal fields (data and body alike);
    -- customer.erased (ids only) and test sends are only marked.
    update app.events e
       set data = case when e.type in ('customer.erased', 'webhook.test') then e.data else app.privacy_scrub(e.data) end,
           body = case when e.type in ('customer.erased', 'webhook.test') then e.body
                       else jsonb_build_object('event', e.type, 'location_id', e.location_id, 'created_at', app.iso(e.created_at),
                                               'data', app.privacy_scrub(e.data))::text end,
           redacted_at = now()
      from (select x.id, x.location_id from app.privacy_settings s cross join lateral (
              select k.id, k.location_id from app.events k
               where k.location_id = s.location_id and k.redacted_at is null
                 and k.created_at < now() - make_interval(days => s.personal_data_retention_days)
               order by k.created_at limit batch_size
                 for update of k skip locked) x
             where s.personal_data_retention_days is not null
             limit batch_size) b
     where e.id = b.id and e.location_id = b.location_id;
  else
    perform app.raise('SB400', format('Unknown privacy retention kind %s', kind));
  end if;
  get diagnostics n = row_count;
  return n;
end
$function$;
alter function app.privacy_prune(text,integer) owner to switchboard_system;
comment on function app.privacy_prune(text,integer) is E'Worker (prune_deliveries, through app.retention_prune): clears one batch (at most batch_size rows, SKIP LOCKED, index-led per location) of one kind past the location''s window: content (call transcript, turns, recording and log URLs, platform summary, metadata) | personal_calls (caller fields and content) | personal_customers | personal_leads | personal_bookings | personal_events. Rows stay, so counts and insights do not change (docs/privacy.md "Retention").';
revoke execute on function app.privacy_prune(text,integer) from public;

-- app.retention_prune: one delimited branch hands the privacy_* kinds to app.privacy_prune.
CREATE OR REPLACE FUNCTION app.retention_prune(kind text, retention_days integer, batch_size integer)
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
  -- per-location caller-data windows (app.privacy_settings; docs/privacy.md)
  elsif kind like 'privacy\_%' then
    return app.privacy_prune(substr(kind, 9), batch_size);
  else
    perform app.raise('SB400', format('Unknown retention kind %s', kind));
  end if;
  get diagnostics n = row_count;
  return n;
end
$function$;
alter function app.retention_prune(text,integer,integer) owner to switchboard_system;
comment on function app.retention_prune(text,integer,integer) is E'Worker (prune_deliveries): deletes one batch of settled deliveries | notifications (with their log) | events older than the retention window; a privacy_* kind clears one batch of caller data past its location''s window instead (app.privacy_prune); returns the count.';
revoke execute on function app.retention_prune(text,integer,integer) from public;


-- Redaction at ingestion (docs/privacy.md "Redaction at ingestion"): the voice route finds card
-- numbers, security codes, expiry dates and SSNs and sends the redacted call beside the received
-- one; app.voice_post_call keeps the redacted one when the location's setting says so. A late or
-- replayed delivery of the voice platform does not bring back what erasure or retention cleared
-- (docs/privacy.md "Erasure").
drop function if exists app.voice_post_call(jsonb, boolean);
CREATE OR REPLACE FUNCTION app.voice_post_call(payload jsonb, defer_wakeups boolean DEFAULT false, redacted_call jsonb DEFAULT NULL::jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
declare
  ev text := payload ->> 'event';
  pc jsonb := payload -> 'call';
  meta jsonb := case when jsonb_typeof(pc -> 'metadata') = 'object' then pc -> 'metadata' end;
  analysis jsonb := case when jsonb_typeof(pc -> 'call_analysis') = 'object' and pc -> 'call_analysis' <> '{}' then pc -> 'call_analysis' end;
  dir text := coalesce(pc ->> 'direction', 'inbound');
  caller app.e164 := app.voice_e164(case when dir = 'outbound' then pc ->> 'to_number' else pc ->> 'from_number' end);
  ours text := case when dir = 'outbound' then pc ->> 'from_number' else pc ->> 'to_number' end;
  uuid_re constant text := '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$';
  phone_loc uuid;
  loc uuid;
  row_id uuid;
  c app.calls;
  nc app.calls;
  prev_status text;
  new_status text := case ev when 'call_ended' then 'ended' when 'call_analyzed' then 'analyzed' else 'started' end;
  -- Settles the call in this request: a call not seen before is then inserted settled.
  settles boolean := ev = 'call_analyzed' or (ev = 'call_ended' and analysis is not null);
  inserted_settled boolean := false;
begin
  if ev not in ('call_started', 'call_ended', 'call_analyzed', 'transfer_started') then
    return jsonb_build_object('status', 'ignored');
  end if;
  if defer_wakeups then
    -- The caller wakes the workers once this transaction has committed (app.flush_deferred_jobs).
    perform set_config('app.defer_wakeups', 'on', true);
  end if;

  if ours is not null then
    select id into phone_loc from app.locations where service_phone = ours;
  end if;
  if meta ->> 'call_row_id' ~ uuid_re then
    select id, location_id into row_id, loc from app.calls where id = (meta ->> 'call_row_id')::uuid;
    if phone_loc is not null and loc is distinct from phone_loc then
      row_id := null;
    end if;
  end if;
  loc := coalesce(phone_loc, loc);
  if loc is null and meta ->> 'location_id' ~ uuid_re then
    select id into loc from app.locations where id = (meta ->> 'location_id')::uuid;
  end if;
  if loc is null then
    perform app.raise('SB404', 'No location matches this call', jsonb_build_object('call_id', pc ->> 'call_id'));
  end if;
  perform set_config('app.location_id', loc::text, true);
  -- Redaction at ingestion (docs/privacy.md): the route sends the call a second time, with card
  -- numbers, security codes, expiry dates and SSNs replaced, whenever it found any; the location's
  -- setting decides which of the two is kept, before anything is stored or evented. Only text
  -- fields differ, so routing above is the same for both.
  if redacted_call is not null
     and coalesce((select p.redact_sensitive_data from app.privacy_settings p where p.location_id = loc), true) then
    pc := redacted_call;
    analysis := case when jsonb_typeof(pc -> 'call_analysis') = 'object' and pc -> 'call_analysis' <> '{}' then pc -> 'call_analysis' end;
  end if;
  -- Deliveries of one platform call wait for each other here (a replay or a concurrent retry):
  -- a call not seen before may be inserted settled, its customer upserted first, and two
  -- deliveries must not both take it for new. Class 7301 keeps these keys apart from other
  -- advisory locks.
  perform pg_advisory_xact_lock(7301, hashtext(loc::text || '/' || coalesce(pc ->> 'call_id', '')));

  loop
    if row_id is not null then
      select * into c from app.calls where id = row_id for update;
    else
      select * into c from app.calls where location_id = loc and platform_call_id = pc ->> 'call_id' for update;
    end if;
    prev_status := c.platform_status;

    -- Platform facts: newer values win, absent ones keep what we have. Nothing is written when a
    -- replay brings nothing new, so replays change nothing (not even updated_at). For a call not
    -- seen before, c is all nulls and nc is the new row.
    nc := c;
    if nc.platform_call_id like 'rejected:%' then nc.platform_call_id := pc ->> 'call_id'; end if;
    nc.direction := dir;
    nc.caller_phone := coalesce(caller, c.caller_phone);
    nc.to_phone := coalesce(pc ->> 'to_number', c.to_phone);
    nc.agent_id := coalesce(pc ->> 'agent_id', c.agent_id);
    nc.started_at := coalesce(app.voice_ms(pc -> 'start_timestamp'), c.started_at);
    nc.ended_at := coalesce(app.voice_ms(pc -> 'end_timestamp'), c.ended_at);
    nc.duration_sec := coalesce(
      case when nc.started_at is not null and nc.ended_at is not null
           then greatest(round(extract(epoch from nc.ended_at - nc.started_at)), 0)::int end,
      case when jsonb_typeof(pc -> 'duration_ms') = 'number' then round((pc ->> 'duration_ms')::numeric / 1000)::int end,
      c.duration_sec);
    nc.disconnection_reason := coalesce(pc ->> 'disconnection_reason', c.disconnection_reason);
    nc.transcript := coalesce(pc ->> 'transcript', c.transcript);
    nc.transcript_turns := coalesce(case when jsonb_typeof(pc -> 'transcript_object') = 'array' then pc -> 'transcript_object' end, c.transcript_turns);
    nc.recording_url := coalesce(pc ->> 'recording_url', c.recording_url);
    nc.public_log_url := coalesce(pc ->> 'public_log_url', c.public_log_url);
    nc.metadata := coalesce(meta, c.metadata);
    nc.call_summary := coalesce(analysis ->> 'call_summary', c.call_summary);
    nc.user_sentiment := coalesce(analysis ->> 'user_sentiment', c.user_sentiment);
    nc.in_voicemail := coalesce((analysis ->> 'in_voicemail')::boolean, c.in_voicemail);
    if app.voice_status_rank(new_status) > app.voice_status_rank(c.platform_status) then
      nc.platform_status := new_status;
    end if;
    -- Erased or retained-away data stays gone: a late or replayed delivery of a call whose caller
    -- data was anonymised only advances its status (and settles it without the analysis); one
    -- whose content was purged does not get its content back (docs/privacy.md "Erasure").
    if c.anonymised_at is not null then
      new_status := nc.platform_status;
      nc := c;
      nc.platform_status := new_status;
      analysis := null;
    elsif c.content_purged_at is not null then
      nc.transcript := c.transcript;
      nc.transcript_turns := c.transcript_turns;
      nc.recording_url := c.recording_url;
      nc.public_log_url := c.public_log_url;
      nc.call_summary := c.call_summary;
      nc.metadata := c.metadata;
    end if;

    if c.id is not null then
      if nc is distinct from c then
        update app.calls t set
          platform_call_id = nc.platform_call_id, direction = nc.direction, caller_phone = nc.caller_phone,
          to_phone = nc.to_phone, agent_id = nc.agent_id, started_at = nc.started_at, ended_at = nc.ended_at,
          duration_sec = nc.duration_sec, disconnection_reason = nc.disconnection_reason,
          transcript = nc.transcript, transcript_turns = nc.transcript_turns, recording_url = nc.recording_url,
          public_log_url = nc.public_log_url, metadata = nc.metadata, call_summary = nc.call_summary,
          user_sentiment = nc.user_sentiment, in_voicemail = nc.in_voicemail, platform_status = nc.platform_status
        where t.id = c.id
        returning * into c;
      end if;
      exit;
    end if;

    if settles then
      nc.location_id := loc;
      nc.platform_call_id := pc ->> 'call_id';
      nc.metadata := coalesce(nc.metadata, '{}');
      nc := app.voice_settle(nc, coalesce(analysis, '{}'));
      insert into app.calls (location_id, platform_call_id, direction, caller_phone, to_phone, agent_id,
                             started_at, ended_at, duration_sec, disconnection_reason, transcript,
                             transcript_turns, recording_url, public_log_url, metadata, call_summary,
                             user_sentiment, in_voicemail, platform_status,
                             outcome, urgency_level, is_emergency, emergency_fired_at, customer_id,
                             is_returning_customer, caller_name, caller_address, caller_email, service_type,
                             issue_summary, detected_intent, estimated_value, appointment_date,
                             appointment_time, finalized_at)
      values (loc, nc.platform_call_id, nc.direction, nc.caller_phone, nc.to_phone, nc.agent_id,
              nc.started_at, nc.ended_at, nc.duration_sec, nc.disconnection_reason, nc.transcript,
              nc.transcript_turns, nc.recording_url, nc.public_log_url, nc.metadata, nc.call_summary,
              nc.user_sentiment, nc.in_voicemail, nc.platform_status,
              nc.outcome, nc.urgency_level, nc.is_emergency, nc.emergency_fired_at, nc.customer_id,
              nc.is_returning_customer, nc.caller_name, nc.caller_address, nc.caller_email, nc.service_type,
              nc.issue_summary, nc.detected_intent, nc.estimated_value, nc.appointment_date,
              nc.appointment_time, nc.finalized_at)
      on conflict (location_id, platform_call_id) do nothing
      returning * into c;
      if c.id is null then
        -- Cannot happen under the advisory lock above; refused rather than counting the customer twice.
        perform app.raise('SB409', 'This call is being recorded by another delivery; retry', jsonb_build_object('call_id', pc ->> 'call_id'));
      end if;
      inserted_settled := true;
      exit;
    end if;

    insert into app.calls (location_id, platform_call_id, direction, caller_phone, to_phone, agent_id,
                           started_at, ended_at, duration_sec, disconnection_reason, transcript,
                           transcript_turns, recording_url, public_log_url, metadata, call_summary,
                           user_sentiment, in_voicemail, platform_status)
    values (loc, pc ->> 'call_id', nc.direction, nc.caller_phone, nc.to_phone, nc.agent_id,
            nc.started_at, nc.ended_at, nc.duration_sec, nc.disconnection_reason, nc.transcript,
            nc.transcript_turns, nc.recording_url, nc.public_log_url, coalesce(nc.metadata, '{}'), nc.call_summary,
            nc.user_sentiment, nc.in_voicemail, nc.platform_status)
    on conflict (location_id, platform_call_id) do nothing
    returning * into c;
    exit when c.id is not null;
    -- Another delivery of this call inserted it first: carry on as an update of that row.
    row_id := null;
  end loop;

  if c.finalized_at is null then
    if ev = 'transfer_started' and c.emergency_fired_at is null then
      update app.calls set is_emergency = true, emergency_fired_at = now() where id = c.id returning * into c;
      perform app.emit(loc, 'call.emergency', app.call_summary_json(c)
        || jsonb_build_object('reason', 'warm_transfer', 'lead_id', null));
    elsif ev = 'call_analyzed' or (ev = 'call_ended' and analysis is not null) then
      -- Settled now: a fallback finalize_call job exists only if call_ended without analysis came
      -- first (the call was at 'ended'); it has nothing left to do, so it is taken off the queue.
      if prev_status = 'ended' then
        perform app.dequeue('finalize_call:' || c.id);
      end if;
      c := app.voice_finalize(c, coalesce(analysis, '{}'));
    elsif ev = 'call_ended' and app.voice_status_rank(prev_status) < app.voice_status_rank('ended') then
      -- If call_analyzed never comes, settle the call from its disconnection reason later.
      perform app.enqueue('finalize_call', jsonb_build_object('call_id', c.id),
                          now() + interval '10 minutes', 'finalize_call:' || c.id, 5);
    end if;
  end if;

  if inserted_settled then
    perform app.voice_finalize_effects(c, c.emergency_fired_at is not null);
  end if;

  return jsonb_build_object('call_id', c.id, 'platform_call_id', c.platform_call_id,
    'platform_status', c.platform_status, 'outcome', c.outcome, 'finalized', c.finalized_at is not null);
end
$function$;
alter function app.voice_post_call(jsonb,boolean,jsonb) owner to switchboard_system;
comment on function app.voice_post_call(jsonb,boolean,jsonb) is E'Post-call webhook (call_started | call_ended | call_analyzed | transfer_started): routes by the dialled number first (then metadata call_row_id / location_id), serialises deliveries of one platform call id (transaction advisory lock), inserts a new call with its facts (settled at once when this delivery carries the analysis) or updates a known one idempotently on the platform call_id, fires call.emergency on a warm transfer, finalises on analysis (removing a queued finalize_call job) or schedules finalize_call 10 minutes after call_ended. With defer_wakeups the transaction sends no NOTIFY: its jobs wait in app_private.deferred_jobs until the caller runs app.flush_deferred_jobs() after the commit. redacted_call (the call with sensitive numbers replaced, sent only when the route found some) replaces the call when the location redacts (app.privacy_settings.redact_sensitive_data, default on).';
revoke execute on function app.voice_post_call(jsonb,boolean,jsonb) from public;

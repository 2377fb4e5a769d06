--! Previous: sha1:16096feef6c2d992d3cb443b012eeacc09334e4a
--! Hash: sha1:50f39ca0550313fe14721671b5d03f2c9ea70f8d
--! Message: events customers calls leads bookings

-- The events outbox and the records a call produces: customers, calls, leads, bookings; their
-- status graphs, their JSON shapes, and the triggers that write lead and booking events.

create table app.customers (
  id uuid default gen_random_uuid() not null,
  location_id uuid not null,
  phone app.e164 not null,
  name text,
  email text,
  address text,
  first_call_at timestamp with time zone,
  last_call_at timestamp with time zone,
  call_count integer default 0 not null,
  created_at timestamp with time zone default now() not null,
  updated_at timestamp with time zone default now() not null,
  constraint customers_pkey primary key (id, location_id),
  constraint customers_location_id_phone_key unique (location_id, phone),
  constraint customers_call_count_check check ((call_count >= 0)),
  constraint customers_location_id_fkey foreign key (location_id) references app.locations (id) on delete cascade
);
comment on table app.customers is E'A caller of a location, one per phone number; upserted by each finished call.';
comment on column app.customers.call_count is E'Calls finalised from this number.';
select app.secure_tenant_table('app.customers');

create table app.events (
  id uuid default gen_random_uuid() not null,
  location_id uuid not null,
  type text not null,
  data jsonb not null,
  created_at timestamp with time zone default now() not null,
  body text,
  constraint events_pkey primary key (id, location_id),
  constraint events_type_check check ((type = ANY ((app.event_types() || 'webhook.test'::text)))),
  constraint events_location_id_fkey foreign key (location_id) references app.locations (id) on delete cascade
);
comment on table app.events is E'Transactional outbox: one row per occurrence, written in the same transaction as the change. Webhook deliveries and notifications are derived from it.';
comment on column app.events.type is E'Event type, e.g. lead.created.';
comment on column app.events.data is E'The `data` object of the delivery body.';
comment on column app.events.body is E'@behavior -filterBy -orderBy\nThe exact JSON text POSTed to webhook endpoints ({ event, location_id, created_at, data }); signed as is.';
select app.secure_tenant_table('app.events', 'select, insert');
create index events_location_created_idx on app.events (location_id, created_at DESC, id DESC);

create function app.emit(location_id uuid, type text, data jsonb)
 RETURNS uuid
 LANGUAGE plpgsql
AS $function$
declare
  new_id uuid;
begin
  insert into app.events (location_id, type, data) values (emit.location_id, emit.type, emit.data)
  returning events.id into new_id;
  return new_id;
end
$function$;
comment on function app.emit(uuid,text,jsonb) is E'Writes one event to the outbox.';

create table app.calls (
  id uuid default gen_random_uuid() not null,
  location_id uuid not null,
  platform_call_id text not null,
  customer_id uuid,
  direction text default 'inbound'::text not null,
  caller_phone app.e164,
  to_phone text,
  caller_name text,
  caller_address text,
  caller_email text,
  outcome text default 'other'::text not null,
  urgency_level integer default 0 not null,
  is_emergency boolean default false not null,
  is_returning_customer boolean default false not null,
  started_at timestamp with time zone,
  ended_at timestamp with time zone,
  duration_sec integer,
  service_type text,
  issue_summary text,
  detected_intent text,
  estimated_value numeric,
  appointment_date date,
  appointment_time text,
  disconnection_reason text,
  recording_url text,
  public_log_url text,
  transcript text,
  transcript_turns jsonb,
  call_summary text,
  user_sentiment text,
  in_voicemail boolean,
  agent_id text,
  metadata jsonb default '{}'::jsonb not null,
  platform_status text default 'started'::text not null,
  finalized_at timestamp with time zone,
  emergency_fired_at timestamp with time zone,
  created_at timestamp with time zone default now() not null,
  updated_at timestamp with time zone default now() not null,
  after_hours boolean,
  constraint calls_pkey primary key (id, location_id),
  constraint calls_location_id_platform_call_id_key unique (location_id, platform_call_id),
  constraint calls_platform_call_id_check check (((length(platform_call_id) >= 1) AND (length(platform_call_id) <= 200))),
  constraint calls_direction_check check ((direction = ANY (ARRAY['inbound'::text, 'outbound'::text]))),
  constraint calls_outcome_check check ((outcome = ANY (ARRAY['booked'::text, 'transferred'::text, 'lead'::text, 'spam'::text, 'dropped'::text, 'other'::text]))),
  constraint calls_urgency_level_check check (((urgency_level >= 0) AND (urgency_level <= 5))),
  constraint calls_duration_sec_check check ((duration_sec >= 0)),
  constraint calls_estimated_value_check check ((estimated_value >= (0)::numeric)),
  constraint calls_transcript_turns_check check (((transcript_turns IS NULL) OR (jsonb_typeof(transcript_turns) = 'array'::text))),
  constraint calls_platform_status_check check ((platform_status = ANY (ARRAY['started'::text, 'ended'::text, 'analyzed'::text, 'rejected'::text]))),
  constraint calls_location_id_fkey foreign key (location_id) references app.locations (id) on delete cascade,
  constraint calls_customer_id_fkey foreign key (location_id, customer_id) references app.customers (location_id, id) on delete set null (customer_id)
);
comment on table app.calls is E'One phone call answered for a location, from the voice platform''s webhooks.';
comment on column app.calls.platform_call_id is E'The voice platform''s call_id; ingestion is idempotent on it.';
comment on column app.calls.caller_phone is E'Full E.164 number; the API masks it as ***-***-NNNN.';
comment on column app.calls.outcome is E'booked | transferred | lead | spam | dropped | other.';
comment on column app.calls.urgency_level is E'0 (routine) to 5 (emergency).';
comment on column app.calls.is_returning_customer is E'The customer existed before this call.';
comment on column app.calls.duration_sec is E'Seconds between start and end.';
comment on column app.calls.recording_url is E'Only with scope recordings:read.';
comment on column app.calls.transcript is E'Plain transcript; only with scope transcripts:read.';
comment on column app.calls.transcript_turns is E'[{ role, content, words: [{ word, start, end }] }]; only with scope transcripts:read.';
comment on column app.calls.platform_status is E'Furthest platform event seen: started | ended | analyzed | rejected (blocklisted before answer).';
comment on column app.calls.finalized_at is E'When the outcome was settled and the call''s records and events were made; set once.';
comment on column app.calls.emergency_fired_at is E'When call.emergency fired for this call (at most once).';
comment on column app.calls.after_hours is E'Started outside business hours, judged by the hours and timezone in force when the call was finalised (until then, when its start was recorded); null without started_at. Set by trigger; insights count it.';
select app.secure_tenant_table('app.calls');
create index calls_location_created_idx on app.calls (location_id, created_at DESC, id DESC);
create index calls_location_started_idx on app.calls (location_id, started_at) INCLUDE (outcome, estimated_value, is_emergency, service_type);
create index calls_location_outcome_idx on app.calls (location_id, outcome, created_at DESC);
create index calls_customer_idx on app.calls (customer_id, location_id);

create table app.leads (
  id uuid default gen_random_uuid() not null,
  location_id uuid not null,
  call_id uuid,
  customer_id uuid,
  name text,
  phone app.e164,
  email text,
  address text,
  service_type text,
  urgency_level integer default 0 not null,
  estimated_value numeric,
  status text default 'new'::text not null,
  status_changed_at timestamp with time zone default now() not null,
  assigned_to uuid,
  notes text,
  created_at timestamp with time zone default now() not null,
  updated_at timestamp with time zone default now() not null,
  constraint leads_pkey primary key (id, location_id),
  constraint leads_name_check check ((length(name) <= 200)),
  constraint leads_email_check check (((email ~ '^[^@\s]+@[^@\s]+\.[^@\s]+$'::text) AND (length(email) <= 320))),
  constraint leads_address_check check ((length(address) <= 500)),
  constraint leads_service_type_check check ((length(service_type) <= 200)),
  constraint leads_urgency_level_check check (((urgency_level >= 0) AND (urgency_level <= 5))),
  constraint leads_estimated_value_check check ((estimated_value >= (0)::numeric)),
  constraint leads_status_check check ((status = ANY (ARRAY['new'::text, 'contacted'::text, 'booked'::text, 'closed'::text, 'lost'::text]))),
  constraint leads_notes_check check ((length(notes) <= 10000)),
  constraint leads_location_id_fkey foreign key (location_id) references app.locations (id) on delete cascade,
  constraint leads_call_id_fkey foreign key (location_id, call_id) references app.calls (location_id, id) on delete set null (call_id),
  constraint leads_customer_id_fkey foreign key (location_id, customer_id) references app.customers (location_id, id) on delete set null (customer_id),
  constraint leads_assigned_to_fkey foreign key (location_id, assigned_to) references app.members (location_id, id) on delete set null (assigned_to)
);
comment on table app.leads is E'A sales opportunity, from a call or entered through the API.';
comment on column app.leads.status is E'new | contacted | booked | closed | lost; moves checked by app.lead_transition_allowed().';
comment on column app.leads.status_changed_at is E'When status last moved.';
comment on column app.leads.assigned_to is E'Member handling the lead.';
select app.secure_tenant_table('app.leads');
create index leads_location_created_idx on app.leads (location_id, created_at DESC, id DESC);
create index leads_location_status_created_idx on app.leads (location_id, status, created_at DESC, id DESC);
create index leads_assigned_to_idx on app.leads (assigned_to, location_id);
create index leads_call_idx on app.leads (call_id, location_id);
create index leads_customer_idx on app.leads (customer_id, location_id);

create function app.lead_allowed_moves(from_status text)
 RETURNS text[]
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
  select case from_status
    when 'new' then array['contacted', 'booked', 'closed', 'lost']
    when 'contacted' then array['booked', 'closed', 'lost']
    when 'booked' then array['closed', 'lost']
    when 'lost' then array['new', 'contacted']
    else array[]::text[] end
$function$;
comment on function app.lead_allowed_moves(text) is E'The lead status graph (docs/api-contract.md §5); closed is final.';

create function app.tg_leads__status_transition()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
  if new.status is distinct from old.status then
    if not new.status = any (app.lead_allowed_moves(old.status)) then
      perform app.raise('SBTR9',
        format('Lead status cannot move from %s to %s', old.status, new.status),
        jsonb_build_object('from', old.status, 'to', new.status, 'allowed', to_jsonb(app.lead_allowed_moves(old.status))));
    end if;
    new.status_changed_at := now();
  end if;
  return new;
end
$function$;
comment on function app.tg_leads__status_transition() is E'Refuses illegal status moves (SBTR9) and stamps status_changed_at.';

create table app.bookings (
  id uuid default gen_random_uuid() not null,
  location_id uuid not null,
  call_id uuid,
  lead_id uuid,
  customer_id uuid,
  status text default 'scheduled'::text not null,
  scheduled_date date not null,
  scheduled_time app.hhmm,
  service_type text,
  address text,
  notes text,
  created_at timestamp with time zone default now() not null,
  updated_at timestamp with time zone default now() not null,
  constraint bookings_pkey primary key (id, location_id),
  constraint bookings_status_check check ((status = ANY (ARRAY['scheduled'::text, 'confirmed'::text, 'completed'::text, 'cancelled'::text, 'no_show'::text]))),
  constraint bookings_notes_check check ((length(notes) <= 10000)),
  constraint bookings_location_id_fkey foreign key (location_id) references app.locations (id) on delete cascade,
  constraint bookings_call_id_fkey foreign key (location_id, call_id) references app.calls (location_id, id) on delete set null (call_id),
  constraint bookings_lead_id_fkey foreign key (location_id, lead_id) references app.leads (location_id, id) on delete set null (lead_id),
  constraint bookings_customer_id_fkey foreign key (location_id, customer_id) references app.customers (location_id, id) on delete set null (customer_id)
);
comment on table app.bookings is E'An appointment the agent (or a user) scheduled.';
comment on column app.bookings.status is E'scheduled | confirmed | completed | cancelled | no_show.';
comment on column app.bookings.scheduled_date is E'Day of the appointment, location time.';
comment on column app.bookings.scheduled_time is E'HH:MM, location time.';
select app.secure_tenant_table('app.bookings');
create index bookings_location_created_idx on app.bookings (location_id, created_at DESC, id DESC);
create index bookings_call_idx on app.bookings (call_id, location_id);
create index bookings_customer_idx on app.bookings (customer_id, location_id);
create index bookings_lead_idx on app.bookings (lead_id, location_id);

create type app.call_summary_shape as (
  id uuid,
  location_id uuid,
  customer_id uuid,
  direction text,
  caller_phone text,
  caller_name text,
  caller_address text,
  outcome text,
  urgency_level integer,
  is_emergency boolean,
  is_returning_customer boolean,
  started_at text,
  ended_at text,
  duration_sec integer,
  service_type text,
  issue_summary text,
  detected_intent text,
  estimated_value numeric,
  appointment_date date,
  appointment_time text,
  disconnection_reason text,
  created_at text
);
comment on type app.call_summary_shape is E'The fields of the API''s call summary record, in order.';

create function app.call_summary_js(c app.calls)
 RETURNS json
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$
  select to_json(row(
    c.id, c.location_id, c.customer_id, c.direction, app.mask_phone(c.caller_phone), c.caller_name,
    c.caller_address, c.outcome, c.urgency_level, c.is_emergency, c.is_returning_customer,
    app.iso(c.started_at), app.iso(c.ended_at), c.duration_sec, c.service_type, c.issue_summary,
    c.detected_intent, c.estimated_value, c.appointment_date, c.appointment_time,
    c.disconnection_reason, app.iso(c.created_at))::app.call_summary_shape)
$function$;
comment on function app.call_summary_js(app.calls) is E'Call summary (spec) as json text: no transcript, recording or cost data; phone masked. Lists send it as is.';

create function app.call_summary_json(c app.calls)
 RETURNS jsonb
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$ select app.call_summary_js(c)::jsonb $function$;
comment on function app.call_summary_json(app.calls) is E'Call summary (spec): no transcript, recording or cost data; phone masked.';

create type app.lead_shape as (
  id uuid,
  location_id uuid,
  call_id uuid,
  customer_id uuid,
  name text,
  phone text,
  email text,
  address text,
  service_type text,
  urgency_level integer,
  estimated_value numeric,
  status text,
  status_changed_at text,
  assigned_to uuid,
  notes text,
  created_at text,
  updated_at text
);
comment on type app.lead_shape is E'The fields of the API''s lead record, in order.';

create function app.lead_js(l app.leads)
 RETURNS json
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$
  select to_json(row(
    l.id, l.location_id, l.call_id, l.customer_id, l.name, l.phone, l.email, l.address,
    l.service_type, l.urgency_level, l.estimated_value, l.status, app.iso(l.status_changed_at),
    l.assigned_to, l.notes, app.iso(l.created_at), app.iso(l.updated_at))::app.lead_shape)
$function$;
comment on function app.lead_js(app.leads) is E'Lead as the API shows it (phone not masked), as json text.';

create function app.lead_json(l app.leads)
 RETURNS jsonb
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$ select app.lead_js(l)::jsonb $function$;
comment on function app.lead_json(app.leads) is E'Lead as the API and lead.* events show it (phone not masked).';

create type app.booking_shape as (
  id uuid,
  location_id uuid,
  call_id uuid,
  lead_id uuid,
  customer_id uuid,
  status text,
  scheduled_date date,
  scheduled_time text,
  service_type text,
  address text,
  notes text,
  created_at text,
  updated_at text
);
comment on type app.booking_shape is E'The fields of the API''s booking record, in order.';

create function app.booking_js(b app.bookings)
 RETURNS json
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$
  select to_json(row(
    b.id, b.location_id, b.call_id, b.lead_id, b.customer_id, b.status, b.scheduled_date,
    b.scheduled_time, b.service_type, b.address, b.notes, app.iso(b.created_at),
    app.iso(b.updated_at))::app.booking_shape)
$function$;
comment on function app.booking_js(app.bookings) is E'Booking as the API shows it, as json text.';

create function app.booking_json(b app.bookings)
 RETURNS jsonb
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$ select app.booking_js(b)::jsonb $function$;
comment on function app.booking_json(app.bookings) is E'Booking as the API and booking.* events show it.';

create function app.tg_leads__events()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
  if current_setting('app.seeding', true) = 'on' then return null; end if;
  if tg_op = 'INSERT' then
    perform app.emit(new.location_id, 'lead.created', app.lead_json(new));
  elsif new.status is distinct from old.status then
    perform app.emit(new.location_id, 'lead.updated',
      app.lead_json(new) || jsonb_build_object('previous_status', old.status));
  end if;
  return null;
end
$function$;
comment on function app.tg_leads__events() is E'lead.created on insert; lead.updated (+ previous_status) on a status move.';

create function app.tg_bookings__events()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
  if current_setting('app.seeding', true) = 'on' then return null; end if;
  if tg_op = 'INSERT' then
    perform app.emit(new.location_id, 'booking.created', app.booking_json(new));
  elsif (new.status, new.scheduled_date, new.scheduled_time)
        is distinct from (old.status, old.scheduled_date, old.scheduled_time) then
    perform app.emit(new.location_id, 'booking.updated',
      app.booking_json(new) || jsonb_build_object('previous', jsonb_build_object(
        'status', old.status, 'scheduled_date', old.scheduled_date, 'scheduled_time', old.scheduled_time)));
  end if;
  return null;
end
$function$;
comment on function app.tg_bookings__events() is E'booking.created on insert; booking.updated (+ previous values) on a status or time change.';

create function app.call_detail_json(c app.calls, scopes text[])
 RETURNS jsonb
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$
  select app.call_summary_json(c) || jsonb_build_object(
    'recording_url', case when 'recordings:read' = any (scopes) then c.recording_url end,
    'public_log_url', c.public_log_url,
    'transcript', case when 'transcripts:read' = any (scopes) then c.transcript end,
    'transcript_turns', case when 'transcripts:read' = any (scopes) then c.transcript_turns end,
    'call_summary', c.call_summary, 'user_sentiment', c.user_sentiment,
    'in_voicemail', c.in_voicemail)
$function$;
comment on function app.call_detail_json(app.calls,text[]) is E'Call detail: the summary plus recording (recordings:read) and transcript (transcripts:read), else null.';

create function app.check_member(member_id uuid)
 RETURNS void
 LANGUAGE plpgsql
 STABLE
AS $function$
begin
  if member_id is not null and not exists (select 1 from app.members m where m.id = member_id) then
    perform app.raise('SB400', 'assigned_to is not a member of this location',
      jsonb_build_object('issues', jsonb_build_array(jsonb_build_object('path', 'assigned_to', 'message', 'Unknown member'))));
  end if;
end
$function$;
comment on function app.check_member(uuid) is E'400 unless the member is visible under RLS: a foreign key alone would accept another location''s member.';

create function app.booking_allowed_moves(from_status text)
 RETURNS text[]
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
  select case from_status
    when 'scheduled' then array['confirmed', 'completed', 'cancelled', 'no_show']
    when 'confirmed' then array['scheduled', 'completed', 'cancelled', 'no_show']
    when 'cancelled' then array['scheduled']
    when 'no_show' then array['scheduled']
    else array[]::text[] end
$function$;
comment on function app.booking_allowed_moves(text) is E'The booking status graph; completed is final.';

create function app.tg_bookings__status_transition()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
  if new.status is distinct from old.status and not new.status = any (app.booking_allowed_moves(old.status)) then
    perform app.raise('SBTR9',
      format('Booking status cannot move from %s to %s', old.status, new.status),
      jsonb_build_object('from', old.status, 'to', new.status, 'allowed', to_jsonb(app.booking_allowed_moves(old.status))));
  end if;
  return new;
end
$function$;
comment on function app.tg_bookings__status_transition() is E'Refuses illegal booking status moves (SBTR9).';

-- Triggers (name prefix = firing order; see migrations/CONVENTIONS.md)
create trigger _100_set_updated_at BEFORE UPDATE ON app.customers FOR EACH ROW
  execute function app.tg__set_updated_at();
create trigger _100_set_updated_at BEFORE UPDATE ON app.calls FOR EACH ROW
  execute function app.tg__set_updated_at();
create trigger _100_set_updated_at BEFORE UPDATE ON app.leads FOR EACH ROW
  execute function app.tg__set_updated_at();
create trigger _200_status_transition BEFORE UPDATE OF status ON app.leads FOR EACH ROW
  execute function app.tg_leads__status_transition();
create trigger _500_events AFTER INSERT OR UPDATE ON app.leads FOR EACH ROW
  execute function app.tg_leads__events();
create trigger _100_set_updated_at BEFORE UPDATE ON app.bookings FOR EACH ROW
  execute function app.tg__set_updated_at();
create trigger _200_status_transition BEFORE UPDATE OF status ON app.bookings FOR EACH ROW
  execute function app.tg_bookings__status_transition();
create trigger _500_events AFTER INSERT OR UPDATE ON app.bookings FOR EACH ROW
  execute function app.tg_bookings__events();

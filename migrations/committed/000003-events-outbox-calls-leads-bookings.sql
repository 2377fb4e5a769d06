--! Previous: sha1:bb632ab12425bfb36b33ac3651d871cbca1e4217
--! Hash: sha1:0a8e9a3bd75806d7dd6de944fc63d54de746359f
--! Message: events outbox, calls, leads, bookings

create table app.events (
  id uuid primary key default gen_random_uuid(),
  location_id uuid not null references app.locations on delete cascade,
  type text not null check (type = any (app.event_types() || 'webhook.test'::text)),
  data jsonb not null,
  created_at timestamptz not null default now()
);
create index events_location_created_idx on app.events (location_id, created_at desc, id desc);
comment on table app.events is E'Transactional outbox: one row per occurrence, written in the same transaction as the change. Webhook deliveries and notifications are derived from it.';
comment on column app.events.type is E'Event type, e.g. lead.created.';
comment on column app.events.data is E'The `data` object of the delivery body.';
select app.secure_tenant_table('app.events', 'select, insert');

create function app.emit(location_id uuid, type text, data jsonb) returns uuid
  language sql volatile
as $$
  insert into app.events (location_id, type, data) values (location_id, type, data) returning id
$$;
comment on function app.emit(uuid, text, jsonb) is E'Writes one event to the outbox.';

create table app.calls (
  id uuid primary key default gen_random_uuid(),
  location_id uuid not null references app.locations on delete cascade,
  platform_call_id text not null check (length(platform_call_id) between 1 and 200),
  customer_id uuid references app.customers on delete set null,
  direction text not null default 'inbound' check (direction in ('inbound', 'outbound')),
  caller_phone app.e164,
  to_phone text,
  caller_name text,
  caller_address text,
  caller_email text,
  outcome text not null default 'other'
    check (outcome in ('booked', 'transferred', 'lead', 'spam', 'dropped', 'other')),
  urgency_level int not null default 0 check (urgency_level between 0 and 5),
  is_emergency boolean not null default false,
  is_returning_customer boolean not null default false,
  started_at timestamptz,
  ended_at timestamptz,
  duration_sec int check (duration_sec >= 0),
  service_type text,
  issue_summary text,
  detected_intent text,
  estimated_value numeric check (estimated_value >= 0),
  appointment_date date,
  appointment_time text,
  disconnection_reason text,
  recording_url text,
  public_log_url text,
  transcript text,
  transcript_turns jsonb check (transcript_turns is null or jsonb_typeof(transcript_turns) = 'array'),
  call_summary text,
  user_sentiment text,
  in_voicemail boolean,
  agent_id text,
  metadata jsonb not null default '{}',
  platform_status text not null default 'started' check (platform_status in ('started', 'ended', 'analyzed', 'rejected')),
  finalized_at timestamptz,
  emergency_fired_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (location_id, platform_call_id)
);
create index calls_location_created_idx on app.calls (location_id, created_at desc, id desc);
create index calls_location_started_idx on app.calls (location_id, started_at)
  include (outcome, estimated_value, is_emergency, service_type);
create index calls_customer_idx on app.calls (customer_id);
create index calls_location_outcome_idx on app.calls (location_id, outcome, created_at desc);
comment on table app.calls is E'One phone call answered for a location, from the voice platform''s webhooks.';
comment on column app.calls.platform_call_id is E'The voice platform''s call_id; ingestion is idempotent on it.';
comment on column app.calls.caller_phone is E'Full E.164 number; the API masks it as ***-***-NNNN.';
comment on column app.calls.outcome is E'booked | transferred | lead | spam | dropped | other.';
comment on column app.calls.urgency_level is E'0 (routine) to 5 (emergency).';
comment on column app.calls.is_returning_customer is E'The customer existed before this call.';
comment on column app.calls.duration_sec is E'Seconds between start and end.';
comment on column app.calls.transcript is E'Plain transcript; only with scope transcripts:read.';
comment on column app.calls.transcript_turns is E'[{ role, content, words: [{ word, start, end }] }]; only with scope transcripts:read.';
comment on column app.calls.recording_url is E'Only with scope recordings:read.';
comment on column app.calls.platform_status is E'Furthest platform event seen: started | ended | analyzed | rejected (blocklisted before answer).';
comment on column app.calls.finalized_at is E'When the outcome was settled and the call''s records and events were made; set once.';
comment on column app.calls.emergency_fired_at is E'When call.emergency fired for this call (at most once).';
create trigger _100_set_updated_at before update on app.calls
  for each row execute function app.tg__set_updated_at();
select app.secure_tenant_table('app.calls');

create table app.leads (
  id uuid primary key default gen_random_uuid(),
  location_id uuid not null references app.locations on delete cascade,
  call_id uuid references app.calls on delete set null,
  customer_id uuid references app.customers on delete set null,
  name text check (length(name) <= 200),
  phone app.e164,
  email text check (email ~ '^[^@\s]+@[^@\s]+\.[^@\s]+$' and length(email) <= 320),
  address text check (length(address) <= 500),
  service_type text check (length(service_type) <= 200),
  urgency_level int not null default 0 check (urgency_level between 0 and 5),
  estimated_value numeric check (estimated_value >= 0),
  status text not null default 'new' check (status in ('new', 'contacted', 'booked', 'closed', 'lost')),
  status_changed_at timestamptz not null default now(),
  assigned_to uuid references app.members on delete set null,
  notes text check (length(notes) <= 10000),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index leads_location_created_idx on app.leads (location_id, created_at desc, id desc);
create index leads_location_status_created_idx on app.leads (location_id, status, created_at desc, id desc);
create index leads_call_idx on app.leads (call_id);
create index leads_customer_idx on app.leads (customer_id);
create index leads_assigned_to_idx on app.leads (assigned_to);
comment on table app.leads is E'A sales opportunity, from a call or entered through the API.';
comment on column app.leads.status is E'new | contacted | booked | closed | lost; moves checked by app.lead_transition_allowed().';
comment on column app.leads.status_changed_at is E'When status last moved.';
comment on column app.leads.assigned_to is E'Member handling the lead.';
create trigger _100_set_updated_at before update on app.leads
  for each row execute function app.tg__set_updated_at();
select app.secure_tenant_table('app.leads');

create function app.lead_allowed_moves(from_status text) returns text[]
  language sql immutable parallel safe
as $$
  select case from_status
    when 'new' then array['contacted', 'booked', 'closed', 'lost']
    when 'contacted' then array['booked', 'closed', 'lost']
    when 'booked' then array['closed', 'lost']
    when 'lost' then array['new', 'contacted']
    else array[]::text[] end
$$;
comment on function app.lead_allowed_moves(text) is E'The lead status graph (DESIGN.md §5); closed is final.';

create function app.tg_leads__status_transition() returns trigger
  language plpgsql
as $$
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
$$;
comment on function app.tg_leads__status_transition() is E'Refuses illegal status moves (SBTR9) and stamps status_changed_at.';
create trigger _200_status_transition before update of status on app.leads
  for each row execute function app.tg_leads__status_transition();

create table app.bookings (
  id uuid primary key default gen_random_uuid(),
  location_id uuid not null references app.locations on delete cascade,
  call_id uuid references app.calls on delete set null,
  lead_id uuid references app.leads on delete set null,
  customer_id uuid references app.customers on delete set null,
  status text not null default 'scheduled'
    check (status in ('scheduled', 'confirmed', 'completed', 'cancelled', 'no_show')),
  scheduled_date date not null,
  scheduled_time app.hhmm,
  service_type text,
  address text,
  notes text check (length(notes) <= 10000),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index bookings_location_created_idx on app.bookings (location_id, created_at desc, id desc);
create index bookings_call_idx on app.bookings (call_id);
create index bookings_lead_idx on app.bookings (lead_id);
create index bookings_customer_idx on app.bookings (customer_id);
comment on table app.bookings is E'An appointment the agent (or a user) scheduled.';
comment on column app.bookings.status is E'scheduled | confirmed | completed | cancelled | no_show.';
comment on column app.bookings.scheduled_date is E'Day of the appointment, location time.';
comment on column app.bookings.scheduled_time is E'HH:MM, location time.';
create trigger _100_set_updated_at before update on app.bookings
  for each row execute function app.tg__set_updated_at();
select app.secure_tenant_table('app.bookings');

-- JSON shapes of the API and of event data, written once here.
create function app.call_summary_json(c app.calls) returns jsonb
  language sql stable parallel safe
as $$
  select jsonb_build_object(
    'id', c.id, 'location_id', c.location_id, 'customer_id', c.customer_id,
    'direction', c.direction, 'caller_phone', app.mask_phone(c.caller_phone),
    'caller_name', c.caller_name, 'caller_address', c.caller_address,
    'outcome', c.outcome, 'urgency_level', c.urgency_level, 'is_emergency', c.is_emergency,
    'is_returning_customer', c.is_returning_customer,
    'started_at', app.iso(c.started_at), 'ended_at', app.iso(c.ended_at),
    'duration_sec', c.duration_sec, 'service_type', c.service_type,
    'issue_summary', c.issue_summary, 'detected_intent', c.detected_intent,
    'estimated_value', c.estimated_value, 'appointment_date', c.appointment_date,
    'appointment_time', c.appointment_time, 'disconnection_reason', c.disconnection_reason,
    'created_at', app.iso(c.created_at))
$$;
comment on function app.call_summary_json(app.calls) is E'Call summary (spec): no transcript, recording or cost data; phone masked.';

create function app.lead_json(l app.leads) returns jsonb
  language sql stable parallel safe
as $$
  select jsonb_build_object(
    'id', l.id, 'location_id', l.location_id, 'call_id', l.call_id, 'customer_id', l.customer_id,
    'name', l.name, 'phone', l.phone, 'email', l.email, 'address', l.address,
    'service_type', l.service_type, 'urgency_level', l.urgency_level,
    'estimated_value', l.estimated_value, 'status', l.status,
    'status_changed_at', app.iso(l.status_changed_at), 'assigned_to', l.assigned_to,
    'notes', l.notes, 'created_at', app.iso(l.created_at), 'updated_at', app.iso(l.updated_at))
$$;
comment on function app.lead_json(app.leads) is E'Lead as the API and lead.* events show it (phone not masked).';

create function app.booking_json(b app.bookings) returns jsonb
  language sql stable parallel safe
as $$
  select jsonb_build_object(
    'id', b.id, 'location_id', b.location_id, 'call_id', b.call_id, 'lead_id', b.lead_id,
    'customer_id', b.customer_id, 'status', b.status, 'scheduled_date', b.scheduled_date,
    'scheduled_time', b.scheduled_time, 'service_type', b.service_type, 'address', b.address,
    'notes', b.notes, 'created_at', app.iso(b.created_at), 'updated_at', app.iso(b.updated_at))
$$;
comment on function app.booking_json(app.bookings) is E'Booking as the API and booking.* events show it.';

-- Events for leads and bookings come from triggers, so every writer (API, ingestion, staff) fires them.
create function app.tg_leads__events() returns trigger
  language plpgsql
as $$
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
$$;
comment on function app.tg_leads__events() is E'lead.created on insert; lead.updated (+ previous_status) on a status move.';
create trigger _500_events after insert or update on app.leads
  for each row execute function app.tg_leads__events();

create function app.tg_bookings__events() returns trigger
  language plpgsql
as $$
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
$$;
comment on function app.tg_bookings__events() is E'booking.created on insert; booking.updated (+ previous values) on a status or time change.';
create trigger _500_events after insert or update on app.bookings
  for each row execute function app.tg_bookings__events();

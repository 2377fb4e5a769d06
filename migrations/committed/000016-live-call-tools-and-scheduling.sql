--! Previous: sha1:c2bf34c6321c236acf391072ef9c80e99f6151e7
--! Hash: sha1:d715aafa28310b4fa1c03147df52b46dd654d169
--! Message: live call tools and scheduling

-- ==== Live call tools: scheduling windows, bookings with capacity, agent tools, transfers ====
-- docs/scheduling.md, docs/voice-integration.md. Windows are computed from business hours on the
-- fly; what is stored is one counter row per booked window (app.booking_windows), kept by a
-- trigger on app.bookings that refuses the booking past the location's capacity.

-- Re-runnable (graphile-migrate applies current.sql again on every change): what this section
-- creates is dropped first.
drop table if exists app.call_transfers, app.booking_windows cascade;
drop table if exists app.scheduling_settings cascade;
drop trigger if exists _200_window on app.bookings;
drop trigger if exists _300_window_capacity on app.bookings;
drop function if exists app.scheduling_windows(uuid,date,integer);
drop function if exists app.scheduling_open(uuid,timestamp with time zone,integer);
alter table app.bookings drop column if exists window_start, drop column if exists window_end,
  drop column if exists source, drop column if exists platform_call_id;
alter type app.booking_shape drop attribute if exists window_start, drop attribute if exists window_end, drop attribute if exists source;

create table app.scheduling_settings (
  location_id uuid not null,
  window_minutes integer default 120 not null,
  capacity integer default 1 not null,
  lead_time_minutes integer default 60 not null,
  horizon_days integer default 14 not null,
  closed_dates date[] default '{}'::date[] not null,
  updated_at timestamp with time zone default now() not null,
  constraint scheduling_settings_pkey primary key (location_id),
  constraint scheduling_settings_window_minutes_check check (window_minutes between 15 and 720),
  constraint scheduling_settings_capacity_check check (capacity between 1 and 100),
  constraint scheduling_settings_lead_time_minutes_check check (lead_time_minutes between 0 and 20160),
  constraint scheduling_settings_horizon_days_check check (horizon_days between 1 and 90),
  constraint scheduling_settings_closed_dates_check check (cardinality(closed_dates) <= 366),
  constraint scheduling_settings_location_id_fkey foreign key (location_id) references app.locations (id) on delete cascade
);
comment on table app.scheduling_settings is E'Arrival windows of a location (docs/scheduling.md); no row means the defaults.';
comment on column app.scheduling_settings.window_minutes is E'Length of one arrival window, cut from each business-hours interval from its opening time.';
comment on column app.scheduling_settings.capacity is E'Active (scheduled or confirmed) bookings one window may hold.';
comment on column app.scheduling_settings.lead_time_minutes is E'No window starting sooner than this from now is offered or booked.';
comment on column app.scheduling_settings.horizon_days is E'No window starting later than this many days from now is offered or booked.';
comment on column app.scheduling_settings.closed_dates is E'Days (location time) without any window: holidays, shutdowns.';
select app.secure_tenant_table('app.scheduling_settings', 'select, insert, update');
create trigger _100_set_updated_at before update on app.scheduling_settings for each row execute function app.tg__set_updated_at();

create table app.booking_windows (
  location_id uuid not null,
  window_start timestamp with time zone not null,
  booked integer default 0 not null,
  constraint booking_windows_pkey primary key (location_id, window_start),
  constraint booking_windows_booked_check check (booked >= 0),
  constraint booking_windows_location_id_fkey foreign key (location_id) references app.locations (id) on delete cascade
);
comment on table app.booking_windows is E'One counter row per window that holds or held a booking: the active bookings in it. Kept by app.tg_bookings__window_capacity, which takes the row lock and refuses a booking past capacity (SBSL9).';
select app.secure_tenant_table('app.booking_windows', 'select, insert, update');

alter table app.bookings
  add column window_start timestamp with time zone,
  add column window_end timestamp with time zone,
  add column source text default 'api' not null,
  add column platform_call_id text,
  add constraint bookings_source_check check (source = any (array['call', 'agent_tool', 'api'])),
  add constraint bookings_window_end_check check ((window_start is null) = (window_end is null) and window_end > window_start),
  add constraint bookings_platform_call_id_check check (length(platform_call_id) <= 200);
comment on column app.bookings.window_start is E'Start of the arrival window the booking holds (null: a booking without a window, e.g. a date the caller said that matched no open window).';
comment on column app.bookings.window_end is E'End of the arrival window.';
comment on column app.bookings.source is E'call (post-call analysis) | agent_tool (booked by the agent during the call) | api (REST).';
comment on column app.bookings.platform_call_id is E'The voice platform''s call id of an agent_tool booking: its retries book once, and the post-call links the booking to the call.';
-- Staff viewers read bookings through column grants (caller content withheld, docs/privacy.md
-- "Caller content and staff"): the new columns are not caller content.
grant select (window_start, window_end, source, platform_call_id) on app.bookings to switchboard_staff_viewer;
create unique index bookings_tool_call_key on app.bookings (location_id, platform_call_id, window_start) where platform_call_id is not null;
create index bookings_location_window_idx on app.bookings (location_id, window_start) where window_start is not null;
alter table app.bookings disable trigger user;
update app.bookings set source = 'call' where call_id is not null;
alter table app.bookings enable trigger user;

alter type app.booking_shape add attribute window_start text, add attribute window_end text, add attribute source text;

create table app.call_transfers (
  id uuid default gen_random_uuid() not null,
  location_id uuid not null,
  call_id uuid not null,
  status text not null,
  destination text,
  transfer_type text,
  at timestamp with time zone not null,
  dedupe_key text not null,
  created_at timestamp with time zone default now() not null,
  constraint call_transfers_pkey primary key (id, location_id),
  constraint call_transfers_location_id_call_id_dedupe_key_key unique (location_id, call_id, dedupe_key),
  constraint call_transfers_status_check check (status = any (array['started', 'bridged', 'cancelled', 'ended'])),
  constraint call_transfers_destination_check check (length(destination) <= 500),
  constraint call_transfers_transfer_type_check check (length(transfer_type) <= 100),
  constraint call_transfers_location_id_fkey foreign key (location_id) references app.locations (id) on delete cascade,
  constraint call_transfers_call_id_fkey foreign key (location_id, call_id) references app.calls (location_id, id) on delete cascade
);
comment on table app.call_transfers is E'Transfer events of a call (transfer_started | bridged | cancelled | ended), one row per event, call and event timestamp.';
comment on column app.call_transfers.dedupe_key is E'event | platform timestamp | destination: a redelivery of the same event adds nothing.';
select app.secure_tenant_table('app.call_transfers', 'select');
create index call_transfers_call_idx on app.call_transfers (call_id, location_id);

-- Settings

create or replace function app.scheduling_settings_of(loc uuid)
 RETURNS app.scheduling_settings
 LANGUAGE sql
 STABLE
AS $function$
  select s.* from app.scheduling_settings s where s.location_id = loc
  union all
  select loc, 120, 1, 60, 14, '{}'::date[], null::timestamptz
   where not exists (select 1 from app.scheduling_settings s where s.location_id = loc)
  limit 1
$function$;
comment on function app.scheduling_settings_of(uuid) is E'The location''s scheduling settings, the defaults when it has no row.';

create or replace function app.scheduling_json(loc uuid)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
AS $function$
  select jsonb_build_object('location_id', loc, 'window_minutes', s.window_minutes, 'capacity', s.capacity,
    'lead_time_minutes', s.lead_time_minutes, 'horizon_days', s.horizon_days,
    'closed_dates', coalesce((select jsonb_agg(to_char(d, 'YYYY-MM-DD') order by d) from unnest(s.closed_dates) d), '[]'),
    'updated_at', app.iso(s.updated_at))
    from app.scheduling_settings_of(loc) s
$function$;
comment on function app.scheduling_json(uuid) is E'Scheduling settings as the API shows them (docs/api-contract.md, "Scheduling").';

create or replace function api.scheduling_get(token_hash text, location_ref text)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'settings:read');
begin
  return app.scheduling_json(a.location_id);
end
$function$;
comment on function api.scheduling_get(text,text) is E'GET scheduling: window length, capacity, lead time, horizon, closed dates.';
grant execute on function api.scheduling_get(text,text) to switchboard_api;

create or replace function api.scheduling_patch(token_hash text, location_ref text, patch jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'settings:write');
begin
  insert into app.scheduling_settings (location_id) values (a.location_id) on conflict (location_id) do nothing;
  update app.scheduling_settings t
     set (window_minutes, capacity, lead_time_minutes, horizon_days, closed_dates)
       = (select p.window_minutes, p.capacity, p.lead_time_minutes, p.horizon_days,
                 array(select distinct d from unnest(p.closed_dates) d order by d)
            from jsonb_populate_record(t, patch) p)
   where t.location_id = a.location_id;
  return app.scheduling_json(a.location_id);
end
$function$;
comment on function api.scheduling_patch(text,text,jsonb) is E'PATCH scheduling: fields present replace theirs. Bookings already made keep their windows.';
grant execute on function api.scheduling_patch(text,text,jsonb) to switchboard_api;

-- Windows

create or replace function app.scheduling_windows(loc uuid, from_date date, days integer, at timestamp with time zone default now())
 RETURNS TABLE(window_start timestamp with time zone, window_end timestamp with time zone, remaining integer)
 LANGUAGE sql
 STABLE
AS $function$
  -- Windows are cut in local wall-clock time, then placed on the time line in the location's
  -- zone: across a DST change an 8-10 window stays 8-10 on the clock.
  select w.ws, w.we, s.capacity - coalesce(bw.booked, 0)
    from app.scheduling_settings_of(loc) s
    cross join (select l.timezone from app.locations l where l.id = loc) l
    cross join lateral generate_series(from_date::timestamp, (from_date + least(greatest(days, 0), 400) - 1)::timestamp, interval '1 day') g (d)
    join app.business_hours h on h.location_id = loc and h.day = extract(dow from g.d)
    cross join lateral generate_series(0, (extract(epoch from h.close::time - h.open::time) / 60)::int / s.window_minutes - 1) k
    -- offset 0: each window's instants are computed once, not at every place the plan uses them.
    cross join lateral (select (g.d::date + h.open::time + make_interval(mins => k * s.window_minutes)) at time zone l.timezone as ws,
                               (g.d::date + h.open::time + make_interval(mins => (k + 1) * s.window_minutes)) at time zone l.timezone as we
                        offset 0) w
    left join app.booking_windows bw on bw.location_id = loc and bw.window_start = w.ws
   where g.d::date <> all (s.closed_dates)
     and w.ws >= at + make_interval(mins => s.lead_time_minutes)
     and w.ws <= at + make_interval(days => s.horizon_days)
   order by w.ws
$function$;
comment on function app.scheduling_windows(uuid,date,integer,timestamp with time zone) is E'Bookable windows of the days from from_date (location time), oldest first, with the room left in each (0 or less: full): cut from business hours by window_minutes, without closed dates, windows inside the lead time or past the horizon as seen at `at` (now).';

create or replace function app.scheduling_window_end(loc uuid, ws timestamp with time zone)
 RETURNS timestamp with time zone
 LANGUAGE sql
 STABLE
AS $function$
  select w.window_end
    from app.locations l
    cross join lateral app.scheduling_windows(loc, (ws at time zone l.timezone)::date, 1) w
   where l.id = loc and w.window_start = ws
$function$;
comment on function app.scheduling_window_end(uuid,timestamp with time zone) is E'The end of the bookable window starting exactly at ws (full or not), null when ws starts no such window (out of hours, closed, past, inside the lead time, past the horizon).';

create or replace function app.scheduling_open(loc uuid, from_ts timestamp with time zone, n integer, days integer default null)
 RETURNS TABLE(window_start timestamp with time zone, window_end timestamp with time zone, remaining integer)
 LANGUAGE plpgsql
 STABLE
AS $function$
declare
  tz text := (select l.timezone from app.locations l where l.id = loc);
  first_day date := (greatest(from_ts, now()) at time zone tz)::date;
  span integer := coalesce(days, (app.scheduling_settings_of(loc)).horizon_days + 2);
  near integer := least(span, 2);
  got integer;
begin
  -- Most answers lie in the first two days: those are cut first, the rest only when needed.
  return query
    select w.window_start, w.window_end, w.remaining from app.scheduling_windows(loc, first_day, near) w
     where w.remaining > 0 and w.window_start >= from_ts order by w.window_start limit n;
  get diagnostics got = row_count;
  if got < n and span > near then
    return query
      select w.window_start, w.window_end, w.remaining from app.scheduling_windows(loc, first_day + near, span - near) w
       where w.remaining > 0 and w.window_start >= from_ts order by w.window_start limit n - got;
  end if;
end
$function$;
comment on function app.scheduling_open(uuid,timestamp with time zone,integer,integer) is E'The next n open windows (room left) starting at or after from_ts, oldest first, on the days days from the later of from_ts and now (location time; default to the horizon).';

create or replace function app.scheduling_alternatives(loc uuid, ws timestamp with time zone)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
AS $function$
  -- Nothing after a time past the horizon: the next ones from now.
  select coalesce(
    (select jsonb_agg(jsonb_build_object('start', app.iso(o.window_start), 'end', app.iso(o.window_end)) order by o.window_start)
       from app.scheduling_open(loc, coalesce(ws, now()), 3) o),
    (select jsonb_agg(jsonb_build_object('start', app.iso(o.window_start), 'end', app.iso(o.window_end)) order by o.window_start)
       from app.scheduling_open(loc, now(), 3) o),
    '[]')
$function$;
comment on function app.scheduling_alternatives(uuid,timestamp with time zone) is E'details.alternatives of slot_unavailable: the next three open windows from the refused one (from now when it is past, or when none follows it within the horizon).';

create or replace function app.scheduling_refuse(loc uuid, ws timestamp with time zone, reason text)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
begin
  perform app.raise('SBSL9',
    case reason when 'full' then 'This window is full' else 'No bookable window starts at this time' end,
    jsonb_build_object('window_start', app.iso(ws), 'reason', reason, 'alternatives', app.scheduling_alternatives(loc, ws)));
end
$function$;
comment on function app.scheduling_refuse(uuid,timestamp with time zone,text) is E'Raises SBSL9 (409 slot_unavailable) with reason (full | unavailable) and the next three open windows as details.alternatives.';

-- Spoken labels

create or replace function app.scheduling_clock(t timestamp with time zone, tz text, meridiem boolean)
 RETURNS text
 LANGUAGE sql
 STABLE
AS $function$
  select to_char(t at time zone tz, 'FMHH12')
      || case when extract(minute from t at time zone tz) <> 0 then to_char(t at time zone tz, ':MI') else '' end
      || case when meridiem then ' ' || to_char(t at time zone tz, 'AM') else '' end
$function$;
comment on function app.scheduling_clock(timestamp with time zone,text,boolean) is E'"8", "8:30" or "8 AM" in the zone tz, as the agent says it.';

create or replace function app.scheduling_label(ws timestamp with time zone, we timestamp with time zone, tz text)
 RETURNS text
 LANGUAGE sql
 STABLE
AS $function$
  select to_char(ws at time zone tz, 'FMDay, FMMonth FMDD') || ', between '
      || app.scheduling_clock(ws, tz, to_char(ws at time zone tz, 'AM') <> to_char(we at time zone tz, 'AM'))
      || ' and ' || app.scheduling_clock(we, tz, true)
$function$;
comment on function app.scheduling_label(timestamp with time zone,timestamp with time zone,text) is E'A window as the agent says it: "Tuesday, December 1, between 8 and 10 AM" (location time).';

create or replace function app.booking_label(b app.bookings, tz text)
 RETURNS text
 LANGUAGE sql
 STABLE
AS $function$
  select case when b.window_start is not null then app.scheduling_label(b.window_start, b.window_end, tz)
              else to_char(b.scheduled_date, 'FMDay, FMMonth FMDD')
                || coalesce(' at ' || app.scheduling_clock((b.scheduled_date + b.scheduled_time::time) at time zone tz, tz, true), '') end
$function$;
comment on function app.booking_label(app.bookings,text) is E'A booking''s time as the agent says it: its window, else its date and time.';

-- Bookings

create or replace function app.tg_bookings__window()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
declare
  tz text;
begin
  if new.window_start is null then
    new.window_end := null;
  else
    -- Whoever writes the row (API, tools, staff), the date and time are the window's.
    select l.timezone into tz from app.locations l where l.id = new.location_id;
    new.scheduled_date := (new.window_start at time zone tz)::date;
    new.scheduled_time := to_char(new.window_start at time zone tz, 'HH24:MI');
  end if;
  return new;
end
$function$;
comment on function app.tg_bookings__window() is E'Keeps scheduled_date and scheduled_time equal to the window''s start in location time.';
create trigger _200_window before insert or update on app.bookings for each row execute function app.tg_bookings__window();

create or replace function app.tg_bookings__window_capacity()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
declare
  held boolean := tg_op <> 'INSERT' and old.window_start is not null and old.status in ('scheduled', 'confirmed');
  holds boolean := tg_op <> 'DELETE' and new.window_start is not null and new.status in ('scheduled', 'confirmed');
begin
  if held and (not holds or new.window_start <> old.window_start) then
    update app.booking_windows w set booked = w.booked - 1
     where w.location_id = old.location_id and w.window_start = old.window_start;
  end if;
  if holds and (not held or new.window_start <> old.window_start) then
    insert into app.booking_windows (location_id, window_start) values (new.location_id, new.window_start)
    on conflict (location_id, window_start) do nothing;
    -- The row lock serialises concurrent bookings of one window; the condition is re-checked on
    -- the latest row version, so capacity holds under any concurrency.
    update app.booking_windows w set booked = w.booked + 1
     where w.location_id = new.location_id and w.window_start = new.window_start
       and w.booked < (app.scheduling_settings_of(new.location_id)).capacity;
    if not found then
      perform app.scheduling_refuse(new.location_id, new.window_start, 'full');
    end if;
  end if;
  return null;
end
$function$;
comment on function app.tg_bookings__window_capacity() is E'Counts active (scheduled, confirmed) bookings per window in app.booking_windows and refuses one past the location''s capacity (SBSL9, 409 slot_unavailable): on insert, on a move to another window and on a status move back to active.';
create trigger _300_window_capacity after insert or update of window_start, status or delete on app.bookings for each row execute function app.tg_bookings__window_capacity();

create or replace function app.booking_js(b app.bookings)
 RETURNS json
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$
  select to_json(row(
    b.id, b.location_id, b.call_id, b.lead_id, b.customer_id, b.status, b.scheduled_date,
    b.scheduled_time, b.service_type, b.address, b.notes, app.iso(b.created_at),
    app.iso(b.updated_at), app.iso(b.window_start), app.iso(b.window_end), b.source)::app.booking_shape)
$function$;
comment on function app.booking_js(app.bookings) is E'Booking as the API shows it, as json text.';

create or replace function app.tg_bookings__events()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
  if current_setting('app.seeding', true) = 'on' then return null; end if;
  if tg_op = 'INSERT' then
    perform app.emit(new.location_id, 'booking.created', app.booking_json(new));
  elsif (new.status, new.scheduled_date, new.scheduled_time, new.window_start)
        is distinct from (old.status, old.scheduled_date, old.scheduled_time, old.window_start) then
    perform app.emit(new.location_id, 'booking.updated',
      app.booking_json(new) || jsonb_build_object('previous', jsonb_build_object(
        'status', old.status, 'scheduled_date', old.scheduled_date, 'scheduled_time', old.scheduled_time,
        'window_start', app.iso(old.window_start), 'window_end', app.iso(old.window_end))));
  end if;
  return null;
end
$function$;
comment on function app.tg_bookings__events() is E'booking.created on insert; booking.updated (+ previous values) on a status, time or window change.';

create or replace function app.booking_place(loc uuid, body jsonb, v_source text, platform_call text)
 RETURNS app.bookings
 LANGUAGE plpgsql
AS $function$
declare
  ws timestamptz := (body ->> 'window_start')::timestamptz;
  we timestamptz := app.scheduling_window_end(loc, ws);
  cust uuid;
  call_row uuid;
  b app.bookings;
begin
  if we is null then
    perform app.scheduling_refuse(loc, ws, 'unavailable');
  end if;
  -- The caller becomes (or stays) a customer: find_appointments and erasure reach the booking
  -- through them. call_count stays 0 until a call of theirs is settled.
  insert into app.customers as t (location_id, phone, name, address)
  values (loc, body ->> 'phone', left(body ->> 'name', 200), left(body ->> 'address', 500))
  on conflict (location_id, phone) do update
     set name = coalesce(excluded.name, t.name), address = coalesce(excluded.address, t.address)
  returning t.id into cust;
  if platform_call is not null then
    select c.id into call_row from app.calls c where c.location_id = loc and c.platform_call_id = platform_call;
  end if;
  insert into app.bookings (location_id, call_id, customer_id, status, scheduled_date, window_start, window_end,
                            source, platform_call_id, service_type, address, notes)
  values (loc, call_row, cust, 'scheduled', (ws at time zone 'UTC')::date, ws, we,
          v_source, platform_call, left(body ->> 'service_type', 200), left(body ->> 'address', 500), body ->> 'notes')
  returning * into b;
  return b;
end
$function$;
comment on function app.booking_place(uuid,jsonb,text,text) is E'Books window_start for a caller (name, phone, address?, service_type?, notes?): SBSL9 when it is not a bookable window or it is full (the capacity trigger). Shared by POST bookings and the book_appointment tool.';

create or replace function api.booking_create(token_hash text, location_ref text, body jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'bookings:write');
begin
  return app.booking_json(app.booking_place(a.location_id, body, 'api', null));
end
$function$;
comment on function api.booking_create(text,text,jsonb) is E'POST bookings: books a window (409 slot_unavailable with the next three open windows when it cannot); fires booking.created.';
grant execute on function api.booking_create(text,text,jsonb) to switchboard_api;

create or replace function api.availability(token_hash text, location_ref text, from_date date, days integer)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'bookings:read');
  tz text := (select l.timezone from app.locations l where l.id = a.location_id);
begin
  return coalesce((select jsonb_agg(jsonb_build_object('start', app.iso(w.window_start), 'end', app.iso(w.window_end),
                                                       'remaining', w.remaining) order by w.window_start)
                     from app.scheduling_windows(a.location_id, coalesce(from_date, (now() at time zone tz)::date),
                                                 coalesce(days, 7)) w
                    where w.remaining > 0), '[]');
end
$function$;
comment on function api.availability(text,text,date,integer) is E'GET availability: the open windows of the days from from_date (default today, location time), oldest first.';
grant execute on function api.availability(text,text,date,integer) to switchboard_api;

create or replace function api.booking_patch(token_hash text, location_ref text, booking_id uuid, patch jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'bookings:write');
  cur app.bookings;
  b app.bookings;
  ws timestamptz;
  we timestamptz;
begin
  select * into cur from app.bookings t where t.id = booking_id for update;
  if cur.id is null then return null; end if;
  ws := cur.window_start;
  we := cur.window_end;
  if patch ? 'window_start' then
    ws := (patch ->> 'window_start')::timestamptz;
    if ws is distinct from cur.window_start then
      we := app.scheduling_window_end(a.location_id, ws);
      if we is null then
        perform app.scheduling_refuse(a.location_id, ws, 'unavailable');
      end if;
    end if;
  elsif cur.window_start is not null and patch ?| array['scheduled_date', 'scheduled_time'] then
    perform app.raise('SB400', 'This booking holds an arrival window: move it with window_start',
      jsonb_build_object('issues', jsonb_build_array(jsonb_build_object('path', 'scheduled_date',
        'message', 'This booking holds an arrival window: move it with window_start'))));
  end if;
  update app.bookings t
     set (status, scheduled_date, scheduled_time, service_type, address, notes)
       = (select p.status, p.scheduled_date, p.scheduled_time, p.service_type, p.address, p.notes
            from jsonb_populate_record(t, patch - 'window_start') p),
         window_start = ws, window_end = we
   where t.id = booking_id
  returning * into b;
  return app.booking_json(b);
end
$function$;
comment on function api.booking_patch(text,text,uuid,jsonb) is E'PATCH bookings/{id}: status, window (409 slot_unavailable like POST), date and time of a booking without a window, details; fires booking.updated on a status, time or window change.';
grant execute on function api.booking_patch(text,text,uuid,jsonb) to switchboard_api;

-- Agent tools (POST /api/voice/tools/{name}, docs/voice-integration.md)

create or replace function app.voice_transfer_number(loc uuid, emergency boolean)
 RETURNS text
 LANGUAGE sql
 STABLE
AS $function$
  select case when emergency or not app.voice_is_open(l.id, l.timezone)
              then coalesce(l.owner_cell, s.transfer_number, f.existing_business_line)
              else coalesce(f.existing_business_line, s.transfer_number, l.owner_cell) end
    from app.locations l
    left join app.agent_settings s on s.location_id = l.id
    left join app.call_forwarding f on f.location_id = l.id
   where l.id = loc
$function$;
comment on function app.voice_transfer_number(uuid,boolean) is E'Whom the agent transfers to now: in an emergency or outside business hours the owner''s cell, else the business line (call forwarding); the agent''s transfer_number, then the other one, when the first is not set.';

create or replace function app.voice_caller_bookings(loc uuid, caller text)
 RETURNS SETOF app.bookings
 LANGUAGE sql
 STABLE
AS $function$
  select b.*
    from app.customers c
    join app.bookings b on b.customer_id = c.id and b.location_id = c.location_id
   where c.location_id = loc and c.phone = caller and caller is not null
     and b.status in ('scheduled', 'confirmed')
     and coalesce(b.window_end, b.scheduled_date + 1) > now()
   order by coalesce(b.window_start, b.scheduled_date), b.id
$function$;
comment on function app.voice_caller_bookings(uuid,text) is E'The caller''s upcoming active bookings at the location (by the customer''s phone), soonest first; none for a withheld number.';

create or replace function app.voice_windows_json(w_start timestamp with time zone[], w_end timestamp with time zone[], tz text)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
AS $function$
  select coalesce(jsonb_agg(jsonb_build_object('start', app.iso(s), 'end', app.iso(e), 'label', app.scheduling_label(s, e, tz)) order by s), '[]')
    from unnest(w_start, w_end) u (s, e)
$function$;
comment on function app.voice_windows_json(timestamp with time zone[],timestamp with time zone[],text) is E'Windows as a tool answers them: [{ start, end, label }].';

create or replace function app.voice_say_windows(windows jsonb)
 RETURNS text
 LANGUAGE sql
 IMMUTABLE
AS $function$
  select string_agg(w ->> 'label', '; ' order by o) from jsonb_array_elements(windows) with ordinality x (w, o)
$function$;
comment on function app.voice_say_windows(jsonb) is E'The labels of tool windows as one sentence part.';

create or replace function app.voice_tool_booking_json(b app.bookings, tz text)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
AS $function$
  select app.booking_json(b) || jsonb_build_object('label', app.booking_label(b, tz), 'notes', left(b.notes, 500))
$function$;
comment on function app.voice_tool_booking_json(app.bookings,text) is E'A booking as a tool answers it: the API shape plus its spoken label, notes cut to 500 characters (a tool answer stays far under the platform''s 15,000).';

drop function if exists app.voice_tool_slot_refused(uuid,text,timestamp with time zone,text);
create or replace function app.voice_tool_slot_refused(tz text, alternatives jsonb, reason text)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE
AS $function$
declare
  alt jsonb := (select app.voice_windows_json(array_agg((a ->> 'start')::timestamptz order by o), array_agg((a ->> 'end')::timestamptz order by o), tz)
                  from jsonb_array_elements(coalesce(alternatives, '[]')) with ordinality x (a, o));
begin
  return jsonb_build_object('ok', false, 'reason', reason, 'alternatives', alt,
    'message', case when reason = 'full' then 'That window has just been taken.' else 'That time is not one we can book.' end
      || case when jsonb_array_length(alt) > 0 then ' The next open windows are ' || app.voice_say_windows(alt) || '.'
              else ' There is no open window in the coming days.' end);
end
$function$;
comment on function app.voice_tool_slot_refused(text,jsonb,text) is E'The answer of book_appointment or reschedule_appointment when the window cannot be booked: ok false, the reason (full | unavailable) and the alternatives (from slot_unavailable''s details) with their labels.';

create or replace function app.voice_tool(payload jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
declare
  tool text := payload ->> 'name';
  args jsonb := coalesce(payload -> 'args', '{}');
  v_call_id text := payload -> 'call' ->> 'call_id';
  caller text := payload -> 'call' ->> 'from_number';
  l app.locations;
  s app.scheduling_settings;
  b app.bookings;
  ws timestamptz;
  we timestamptz;
  windows jsonb;
  n text;
  from_day date;
  refusal jsonb;
begin
  select * into l from app.locations where service_phone = payload -> 'call' ->> 'to_number';
  if not found then
    perform app.raise('SB404', 'No location answers this number', jsonb_build_object('to_number', payload -> 'call' ->> 'to_number'));
  end if;
  perform set_config('app.location_id', l.id::text, true);
  s := app.scheduling_settings_of(l.id);

  if tool = 'check_availability' then
    from_day := coalesce((args ->> 'date')::date, (now() at time zone l.timezone)::date);
    select app.voice_windows_json(array_agg(w.window_start order by w.window_start), array_agg(w.window_end order by w.window_start), l.timezone)
      into windows
      from app.scheduling_open(l.id, from_day::timestamp at time zone l.timezone, 6,
                               coalesce((args ->> 'days')::int, 7) - greatest((now() at time zone l.timezone)::date - from_day, 0)) w;
    return jsonb_build_object('ok', true, 'windows', windows,
      'message', case when jsonb_array_length(windows) = 0 then 'There is no open window on those days.'
                      else 'Open windows: ' || app.voice_say_windows(windows) || '.' end);

  elsif tool = 'book_appointment' then
    ws := (args ->> 'window_start')::timestamptz;
    -- Retell retries a failed request up to twice: one call books one window once. Class 7303
    -- keeps these keys apart from the post-call's (7301) and Idempotency-Key's (7302).
    perform pg_advisory_xact_lock(7303, hashtext(l.id::text || '/' || v_call_id));
    select * into b from app.bookings t
     where t.location_id = l.id and t.platform_call_id = v_call_id and t.window_start = ws;
    if b.id is null then
      begin
        b := app.booking_place(l.id, args, 'agent_tool', v_call_id);
      exception when sqlstate 'SBSL9' then
        get stacked diagnostics n = pg_exception_detail;
        refusal := n::jsonb;
        return app.voice_tool_slot_refused(l.timezone, refusal -> 'alternatives', refusal ->> 'reason');
      end;
    end if;
    return jsonb_build_object('ok', true, 'booking', app.voice_tool_booking_json(b, l.timezone),
      'message', 'Booked for ' || app.booking_label(b, l.timezone) || '.');

  elsif tool = 'find_appointments' then
    select coalesce(jsonb_agg(app.voice_tool_booking_json(x, l.timezone) order by coalesce(x.window_start, x.scheduled_date), x.id), '[]')
      into windows
      from (select * from app.voice_caller_bookings(l.id, caller) limit 5) x;
    return jsonb_build_object('ok', true, 'appointments', windows,
      'message', case when jsonb_array_length(windows) = 0 then 'There is no upcoming appointment for this phone number.'
                      else 'Upcoming: ' || (select string_agg(a ->> 'label', '; ' order by o) from jsonb_array_elements(windows) with ordinality x (a, o)) || '.' end);

  elsif tool in ('reschedule_appointment', 'cancel_appointment') then
    select x.* into b from app.voice_caller_bookings(l.id, caller) x where x.id = app.uuid_or_null(args ->> 'booking_id');
    if b.id is null then
      return jsonb_build_object('ok', false, 'message', 'I could not find that appointment for this phone number.');
    end if;
    perform 1 from app.bookings t where t.id = b.id for update;
    if tool = 'cancel_appointment' then
      update app.bookings t set status = 'cancelled',
             notes = left(concat_ws(E'\n', t.notes, 'Cancelled by the caller' || coalesce(': ' || (args ->> 'reason'), '') || '.'), 10000)
       where t.id = b.id returning * into b;
      return jsonb_build_object('ok', true, 'booking', app.voice_tool_booking_json(b, l.timezone),
        'message', 'The appointment of ' || app.booking_label(b, l.timezone) || ' is cancelled.');
    end if;
    ws := (args ->> 'window_start')::timestamptz;
    if ws is distinct from b.window_start then
      we := app.scheduling_window_end(l.id, ws);
      if we is null then
        return app.voice_tool_slot_refused(l.timezone, app.scheduling_alternatives(l.id, ws), 'unavailable');
      end if;
      begin
        update app.bookings t set window_start = ws, window_end = we where t.id = b.id returning * into b;
      exception when sqlstate 'SBSL9' then
        get stacked diagnostics n = pg_exception_detail;
        refusal := n::jsonb;
        return app.voice_tool_slot_refused(l.timezone, refusal -> 'alternatives', refusal ->> 'reason');
      end;
    end if;
    return jsonb_build_object('ok', true, 'booking', app.voice_tool_booking_json(b, l.timezone),
      'message', 'Moved to ' || app.booking_label(b, l.timezone) || '.');

  elsif tool = 'transfer_target' then
    n := app.voice_transfer_number(l.id, args ->> 'reason' = 'emergency');
    if n is null then
      return jsonb_build_object('ok', false, 'number', null, 'message', 'There is no number to transfer to; take a message instead.');
    end if;
    return jsonb_build_object('ok', true, 'number', n, 'message', 'Transfer the caller to ' || n || '.');
  end if;
  perform app.raise('SB404', 'Unknown tool', jsonb_build_object('name', tool));
end
$function$;
alter function app.voice_tool(jsonb) owner to switchboard_system;
comment on function app.voice_tool(jsonb) is E'One agent tool call (check_availability, book_appointment, find_appointments, reschedule_appointment, cancel_appointment, transfer_target) with arguments the route validated: routes by call.to_number like the pre-call (SB404 when unknown) and answers { ok, message, ... } with labels in the location''s time zone. SECURITY DEFINER like app.voice_inbound: the platform has no API token; it pins app.location_id to the routed location and touches only its rows.';
revoke execute on function app.voice_tool(jsonb) from public;

CREATE OR REPLACE FUNCTION app.voice_inbound(payload jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
declare
  inb jsonb := payload -> 'call_inbound';
  caller app.e164 := app.voice_e164(inb ->> 'from_number');
  l app.locations;
  s app.agent_settings;
  c app.calls;
  cust app.customers;
begin
  select * into l from app.locations where service_phone = inb ->> 'to_number';
  if not found then
    perform app.raise('SB404', 'No location answers this number', jsonb_build_object('to_number', inb ->> 'to_number'));
  end if;
  perform set_config('app.location_id', l.id::text, true);
  select * into s from app.agent_settings where location_id = l.id;

  if caller is not null and exists (
       select 1 from unnest(s.blocked_numbers) b
        where regexp_replace(b, '\D', '', 'g') = regexp_replace(caller, '\D', '', 'g')) then
    -- Recorded and finalised at once: the platform's later post-call only attaches to this row.
    insert into app.calls (location_id, platform_call_id, direction, caller_phone, to_phone, agent_id,
                           outcome, platform_status, started_at, ended_at, duration_sec, finalized_at)
    values (l.id, 'rejected:' || gen_random_uuid(), 'inbound', caller, inb ->> 'to_number', inb ->> 'agent_id',
            'spam', 'rejected', now(), now(), 0, now())
    returning * into c;
    perform app.emit(l.id, 'spam.blocked', jsonb_build_object(
      'call_id', c.id, 'caller_phone', app.mask_phone(c.caller_phone), 'reason', 'blocklisted',
      'blocked_at', app.iso(c.created_at)));
    perform app.emit(l.id, 'call.ended', app.call_summary_json(c));
    return jsonb_build_object('call_inbound', jsonb_build_object(
      'dynamic_variables', jsonb_build_object('reject_call', 'true'),
      'metadata', jsonb_build_object('location_id', l.id, 'call_row_id', c.id)));
  end if;

  select * into cust from app.customers where location_id = l.id and phone = caller;
  return jsonb_build_object('call_inbound', jsonb_build_object(
    'dynamic_variables', jsonb_build_object(
      'business_name', l.name,
      'timezone', l.timezone,
      'is_open_now', app.voice_is_open(l.id, l.timezone)::text,
      'business_hours', app.voice_hours_text(l.id),
      'service_areas', array_to_string(l.service_areas, ', '),
      'faqs', coalesce((select string_agg(format(E'Q: %s\nA: %s', f.question, f.answer), E'\n\n' order by f.position, f.id)
                          from app.faqs f where f.location_id = l.id), ''),
      'pricebook', coalesce((select string_agg(p.service_name || ': ' || p.price || coalesce(' (' || p.note || ')', ''), E'\n' order by p.position, p.id)
                               from app.pricebook_items p where p.location_id = l.id), ''),
      'transfer_number', coalesce(app.voice_transfer_number(l.id, false), ''),
      'next_open_window', coalesce((select app.scheduling_label(o.window_start, o.window_end, l.timezone)
                                      from app.scheduling_open(l.id, now(), 1) o), ''),
      'caller_upcoming_appointment', coalesce((select app.booking_label(b, l.timezone)
                                                 from app.voice_caller_bookings(l.id, caller) b limit 1), ''),
      'emergency_keywords', array_to_string(s.emergency_keywords, ', '),
      'caller_name', coalesce(cust.name, ''),
      'is_returning_customer', (cust.id is not null)::text),
    'metadata', jsonb_build_object('location_id', l.id)));
end
$function$;
alter function app.voice_inbound(jsonb) owner to switchboard_system;
comment on function app.voice_inbound(jsonb) is E'Pre-call webhook: routes by to_number (SB404 when unknown), answers the agent''s dynamic variables (with the next open window, the caller''s upcoming appointment and whom to transfer to), or rejects a blocklisted caller (records a spam call, fires spam.blocked and call.ended).';
revoke execute on function app.voice_inbound(jsonb) from public;

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
  if ev not in ('call_started', 'call_ended', 'call_analyzed', 'transfer_started', 'transfer_bridged', 'transfer_cancelled', 'transfer_ended') then
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

  if ev like 'transfer\_%' then
    -- One call may try several transfers: a row per event, deduplicated on event, platform
    -- timestamp and destination (a redelivery adds nothing).
    insert into app.call_transfers (location_id, call_id, status, destination, transfer_type, at, dedupe_key)
    values (loc, c.id, substr(ev, 10), left(payload ->> 'transfer_destination', 500),
            left(payload -> 'transfer_option' ->> 'type', 100), coalesce(app.voice_ms(payload -> 'timestamp'), now()),
            concat_ws('|', ev, payload ->> 'timestamp', payload ->> 'transfer_destination'))
    on conflict (location_id, call_id, dedupe_key) do nothing;
  end if;

  return jsonb_build_object('call_id', c.id, 'platform_call_id', c.platform_call_id,
    'platform_status', c.platform_status, 'outcome', c.outcome, 'finalized', c.finalized_at is not null);
end
$function$;
alter function app.voice_post_call(jsonb,boolean,jsonb) owner to switchboard_system;
comment on function app.voice_post_call(jsonb,boolean,jsonb) is E'Post-call webhook (call_started | call_ended | call_analyzed | transfer_started | transfer_bridged | transfer_cancelled | transfer_ended; transfers are recorded in app.call_transfers): routes by the dialled number first (then metadata call_row_id / location_id), serialises deliveries of one platform call id (transaction advisory lock), inserts a new call with its facts (settled at once when this delivery carries the analysis) or updates a known one idempotently on the platform call_id, fires call.emergency on a warm transfer, finalises on analysis (removing a queued finalize_call job) or schedules finalize_call 10 minutes after call_ended. With defer_wakeups the transaction sends no NOTIFY: its jobs wait in app_private.deferred_jobs until the caller runs app.flush_deferred_jobs() after the commit. redacted_call (the call with sensitive numbers replaced, sent only when the route found some) replaces the call when the location redacts (app.privacy_settings.redact_sensitive_data, default on).';
revoke execute on function app.voice_post_call(jsonb,boolean,jsonb) from public;

CREATE OR REPLACE FUNCTION app.voice_finalize_effects(c app.calls, fired boolean)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
declare
  voicemail boolean := coalesce(c.in_voicemail, false) or c.disconnection_reason = 'voicemail_reached';
  l app.leads;
  tz text := (select t.timezone from app.locations t where t.id = c.location_id);
  tool_booked boolean := exists (select 1 from app.bookings b where b.location_id = c.location_id and b.platform_call_id = c.platform_call_id);
  ws timestamptz;
  we timestamptz;
begin
  if c.outcome in ('lead', 'booked', 'transferred') or (voicemail and c.outcome <> 'spam') or tool_booked then
    insert into app.leads (location_id, call_id, customer_id, name, phone, email, address, service_type,
                           urgency_level, estimated_value, status, notes)
    values (c.location_id, c.id, c.customer_id, c.caller_name, c.caller_phone,
            case when c.caller_email ~ '^[^@\s]+@[^@\s]+\.[^@\s]+$' and length(c.caller_email) <= 320 then c.caller_email end,
            c.caller_address, c.service_type, c.urgency_level, c.estimated_value,
            case when c.outcome = 'booked' or tool_booked then 'booked' else 'new' end, c.issue_summary)
    returning * into l;
  end if;

  if tool_booked then
    -- The agent booked during the call (booking.created fired then): that booking is this call's
    -- appointment; the analysis's date and time do not make a second one.
    update app.bookings b set call_id = c.id, lead_id = coalesce(b.lead_id, l.id), customer_id = coalesce(b.customer_id, c.customer_id)
     where b.location_id = c.location_id and b.platform_call_id = c.platform_call_id;
  elsif c.outcome = 'booked' and c.appointment_date is not null then
    -- The window holding the date and time the caller was promised, when it is bookable and has
    -- room; otherwise the booking keeps its date and time without a window, for the contractor.
    if c.appointment_time is not null then
      select w.window_start, w.window_end into ws, we
        from app.scheduling_windows(c.location_id, c.appointment_date, 1) w
       where w.window_start <= (c.appointment_date + c.appointment_time::time) at time zone tz
         and w.window_end > (c.appointment_date + c.appointment_time::time) at time zone tz and w.remaining > 0;
    end if;
    begin
      insert into app.bookings (location_id, call_id, lead_id, customer_id, status, scheduled_date,
                                scheduled_time, service_type, address, notes, source, window_start, window_end)
      values (c.location_id, c.id, l.id, c.customer_id, 'scheduled', c.appointment_date,
              c.appointment_time, c.service_type, c.caller_address, c.issue_summary, 'call', ws, we);
    exception when sqlstate 'SBSL9' then
      insert into app.bookings (location_id, call_id, lead_id, customer_id, status, scheduled_date,
                                scheduled_time, service_type, address, notes, source)
      values (c.location_id, c.id, l.id, c.customer_id, 'scheduled', c.appointment_date,
              c.appointment_time, c.service_type, c.caller_address, c.issue_summary, 'call');
    end;
  end if;

  if fired then
    perform app.emit(c.location_id, 'call.emergency', app.call_summary_json(c) || jsonb_build_object(
      'reason', case when c.outcome = 'transferred' and c.urgency_level < 5 then 'warm_transfer' else 'urgency' end,
      'lead_id', l.id));
  end if;

  perform app.emit(c.location_id, 'call.ended', app.call_summary_json(c));
end
$function$;
comment on function app.voice_finalize_effects(app.calls,boolean) is E'What settling a call creates: its lead (lead, booked, transferred, voicemail not spam, or booked by the agent''s tool), its booking (booked with a date, in the window holding that time when it has room) unless the agent booked during the call (that booking is linked to the call instead), call.emergency when this settlement fired it, and call.ended.';
revoke execute on function app.voice_finalize_effects(app.calls,boolean) from public;
grant execute on function app.voice_finalize_effects(app.calls,boolean) to switchboard_system;

CREATE OR REPLACE FUNCTION app.voice_settle(c app.calls, analysis jsonb)
 RETURNS app.calls
 LANGUAGE plpgsql
AS $function$
declare
  cad jsonb := coalesce(analysis -> 'custom_analysis_data', '{}');
  v_outcome text := cad ->> 'outcome';
  urgency int := least(greatest(coalesce((cad ->> 'urgency_level')::int, 0), 0), 5);
  voicemail boolean := coalesce(c.in_voicemail, false) or c.disconnection_reason = 'voicemail_reached';
  captured boolean := cad ?| array['caller_name', 'caller_address', 'caller_email', 'service_type',
                                   'issue_summary', 'appointment_date'];
  alert boolean;
  emergency boolean;
  fire boolean;
  v_customer_id uuid;
  inserted boolean;
  known_name text;
begin
  if v_outcome is null or v_outcome not in ('booked', 'transferred', 'lead', 'spam', 'dropped', 'other') then
    v_outcome := case
      when c.disconnection_reason in ('call_transfer', 'transfer_bridged') then 'transferred'
      when c.disconnection_reason in ('marked_as_spam', 'scam_detected') then 'spam'
      when voicemail then 'lead'
      when c.disconnection_reason = 'user_hangup' and c.duration_sec < 10 and not captured then 'dropped'
      else 'other' end;
  end if;
  -- alert: the call.emergency event; emergency: the stored flag (the alert, or the analysis flag).
  alert := urgency = 5 or v_outcome = 'transferred';
  emergency := alert or coalesce((cad ->> 'is_emergency')::boolean, false);
  -- call.emergency fires once per call (a warm transfer may have fired it already).
  fire := alert and c.emergency_fired_at is null;

  if c.caller_phone is not null and v_outcome <> 'spam' then
    insert into app.customers as t (location_id, phone, name, email, address, first_call_at, last_call_at, call_count)
    values (c.location_id, c.caller_phone, left(cad ->> 'caller_name', 200), cad ->> 'caller_email',
            left(cad ->> 'caller_address', 500), coalesce(c.started_at, now()), coalesce(c.started_at, now()), 1)
    on conflict (location_id, phone) do update
       set name = coalesce(excluded.name, t.name),
           email = coalesce(excluded.email, t.email),
           address = coalesce(excluded.address, t.address),
           first_call_at = least(t.first_call_at, excluded.first_call_at),
           last_call_at = greatest(t.last_call_at, excluded.last_call_at),
           call_count = t.call_count + 1
    returning t.id, t.call_count = 1, t.name into v_customer_id, inserted, known_name;
  end if;

  c.outcome := v_outcome;
  c.urgency_level := urgency;
  c.is_emergency := emergency or c.emergency_fired_at is not null;
  c.emergency_fired_at := case when fire then now() else c.emergency_fired_at end;
  c.customer_id := v_customer_id;
  c.is_returning_customer := coalesce(not inserted, false);
  c.caller_name := coalesce(left(cad ->> 'caller_name', 200), known_name);
  c.caller_address := left(cad ->> 'caller_address', 500);
  c.caller_email := cad ->> 'caller_email';
  c.service_type := left(cad ->> 'service_type', 200);
  c.issue_summary := left(cad ->> 'issue_summary', 10000);
  c.detected_intent := left(cad ->> 'detected_intent', 200);
  c.estimated_value := (cad ->> 'estimated_value')::numeric;
  c.appointment_date := (cad ->> 'appointment_date')::date;
  c.appointment_time := case when cad ->> 'appointment_time' ~ '^([01][0-9]|2[0-3]):[0-5][0-9]$' then cad ->> 'appointment_time' end;
  c.finalized_at := now();
  return c;
end
$function$;
comment on function app.voice_settle(app.calls,jsonb) is E'The settled fields of a call (outcome from custom_analysis_data, else from disconnection_reason; urgency, emergency flags, caller fields, finalized_at) after upserting its customer; writes no call. Shared by app.voice_finalize (a stored call) and app.voice_post_call (a call first seen already analysed, inserted settled).';
revoke execute on function app.voice_settle(app.calls,jsonb) from public;
grant execute on function app.voice_settle(app.calls,jsonb) to switchboard_system;

CREATE OR REPLACE FUNCTION app.call_detail_json(c app.calls, scopes text[])
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
    'in_voicemail', c.in_voicemail,
    'content_purged_at', app.iso(c.content_purged_at), 'anonymised_at', app.iso(c.anonymised_at),
    'transfers', coalesce((select jsonb_agg(jsonb_build_object('destination', t.destination, 'status', t.status, 'at', app.iso(t.at))
                                            order by t.at, t.created_at)
                             from app.call_transfers t where t.call_id = c.id and t.location_id = c.location_id), '[]'))
$function$;
comment on function app.call_detail_json(app.calls,text[]) is E'Call detail: the summary plus recording (recordings:read) and transcript (transcripts:read), else null, when its content was purged or its caller data anonymised (docs/privacy.md), and its transfers.';

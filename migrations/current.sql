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

-- ==== Staff and caller-data hardening ====
-- Staff audit outcomes: client_gone = executed, the client left before the answer was delivered
-- (a write in it committed all the same; docs/staff.md "Audit").
alter table staff.audit drop constraint audit_outcome_check;
alter table staff.audit add constraint audit_outcome_check check (outcome = any (array['ok', 'error', 'rejected', 'client_gone']));
comment on column staff.audit.outcome is E'rejected: refused before execution (unparsable, invalid, past a bound, or the client left before it ran), nothing ran; ok: executed without errors and delivered (a mutation committed); error: executed with errors (permission denied, timeout, an answer past a bound); client_gone: executed (a mutation without errors committed) but the client left before the answer was delivered.';
comment on column staff.audit.operation_name is E'The name the document gives the operation that ran or was refused (null when it has none or did not parse); never the client''s operationName as sent.';

-- Caller content is withheld from staff viewers (docs/privacy.md "Caller content and staff", the
-- single list; test/privacy/classification.test.ts reads it and checks these grants against it).
select app.staff_hide_columns('app.calls', array['issue_summary', 'call_summary', 'metadata'], array['viewer']);
select app.staff_hide_columns('app.leads', array['notes'], array['viewer']);
select app.staff_hide_columns('app.bookings', array['notes'], array['viewer']);
select app.staff_hide_columns('app.notifications', array['data'], array['viewer']);
select app.staff_hide_columns('app.notification_log', array['detail'], array['viewer']);
select app.staff_hide_columns('app.webhook_deliveries', array['response_body', 'url'], array['viewer']);
select app.staff_hide_columns('app.webhook_endpoints', array['url'], array['viewer']);
select app.staff_hide_columns('app.integrations', array['config', 'webhook_url'], array['viewer']);
comment on role switchboard_staff_viewer is E'Staff GraphQL, viewer: reads every location without caller content (docs/privacy.md "Caller content and staff": transcripts, recordings, summaries, notes, contact details, event payloads, provider and receiver answers, receiver URLs and integration configuration).';

-- Unknown tokens write nothing: the rate limit leases only for a token that is an active API key
-- (no row for anything else; the API counts unknown tokens per address in memory).
create or replace function app.rate_limit_take(token_hash text, window_start bigint, want integer, budget integer,
                                               out granted integer, out used integer)
 language sql
 security definer
 set search_path to 'pg_catalog', 'public', 'pg_temp'
as $function$
  insert into app_private.rate_limits as r (token_hash, window_start, used, granted)
  select rate_limit_take.token_hash, rate_limit_take.window_start, least(greatest(want, 0), budget), least(greatest(want, 0), budget)
   where exists (select 1 from app.api_keys k where k.token_hash = rate_limit_take.token_hash and k.revoked_at is null)
  on conflict on constraint rate_limits_pkey do update
    set window_start = excluded.window_start,
        granted = case when r.window_start = excluded.window_start
                       then least(greatest(want, 0), greatest(budget - r.used, 0)) else excluded.granted end,
        used = case when r.window_start = excluded.window_start
                    then r.used + least(greatest(want, 0), greatest(budget - r.used, 0)) else excluded.used end
  returning r.granted, r.used
$function$;
comment on function app.rate_limit_take(text,bigint,integer,integer) is E'Leases up to want requests of a token''s budget for the minute window_start; returns how many were granted and how many the minute has used in all, or nulls (and writes nothing) when the token is no active API key. SECURITY DEFINER because the API role has no rights on the counters or the keys; it only adds to one known token''s count.';

-- Stored Idempotency-Key answers that held an erased caller's data.
alter table app_private.idempotency_keys add column erased_at timestamp with time zone;
comment on column app_private.idempotency_keys.erased_at is E'Set (and response_body emptied) when an erasure matched the answer: a replay answers 410 idempotency_answer_erased (docs/privacy.md "Erasure").';

CREATE OR REPLACE FUNCTION app.erasure_perform(loc uuid, phone text, email text, customer_id uuid, source text, api_key_id uuid, platform boolean)
 RETURNS uuid
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
declare
  m app.privacy_match;
  erasure_id uuid := gen_random_uuid();
  kinds text[] := '{}';
  hashes jsonb := '{}';
  n_customers int; n_calls int; n_leads int; n_bookings int; n_events int; n_attempts int; n_notifications int;
  ev uuid;
  n_platform int := 0;
  n_replays int;
  h text;
begin
  if loc is null or loc is distinct from app.current_location_id() then
    perform app.raise('SB400', 'app.erasure_perform runs for the pinned location only');
  end if;
  if phone is null and email is null and customer_id is null then
    perform app.raise('SB400', 'Give a phone, an email or a customer_id',
      jsonb_build_object('issues', jsonb_build_array(jsonb_build_object('path', '', 'message', 'Give a phone, an email or a customer_id'))));
  end if;
  -- Erasures of one location run one at a time (held to the end of the transaction): a second
  -- erasure of the same caller, by phone, e-mail or customer id, waits for the first to commit and
  -- then finds everything cleared, so it reports zero matches and emits nothing.
  perform pg_advisory_xact_lock(7303, hashtext(loc::text));
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

  -- Stored Idempotency-Key answers that hold the caller's records or identifiers (a created
  -- lead answers its name and phone): cleared and marked, so a replay is refused (410) instead of
  -- returning the erased data or running the operation again.
  update app_private.idempotency_keys k set response_body = '', erased_at = now()
   where k.location_id = loc and k.erased_at is null
     and (exists (select 1 from unnest(m.customer_ids || m.call_ids || m.lead_ids || m.booking_ids) x
                   where strpos(k.response_body, x::text) > 0)
          or (phone is not null and strpos(k.response_body, phone) > 0)
          or (email is not null and strpos(lower(k.response_body), lower(email)) > 0));
  get diagnostics n_replays = row_count;

  insert into app.erasures (id, location_id, identifier_kinds, identifier_hashes, source, api_key_id, status, matched)
  values (erasure_id, loc, kinds, hashes, source, api_key_id, 'completed', jsonb_build_object(
    'customers', n_customers, 'calls', n_calls, 'leads', n_leads, 'bookings', n_bookings,
    'notifications', n_notifications, 'webhook_attempts', n_attempts, 'events', n_events,
    'idempotency_answers', n_replays));

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
comment on function app.erasure_perform(uuid,text,text,uuid,text,uuid,boolean) is E'Erases one caller''s personal data in the pinned location (docs/privacy.md "Erasure"): customers, calls (caller fields and content), leads, bookings, event data and bodies, webhook attempt response bodies, notification log details, stored Idempotency-Key answers that hold them (replays then answer 410); rows stay, so counts and insights do not change. Records the erasure (identifiers hashed), emits customer.erased (ids only) when anything matched, serialised per location (an advisory lock) so concurrent erasures of one caller match and emit once, and with platform queues the voice-platform deletions. SECURITY DEFINER (switchboard_system) because events are append-only to the API role; it refuses any location but the one app.authorize pinned, and filters every statement by it.';
revoke execute on function app.erasure_perform(uuid,text,text,uuid,text,uuid,boolean) from public;
grant execute on function app.erasure_perform(uuid,text,text,uuid,text,uuid,boolean) to switchboard_api;

CREATE OR REPLACE FUNCTION app.idempotency_begin(token_hash text, location_ref text, scope text, idempotency_key text, fingerprint text, OUT replayed_status integer, OUT replayed_body text)
 RETURNS record
 LANGUAGE plpgsql
AS $function$
declare
  loc uuid := app.idempotency_location(token_hash);
  k app_private.idempotency_keys;
begin
  if idempotency_key is null or length(idempotency_key) not between 1 and 255 then
    perform app.raise('SB400', 'Idempotency-Key must be 1 to 255 characters');
  end if;
  -- An unknown token: the operation's own app.authorize answers 401 and nothing is stored.
  if loc is null then
    return;
  end if;
  -- The token's own location, as app.authorize pins it (RLS on the keys).
  perform set_config('app.location_id', loc::text, true);
  -- Concurrent duplicates: the first holds this lock until its transaction ends; the others answer
  -- 409 at once instead of waiting, and a retry after the commit finds the stored answer.
  if not pg_try_advisory_xact_lock(7302, hashtext(loc::text || '/' || idempotency_key)) then
    perform app.authorize(token_hash, location_ref, scope);
    perform app.raise('SBIK9', 'A request with this Idempotency-Key is still being processed; retry after it has finished');
  end if;
  select * into k from app_private.idempotency_keys i
   where i.location_id = loc and i.idempotency_key = idempotency_begin.idempotency_key;
  if found and k.created_at <= now() - interval '24 hours' then
    -- Expired (not pruned yet): the key is free again.
    delete from app_private.idempotency_keys i where i.location_id = loc and i.idempotency_key = idempotency_begin.idempotency_key;
  elsif found then
    -- A stored answer goes only to a request the operation itself would have let through.
    perform app.authorize(token_hash, location_ref, scope);
    if k.fingerprint <> idempotency_begin.fingerprint then
      perform app.raise('SBIK2', 'This Idempotency-Key was already used for a different request');
    end if;
    -- The answer held a caller's data that has since been erased: neither replayed nor run again.
    if k.erased_at is not null then
      perform app.raise('SBIK7', 'The answer stored under this Idempotency-Key held personal data that has since been erased; it is not replayed and the request is not run again. Use a new key to repeat the request.');
    end if;
    replayed_status := k.response_status;
    replayed_body := k.response_body;
  end if;
  -- Nothing stored: the operation runs and authorizes (401, 404, 403 roll everything back).
end
$function$;
comment on function app.idempotency_begin(text,text,text,text,text) is E'First half of a token-API POST with an Idempotency-Key: takes the key of the token''s location for the transaction (409 idempotency_key_in_use while another request holds it) and returns the stored answer of the same request (null when there is none: the operation then runs and authorizes itself), or refuses another request''s key (422 idempotency_key_reused) or an answer erased with its caller''s data (410 idempotency_answer_erased); both after app.authorize with the operation''s scope. docs/rest-api.md "Idempotency-Key".';
revoke execute on function app.idempotency_begin(text,text,text,text,text) from public;
grant execute on function app.idempotency_begin(text,text,text,text,text) to switchboard_api;

-- ==== Performance after a realistic history ====
-- The demo seeder's last step deleted the customers no seeded call picked after creating the
-- run's leads and bookings. Each deleted customer fires the `on delete set null (customer_id)`
-- actions of calls, leads and bookings, whose query (`… where $1 = location_id and $2 =
-- customer_id`) PostgreSQL plans with that customer's values. On statistics taken before the
-- location had rows (its id absent from the most-common-values list of location_id, which covers
-- every row), the location is estimated at one row and a location-led index wins; it then reads
-- every row of the location per deleted customer (docs/performance.md, "Seeding after a history").
-- Now the step refreshes the statistics of the four tables first (the rows of this transaction
-- count), and deletes unused customers before it writes leads and bookings.

create or replace function app_private.demo_seed_analyze()
 returns void
 language plpgsql
 security definer
 set search_path to pg_catalog, public, pg_temp
as $$
begin
  -- Only the columns the step's statements and its foreign-key actions filter on: a full ANALYZE
  -- of these tables also samples the transcripts and the expression indexes, seconds for nothing.
  analyze app.calls (location_id, customer_id, outcome), app.customers (location_id, call_count),
          app.leads (location_id, customer_id, call_id), app.bookings (location_id, customer_id, call_id);
end
$$;
comment on function app_private.demo_seed_analyze() is E'Demo seed (admin.demo_seed_finish): ANALYZE of the key columns of calls, customers, leads and bookings, so that the step''s own statements and the foreign-key actions of its deletes are planned on statistics that know the seeded location. Security definer, owned by the migrating role: only a table''s owner may ANALYZE it before PostgreSQL 17 (docs/decisions.md, "Performance after a realistic history").';
revoke execute on function app_private.demo_seed_analyze() from public;
grant execute on function app_private.demo_seed_analyze() to switchboard_system;

create or replace function admin.demo_seed_finish(location_ref text)
 returns jsonb
 language plpgsql
 security definer
 set search_path to pg_catalog, public, pg_temp
as $function$
declare
  loc uuid := admin.resolve_location(location_ref);
  n_leads int;
  n_bookings int;
begin
  perform set_config('app.location_id', loc::text, true);
  perform set_config('app.seeding', 'on', true);
  -- Statistics first: the calls just seeded may be unknown to them (docs/performance.md).
  perform app_private.demo_seed_analyze();

  update app.customers cu
     set first_call_at = s.first_at, last_call_at = s.last_at, call_count = s.n
    from (select customer_id, min(started_at) first_at, max(started_at) last_at, count(*)::int n
            from app.calls where location_id = loc group by customer_id) s
   where cu.id = s.customer_id;
  -- Before leads and bookings are written: the foreign-key actions of this delete then find no
  -- row of this run to walk.
  delete from app.customers cu where cu.location_id = loc and cu.call_count = 0
     and not exists (select 1 from app.calls c where c.customer_id = cu.id);

  insert into app.leads (location_id, call_id, customer_id, name, phone, address, service_type,
                         urgency_level, estimated_value, status, status_changed_at, created_at, updated_at)
  select c.location_id, c.id, c.customer_id, c.caller_name, c.caller_phone, c.caller_address, c.service_type,
         c.urgency_level, c.estimated_value,
         case when c.outcome = 'booked' then 'booked'
              else (array['new','new','contacted','closed','lost'])[1 + floor(random() * 5)::int] end,
         c.ended_at, c.ended_at, c.ended_at
    from app.calls c
   where c.location_id = loc and c.outcome in ('booked', 'lead', 'transferred')
     and not exists (select 1 from app.leads l where l.call_id = c.id);
  get diagnostics n_leads = row_count;

  insert into app.bookings (location_id, call_id, lead_id, customer_id, status, scheduled_date,
                            scheduled_time, service_type, address, created_at, updated_at)
  select c.location_id, c.id, l.id, c.customer_id,
         case when c.appointment_date < current_date then 'completed' else 'scheduled' end,
         c.appointment_date, c.appointment_time, c.service_type, c.caller_address, c.ended_at, c.ended_at
    from app.calls c join app.leads l on l.call_id = c.id
   where c.location_id = loc and c.outcome = 'booked' and c.appointment_date is not null
     and not exists (select 1 from app.bookings b where b.call_id = c.id);
  get diagnostics n_bookings = row_count;

  return jsonb_build_object(
    'location_id', loc, 'leads', n_leads, 'bookings', n_bookings,
    'calls', (select count(*) from app.calls where location_id = loc),
    'customers', (select count(*) from app.customers where location_id = loc));
end
$function$;
alter function admin.demo_seed_finish(text) owner to switchboard_system;
comment on function admin.demo_seed_finish(text) is E'Demo seed, step 3: customer call statistics (customers no call picked are deleted), then leads and bookings from the seeded calls; statistics are refreshed first (app_private.demo_seed_analyze).';
revoke execute on function admin.demo_seed_finish(text) from public;

-- Retention's deletes have the same plan shape: deleting an event runs the `on delete cascade`
-- actions of webhook_deliveries and notifications (`… where $1 = location_id and $2 = event_id`),
-- deleting a notification that of notification_log. For a location the statistics do not know,
-- the custom plan of each action walks the location's rows through a location-led index, per
-- deleted row. The generic plan estimates from n_distinct and takes the foreign key's own index,
-- whatever the statistics say about one location; the two deletes run with it.
create or replace function app.retention_prune(kind text, retention_days integer, batch_size integer)
 returns integer
 language plpgsql
 security definer
 set search_path to pg_catalog, public, pg_temp
as $function$
declare
  cutoff timestamptz := now() - make_interval(days => retention_days);
  n int;
  plan_mode text := current_setting('plan_cache_mode');
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
    -- Generic plans for the cascade to notification_log (above); back to the caller's mode after.
    perform set_config('plan_cache_mode', 'force_generic_plan', true);
    delete from app.notifications t using (
      select x.id from app.locations l cross join lateral (
        select n.id from app.notifications n
         where n.location_id = l.id and n.created_at < cutoff and n.status <> 'pending'
         order by n.created_at, n.id limit batch_size
           for update of n skip locked) x
       limit batch_size) s
     where t.id = s.id;
    get diagnostics n = row_count;
    perform set_config('plan_cache_mode', plan_mode, true);
    return n;
  elsif kind = 'events' then
    -- Generic plans for the cascades to webhook_deliveries and notifications (above).
    perform set_config('plan_cache_mode', 'force_generic_plan', true);
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
    get diagnostics n = row_count;
    perform set_config('plan_cache_mode', plan_mode, true);
    return n;
  -- per-location caller-data windows (app.privacy_settings; docs/privacy.md)
  elsif kind like 'privacy\_%' then
    return app.privacy_prune(substr(kind, 9), batch_size);
  -- Idempotency-Key answers after 24 h, rate-limit counters of past minutes (app.idempotency_prune)
  elsif kind in ('idempotency_keys', 'rate_limits') then
    return app.idempotency_prune(kind, batch_size);
  else
    perform app.raise('SB400', format('Unknown retention kind %s', kind));
  end if;
  get diagnostics n = row_count;
  return n;
end
$function$;
alter function app.retention_prune(text,integer,integer) owner to switchboard_system;
comment on function app.retention_prune(text,integer,integer) is E'Worker (prune_deliveries): deletes one batch of settled deliveries | notifications (with their log) | events older than the retention window; a privacy_* kind clears one batch of caller data past its location''s window instead (app.privacy_prune); idempotency_keys | rate_limits drop Idempotency-Key answers older than 24 hours and rate-limit counters of past minutes (app.idempotency_prune); returns the count. The notification and event deletes run with generic plans, so their foreign-key cascades use the key''s index whatever the statistics know of a location (docs/performance.md, "Seeding after a history").';
revoke execute on function app.retention_prune(text,integer,integer) from public;

-- ==== Field-service connections (Jobber, Housecall Pro, ServiceTitan) ====
-- docs/integrations.md: OAuth connect, encrypted tokens, the sync log.

-- current.sql is re-applied on every change (graphile-migrate watch): start from a clean slate.
drop table if exists app.integration_syncs;
drop table if exists app.integration_oauth_states;
drop function if exists api.integration_authorize(text,text,text,boolean,text,bytea,text);
drop function if exists app.integration_oauth_consume(text);
drop function if exists app.integration_oauth_connect(uuid,text,text,timestamp with time zone,bytea);
drop function if exists api.integration_credentials_put(text,text,text,text,timestamp with time zone,bytea);
drop function if exists api.integration_disconnect(text,text,text);
alter table app.integrations drop column if exists secrets_ciphertext;

-- Tokens and client secrets, encrypted by the application (AES-256-GCM, INTEGRATION_ENCRYPTION_KEY)
-- as one JSON document; the database never holds them in clear. The old clear-text columns stay
-- unused (always null).
alter table app.integrations add column secrets_ciphertext bytea;
comment on column app.integrations.secrets_ciphertext is E'@behavior -select -filterBy -orderBy\nAES-256-GCM ciphertext (12-byte IV, 16-byte tag, then the sealed JSON of access_token, refresh_token, client_id, client_secret); never returned by any API, never shown to staff.';
select app.staff_hide_columns('app.integrations', array['secrets_ciphertext']);

create table app.integration_oauth_states (
  id uuid default gen_random_uuid() not null,
  location_id uuid not null,
  provider text not null,
  state_sha256 text not null,
  code_verifier_ciphertext bytea not null,
  expires_at timestamp with time zone default (now() + interval '10 minutes') not null,
  used_at timestamp with time zone,
  created_at timestamp with time zone default now() not null,
  constraint integration_oauth_states_pkey primary key (id, location_id),
  constraint integration_oauth_states_provider_check check (provider = any (array['jobber', 'housecall_pro'])),
  constraint integration_oauth_states_state_sha256_check check (state_sha256 ~ '^[0-9a-f]{64}$'),
  constraint integration_oauth_states_location_id_fkey foreign key (location_id) references app.locations (id) on delete cascade
);
comment on table app.integration_oauth_states is E'Pending OAuth authorizations: the state handed to the provider (single use, 10 minutes, bound to one location) and its PKCE verifier (docs/integrations.md).';
comment on column app.integration_oauth_states.state_sha256 is E'SHA-256 hex of the state parameter; the state itself is only in the authorize URL.';
comment on column app.integration_oauth_states.code_verifier_ciphertext is E'@behavior -select -filterBy -orderBy\nPKCE code verifier, AES-256-GCM ciphertext.';
comment on column app.integration_oauth_states.used_at is E'Set by the callback that consumed the state; a second callback with it is refused.';
select app.secure_tenant_table('app.integration_oauth_states', 'select, insert, delete');
select app.staff_hide_table('app.integration_oauth_states');
create unique index integration_oauth_states_state_key on app.integration_oauth_states (state_sha256, location_id);
create index integration_oauth_states_location_expires_idx on app.integration_oauth_states (location_id, expires_at);

create table app.integration_syncs (
  id uuid default gen_random_uuid() not null,
  location_id uuid not null,
  integration_id uuid not null,
  provider text not null,
  record_type text not null,
  record_id uuid not null,
  action text not null,
  status text default 'pending' not null,
  attempts integer default 0 not null,
  external_id text,
  remote jsonb default '{}'::jsonb not null,
  last_error text,
  next_attempt_at timestamp with time zone default now() not null,
  created_at timestamp with time zone default now() not null,
  updated_at timestamp with time zone default now() not null,
  constraint integration_syncs_pkey primary key (id, location_id),
  constraint integration_syncs_record_type_check check (record_type = any (array['lead', 'booking'])),
  constraint integration_syncs_action_check check (action = any (array['create', 'update'])),
  constraint integration_syncs_status_check check (status = any (array['pending', 'synced', 'failed'])),
  constraint integration_syncs_attempts_check check (attempts >= 0),
  constraint integration_syncs_last_error_check check (length(last_error) <= 2000),
  constraint integration_syncs_location_id_fkey foreign key (location_id) references app.locations (id) on delete cascade,
  constraint integration_syncs_integration_fkey foreign key (location_id, integration_id) references app.integrations (location_id, id) on delete cascade
);
comment on table app.integration_syncs is E'Sync log: one row per record written (or updated) in a field-service system (docs/integrations.md "Sync log").';
comment on column app.integration_syncs.remote is E'Remote ids created so far (client, customer, address, request, lead, job, booking): a retry after a crash reuses them instead of creating twice.';
comment on column app.integration_syncs.external_id is E'Id of the remote record (Jobber request, Housecall Pro lead or job, ServiceTitan booking).';
comment on column app.integration_syncs.next_attempt_at is E'Earliest time of the next attempt of a pending sync (backoff, Retry-After).';
select app.secure_tenant_table('app.integration_syncs', 'select, update');
create trigger _100_set_updated_at before update on app.integration_syncs for each row execute function app.tg__set_updated_at();
create index integration_syncs_integration_idx on app.integration_syncs (location_id, integration_id);
create index integration_syncs_location_created_idx on app.integration_syncs (location_id, provider, created_at desc, id desc);
create unique index integration_syncs_record_key on app.integration_syncs (location_id, integration_id, record_type, record_id, action) where action = 'create';

-- The authorize step: one pending state per call, bound to the token's location.
create function api.integration_authorize(token_hash text, location_ref text, provider text, configured boolean,
                                          state_sha256 text, code_verifier_ciphertext bytea, authorize_url text)
 returns jsonb
 language plpgsql
as $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'integrations:write');
  s app.integration_oauth_states;
begin
  if provider is distinct from 'jobber' and provider is distinct from 'housecall_pro' then
    perform app.raise('SB400', format('%s has no authorization flow here (servicetitan connects with PUT …/integrations/servicetitan/credentials)', provider),
                      jsonb_build_object('provider', provider));
  end if;
  if not configured then
    perform app.raise('SB503', format('%s is not configured on this server', provider), jsonb_build_object('provider', provider));
  end if;
  if exists (select 1 from app.integrations x where x.provider = integration_authorize.provider and x.status = 'connected') then
    perform app.raise('SB409', format('A %s integration is already connected; disconnect it first', provider), jsonb_build_object('provider', provider));
  end if;
  delete from app.integration_oauth_states o where o.location_id = a.location_id and o.expires_at < now() - interval '1 day';
  insert into app.integration_oauth_states (location_id, provider, state_sha256, code_verifier_ciphertext)
  values (a.location_id, provider, state_sha256, code_verifier_ciphertext)
  returning * into s;
  return jsonb_build_object('authorize_url', authorize_url, 'expires_at', app.iso(s.expires_at));
end
$function$;
comment on function api.integration_authorize(text,text,text,boolean,text,bytea,text) is E'POST integrations/{provider}/authorize: records a single-use state (10 minutes, this location) with its PKCE verifier and answers the authorize URL the route built; SB503 when the provider is not configured, SB409 when one is connected.';
revoke execute on function api.integration_authorize(text,text,text,boolean,text,bytea,text) from public;
grant execute on function api.integration_authorize(text,text,text,boolean,text,bytea,text) to switchboard_api;

-- The public callback: consume the state (whatever happens next) and say what it was.
create function app.integration_oauth_consume(state_sha256 text)
 returns jsonb
 language plpgsql
 security definer
 set search_path to pg_catalog, public, pg_temp
as $function$
declare
  s app.integration_oauth_states;
  loc_name text;
begin
  update app.integration_oauth_states o set used_at = now()
   where o.state_sha256 = integration_oauth_consume.state_sha256 and o.used_at is null
  returning * into s;
  if s.id is null then
    if exists (select 1 from app.integration_oauth_states o where o.state_sha256 = integration_oauth_consume.state_sha256) then
      return jsonb_build_object('outcome', 'used');
    end if;
    return jsonb_build_object('outcome', 'unknown');
  end if;
  select l.name into loc_name from app.locations l where l.id = s.location_id;
  return jsonb_build_object(
    'outcome', case when s.expires_at < now() then 'expired' else 'ok' end,
    'location_id', s.location_id, 'location_name', loc_name, 'provider', s.provider,
    'code_verifier_ciphertext', encode(s.code_verifier_ciphertext, 'base64'));
end
$function$;
alter function app.integration_oauth_consume(text) owner to switchboard_system;
comment on function app.integration_oauth_consume(text) is E'OAuth callback, step 1: marks the state used (single use) and returns its location, provider and PKCE verifier, or outcome unknown/used/expired. Definer: the callback is public (no token, so no app.location_id) and must find the state across locations.';
revoke execute on function app.integration_oauth_consume(text) from public;

-- The public callback, after the code exchange: the connected integration.
create function app.integration_oauth_connect(location_id uuid, provider text, external_id text, expires_at timestamp with time zone,
                                              secrets_ciphertext bytea)
 returns jsonb
 language plpgsql
 security definer
 set search_path to pg_catalog, public, pg_temp
as $function$
declare
  i app.integrations;
begin
  if exists (select 1 from app.integrations x where x.location_id = integration_oauth_connect.location_id
               and x.provider = integration_oauth_connect.provider and x.status = 'connected') then
    perform app.raise('SB409', format('A %s integration is already connected', provider), jsonb_build_object('provider', provider));
  end if;
  -- Re-authorising an expired (or errored) connection keeps its row, so its waiting syncs resume.
  update app.integrations x
     set status = 'connected', external_id = integration_oauth_connect.external_id, expires_at = integration_oauth_connect.expires_at,
         secrets_ciphertext = integration_oauth_connect.secrets_ciphertext, connected_at = now(), disconnected_at = null,
         last_error = null, access_token = null, refresh_token = null
   where x.id = (select y.id from app.integrations y
                  where y.location_id = integration_oauth_connect.location_id and y.provider = integration_oauth_connect.provider
                    and y.status in ('expired', 'error')
                  order by y.created_at desc limit 1)
     and x.location_id = integration_oauth_connect.location_id
  returning * into i;
  if i.id is null then
    insert into app.integrations (location_id, provider, status, external_id, expires_at, secrets_ciphertext, connected_at)
    values (location_id, provider, 'connected', external_id, expires_at, secrets_ciphertext, now())
    returning * into i;
  end if;
  return app.integration_json(i);
end
$function$;
alter function app.integration_oauth_connect(uuid,text,text,timestamp with time zone,bytea) owner to switchboard_system;
comment on function app.integration_oauth_connect(uuid,text,text,timestamp with time zone,bytea) is E'OAuth callback, step 2: stores the encrypted tokens and marks the integration connected (re-using an expired row so its waiting syncs resume). Definer: the callback is public and writes one row of the state''s location.';
revoke execute on function app.integration_oauth_connect(uuid,text,text,timestamp with time zone,bytea) from public;

-- ServiceTitan: client credentials checked by the route (a token minted) before this runs.
create function api.integration_credentials_put(token_hash text, location_ref text, provider text, external_id text,
                                                expires_at timestamp with time zone, secrets_ciphertext bytea)
 returns jsonb
 language plpgsql
as $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'integrations:write');
  i app.integrations;
begin
  if provider is distinct from 'servicetitan' then
    perform app.raise('SB400', format('%s does not connect with credentials', provider), jsonb_build_object('provider', provider));
  end if;
  update app.integrations x
     set status = 'connected', external_id = integration_credentials_put.external_id, expires_at = integration_credentials_put.expires_at,
         secrets_ciphertext = integration_credentials_put.secrets_ciphertext,
         connected_at = case when x.status = 'connected' then x.connected_at else now() end,
         disconnected_at = null, last_error = null
   where x.id = (select y.id from app.integrations y
                  where y.provider = 'servicetitan' and y.status in ('connected', 'expired', 'error')
                  order by (y.status = 'connected') desc, y.created_at desc limit 1)
     and x.location_id = a.location_id
  returning * into i;
  if i.id is null then
    insert into app.integrations (location_id, provider, status, external_id, expires_at, secrets_ciphertext, connected_at)
    values (a.location_id, 'servicetitan', 'connected', external_id, expires_at, secrets_ciphertext, now())
    returning * into i;
  end if;
  return app.integration_json(i);
end
$function$;
comment on function api.integration_credentials_put(text,text,text,text,timestamp with time zone,bytea) is E'PUT integrations/servicetitan/credentials: stores the encrypted client credentials (and the token minted with them) and marks the integration connected, replacing earlier credentials.';
revoke execute on function api.integration_credentials_put(text,text,text,text,timestamp with time zone,bytea) from public;
grant execute on function api.integration_credentials_put(text,text,text,text,timestamp with time zone,bytea) to switchboard_api;

-- DELETE: disconnect, erase the secrets, and hand the route the old ciphertext once so it can revoke.
create function api.integration_disconnect(token_hash text, location_ref text, provider text)
 returns jsonb
 language plpgsql
as $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'integrations:write');
  old_secrets bytea;
  i app.integrations;
begin
  select x.secrets_ciphertext into old_secrets from app.integrations x
   where x.location_id = a.location_id and x.provider = integration_disconnect.provider
     and (x.status = 'connected' or (x.status in ('expired', 'error') and x.secrets_ciphertext is not null))
   order by (x.status = 'connected') desc, x.created_at desc limit 1 for update;
  update app.integrations t
     set status = 'disconnected', disconnected_at = now(), access_token = null, refresh_token = null, secrets_ciphertext = null
   where t.id = (select y.id from app.integrations y
                  where y.location_id = a.location_id and y.provider = integration_disconnect.provider
                    and (y.status = 'connected' or (y.status in ('expired', 'error') and y.secrets_ciphertext is not null))
                  order by (y.status = 'connected') desc, y.created_at desc limit 1)
     and t.location_id = a.location_id
  returning * into i;
  if i.id is null then return null; end if;
  return jsonb_build_object('integration', app.integration_json(i), 'secrets_ciphertext', encode(old_secrets, 'base64'));
end
$function$;
comment on function api.integration_disconnect(text,text,text) is E'DELETE integrations/{provider}: marks the connected one (or an expired one still holding secrets) disconnected and erases its secrets; returns the record and, for the route only, the erased ciphertext so it can revoke at the provider. 404 when none.';
revoke execute on function api.integration_disconnect(text,text,text) from public;
grant execute on function api.integration_disconnect(text,text,text) to switchboard_api;

-- The disconnect above replaces it (it also hands over the ciphertext to revoke with).
drop function if exists api.integration_delete(text,text,text);

-- Token lifecycle (docs/integrations.md "Tokens"): the worker reads, refreshes and stores tokens
-- through these; a refresh runs under a per-connection advisory lock so two processes never use
-- the same (rotating) refresh token.
drop function if exists app.integration_token_state(uuid,boolean);
drop function if exists app.integration_token_store(uuid,bytea,timestamp with time zone);
drop function if exists app.integration_token_refused(uuid,text);

create function app.integration_token_state(integration_id uuid, lock boolean)
 returns jsonb
 language plpgsql
 security definer
 set search_path to pg_catalog, public, pg_temp
as $function$
declare
  i app.integrations;
begin
  if lock then
    -- Held to the end of the caller's transaction: the refresh and its store happen inside it.
    perform pg_advisory_xact_lock(hashtextextended('integration-token:' || integration_id::text, 0));
  end if;
  select * into i from app.integrations x where x.id = integration_token_state.integration_id;
  if i.id is null then return null; end if;
  return jsonb_build_object('id', i.id, 'location_id', i.location_id, 'provider', i.provider, 'status', i.status,
    'external_id', i.external_id, 'expires_at', app.iso(i.expires_at),
    'secrets_ciphertext', encode(i.secrets_ciphertext, 'base64'));
end
$function$;
alter function app.integration_token_state(uuid,boolean) owner to switchboard_system;
comment on function app.integration_token_state(uuid,boolean) is E'Worker: one integration''s status, expiry and encrypted secrets; lock=true first takes the connection''s transaction advisory lock (one refresh at a time across processes). Definer: the worker reads any location''s connection by id.';
revoke execute on function app.integration_token_state(uuid,boolean) from public;

create function app.integration_token_store(integration_id uuid, secrets_ciphertext bytea, expires_at timestamp with time zone)
 returns void
 language sql
 security definer
 set search_path to pg_catalog, public, pg_temp
as $function$
  update app.integrations x
     set secrets_ciphertext = integration_token_store.secrets_ciphertext, expires_at = integration_token_store.expires_at
   where x.id = integration_token_store.integration_id and x.status = 'connected'
$function$;
alter function app.integration_token_store(uuid,bytea,timestamp with time zone) owner to switchboard_system;
comment on function app.integration_token_store(uuid,bytea,timestamp with time zone) is E'Worker: stores refreshed tokens (the rotated refresh token before anything uses it). Definer: worker-side write of one connection.';
revoke execute on function app.integration_token_store(uuid,bytea,timestamp with time zone) from public;

create function app.integration_token_refused(integration_id uuid, reason text)
 returns void
 language plpgsql
 security definer
 set search_path to pg_catalog, public, pg_temp
as $function$
declare
  i app.integrations;
begin
  update app.integrations x
     set status = 'expired', last_error = left(reason, 2000)
   where x.id = integration_token_refused.integration_id and x.status = 'connected'
  returning * into i;
  if i.id is null then return; end if;
  perform app.notification_fanout(i.location_id, null, 'integration.expired', jsonb_build_object(
    'integration_id', i.id, 'provider', i.provider, 'external_id', i.external_id, 'last_error', i.last_error,
    'pending_syncs', (select count(*) from app.integration_syncs s where s.location_id = i.location_id and s.integration_id = i.id and s.status = 'pending')));
end
$function$;
alter function app.integration_token_refused(uuid,text) owner to switchboard_system;
comment on function app.integration_token_refused(uuid,text) is E'Worker: the provider refused the refresh (revoked, downgraded): the integration becomes expired with last_error and the location is notified (integration.expired); its syncs wait for re-authorisation. Definer: worker-side write and fan-out.';
revoke execute on function app.integration_token_refused(uuid,text) from public;

-- integration.expired: an operational notification (not an event), routed like the endpoint alerts.
create or replace function app.operational_notification_types()
 returns text[]
 language sql
 immutable parallel safe
as $function$ select array['webhook_endpoint.failing', 'webhook_endpoint.disabled', 'integration.expired'] $function$;
comment on function app.operational_notification_types() is E'Notification types that are not events (never sent as webhooks): a failing webhook endpoint, a disabled one, a field-service connection that needs re-authorisation.';

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
    "webhook_endpoint.disabled": ["email", "chat"],
    "integration.expired": ["email", "chat"]
  }'::jsonb
$function$;
comment on function app.notification_routes_default() is E'Defaults: emergencies → sms + email + chat; leads and bookings → email + chat; webhook endpoint failing/disabled and an expired field-service connection → email + chat; spam, customer.erased and the rest → none.';

-- Locations that exist already get the new type's default route.
update app.notification_settings s set routes = s.routes || jsonb_build_object('integration.expired', app.notification_routes_default() -> 'integration.expired')
 where not s.routes ? 'integration.expired';

-- Write-back (docs/integrations.md "What is written where"): every lead.created, booking.created
-- and booking.updated of a location with a field-service connection becomes a sync row and a job.
alter table app.integration_syncs add column if not exists lease_until timestamp with time zone;
comment on column app.integration_syncs.lease_until is E'A worker holds this sync until then (claimed); a lapsed lease is picked up again by the sweep.';
create index if not exists integration_syncs_due_idx on app.integration_syncs (next_attempt_at) where status = 'pending';

drop trigger if exists _550_integration_sync on app.events;
drop function if exists app.tg_events__integration_sync();
drop function if exists app.integration_sync_claim(uuid,integer);
drop function if exists app.integration_sync_progress(uuid,jsonb);
drop function if exists app.integration_sync_finish(uuid,text,text,text,integer);
drop function if exists app.integration_sync_sweep(integer);
drop function if exists app.integration_sync_resume(uuid);

create function app.tg_events__integration_sync()
 returns trigger
 language plpgsql
 security definer
 set search_path to pg_catalog, public, pg_temp
as $function$
declare
  rtype text := split_part(new.type, '.', 1);
  act text := case when new.type like '%.created' then 'create' else 'update' end;
  rid uuid := app.uuid_or_null(new.data ->> 'id');
  s record;
begin
  if current_setting('app.seeding', true) = 'on' or rid is null then return null; end if;
  for s in
    insert into app.integration_syncs (location_id, integration_id, provider, record_type, record_id, action)
    select new.location_id, i.id, i.provider, rtype, rid, act
      from app.integrations i
     where i.location_id = new.location_id and i.provider in ('jobber', 'housecall_pro', 'servicetitan')
       and i.status in ('connected', 'expired')
       -- Jobber requests are not updated after creation (docs/integrations.md).
       and (act = 'create' or i.provider <> 'jobber')
    on conflict (location_id, integration_id, record_type, record_id, action) where action = 'create' do nothing
    returning id, location_id, integration_id
  loop
    -- An expired connection's syncs wait (pending) and are queued again when it is re-authorised.
    if exists (select 1 from app.integrations i where i.id = s.integration_id and i.location_id = s.location_id and i.status = 'connected') then
      perform app.enqueue('integration_sync', jsonb_build_object('sync_id', s.id, 'integration_id', s.integration_id), null, 'integration_sync:' || s.id);
    end if;
  end loop;
  return null;
end
$function$;
alter function app.tg_events__integration_sync() owner to switchboard_system;
comment on function app.tg_events__integration_sync() is E'After a lead.created, booking.created or booking.updated event: one pending sync per field-service connection of the location (expired ones wait), and a job for each connected one. Definer: the API role has no rights on the sync log''s inserts or the queue.';
revoke execute on function app.tg_events__integration_sync() from public;
create trigger _550_integration_sync after insert on app.events for each row
  when (new.type in ('lead.created', 'booking.created', 'booking.updated'))
  execute function app.tg_events__integration_sync();

create function app.integration_sync_claim(sync_id uuid, lease_seconds integer)
 returns jsonb
 language plpgsql
 security definer
 set search_path to pg_catalog, public, pg_temp
as $function$
declare
  s app.integration_syncs;
  rec jsonb;
  loc app.locations;
begin
  update app.integration_syncs x
     set lease_until = now() + make_interval(secs => lease_seconds), attempts = x.attempts + 1
   where x.id = integration_sync_claim.sync_id and x.status = 'pending'
     and (x.lease_until is null or x.lease_until < now()) and x.next_attempt_at <= now() + interval '1 second'
     and exists (select 1 from app.integrations i where i.id = x.integration_id and i.location_id = x.location_id and i.status = 'connected')
  returning * into s;
  if s.id is null then return null; end if;
  select * into loc from app.locations l where l.id = s.location_id;
  if s.record_type = 'lead' then
    select app.lead_json(l) into rec from app.leads l where l.id = s.record_id and l.location_id = s.location_id;
  else
    select app.booking_json(b) || to_jsonb(b) - array['location_id'] || jsonb_build_object('customer', (
             select jsonb_build_object('name', coalesce(c.name, ld.name), 'phone', coalesce(c.phone::text, ld.phone::text),
                                       'email', coalesce(c.email, ld.email), 'address', coalesce(b.address, c.address, ld.address))
               from (select 1) one
               left join app.customers c on c.id = b.customer_id and c.location_id = b.location_id
               left join app.leads ld on ld.id = b.lead_id and ld.location_id = b.location_id))
      into rec from app.bookings b where b.id = s.record_id and b.location_id = s.location_id;
  end if;
  return jsonb_build_object('id', s.id, 'location_id', s.location_id, 'integration_id', s.integration_id, 'provider', s.provider,
    'record_type', s.record_type, 'record_id', s.record_id, 'action', s.action, 'attempts', s.attempts, 'remote', s.remote,
    'external_id', s.external_id, 'record', rec, 'timezone', loc.timezone, 'business', loc.name,
    'create_remote', (select c.remote from app.integration_syncs c
                       where c.location_id = s.location_id and c.integration_id = s.integration_id and c.record_type = s.record_type
                         and c.record_id = s.record_id and c.action = 'create'));
end
$function$;
alter function app.integration_sync_claim(uuid,integer) owner to switchboard_system;
comment on function app.integration_sync_claim(uuid,integer) is E'Worker: claims a due pending sync of a connected integration for lease_seconds (counting the attempt) and returns it with the record to write (booking with its customer), the location''s time zone, and for an update the remote ids of the record''s create. Null when not due, leased elsewhere, finished or its connection is not connected. Definer: worker-side read across locations.';
revoke execute on function app.integration_sync_claim(uuid,integer) from public;

create function app.integration_sync_progress(sync_id uuid, remote jsonb)
 returns void
 language sql
 security definer
 set search_path to pg_catalog, public, pg_temp
as $function$
  update app.integration_syncs x set remote = x.remote || integration_sync_progress.remote
   where x.id = integration_sync_progress.sync_id
$function$;
alter function app.integration_sync_progress(uuid,jsonb) owner to switchboard_system;
comment on function app.integration_sync_progress(uuid,jsonb) is E'Worker: records a remote id as soon as the provider created it, so a retry after a crash reuses it. Definer: worker-side write.';
revoke execute on function app.integration_sync_progress(uuid,jsonb) from public;

create function app.integration_sync_finish(sync_id uuid, outcome text, external_id text, error text, retry_in_seconds integer)
 returns jsonb
 language plpgsql
 security definer
 set search_path to pg_catalog, public, pg_temp
as $function$
declare
  s app.integration_syncs;
begin
  if outcome not in ('synced', 'failed', 'retry', 'wait') then
    perform app.raise('SB400', format('Unknown sync outcome %s', outcome));
  end if;
  update app.integration_syncs x
     set status = case outcome when 'synced' then 'synced' when 'failed' then 'failed' else 'pending' end,
         external_id = coalesce(integration_sync_finish.external_id, x.external_id),
         last_error = case when outcome = 'synced' then null else left(error, 2000) end,
         next_attempt_at = case when outcome = 'retry' then now() + make_interval(secs => retry_in_seconds) else x.next_attempt_at end,
         -- 'wait': the connection cannot be used (expired); the attempt does not count.
         attempts = case when outcome = 'wait' then greatest(x.attempts - 1, 0) else x.attempts end,
         lease_until = null
   where x.id = integration_sync_finish.sync_id
  returning * into s;
  if s.id is null then return null; end if;
  update app.integrations i
     set last_synced_at = case when outcome = 'synced' then now() else i.last_synced_at end,
         last_error = case when outcome = 'synced' then null when outcome = 'wait' then i.last_error else s.last_error end
   where i.id = s.integration_id and i.location_id = s.location_id;
  if outcome = 'retry' then
    perform app.enqueue('integration_sync', jsonb_build_object('sync_id', s.id, 'integration_id', s.integration_id), s.next_attempt_at, 'integration_sync:' || s.id);
  end if;
  return jsonb_build_object('status', s.status, 'attempts', s.attempts, 'next_attempt_at', app.iso(s.next_attempt_at));
end
$function$;
alter function app.integration_sync_finish(uuid,text,text,text,integer) owner to switchboard_system;
comment on function app.integration_sync_finish(uuid,text,text,text,integer) is E'Worker: records an attempt''s outcome: synced (remote id), failed (the provider''s validation message, not retried), retry (queued again after retry_in_seconds) or wait (connection expired; stays pending until re-authorised). The integration''s last_synced_at and last_error follow. Definer: worker-side write.';
revoke execute on function app.integration_sync_finish(uuid,text,text,text,integer) from public;

create function app.integration_sync_sweep(batch integer)
 returns integer
 language plpgsql
 security definer
 set search_path to pg_catalog, public, pg_temp
as $function$
declare
  n integer := 0;
  s record;
begin
  for s in
    select x.id, x.integration_id from app.integration_syncs x
      join app.integrations i on i.id = x.integration_id and i.location_id = x.location_id and i.status = 'connected'
     where x.status = 'pending' and x.next_attempt_at < now() - interval '30 seconds'
       and (x.lease_until is null or x.lease_until < now())
       and not exists (select 1 from graphile_worker.jobs j where j.key = 'integration_sync:' || x.id and j.locked_at is null)
     order by x.next_attempt_at limit batch
  loop
    perform app.enqueue('integration_sync', jsonb_build_object('sync_id', s.id, 'integration_id', s.integration_id), null, 'integration_sync:' || s.id);
    n := n + 1;
  end loop;
  return n;
end
$function$;
comment on function app.integration_sync_sweep(integer) is E'Worker (cron): queues again pending syncs of connected integrations that are overdue and have no waiting job: a worker died holding one (its lease lapsed), or the connection was re-authorised. Definer, owned by the migrating role: it reads graphile-worker''s jobs.';
revoke execute on function app.integration_sync_sweep(integer) from public;

-- Sync log routes (docs/integrations.md "Sync log").
drop function if exists app.integration_sync_requeue(uuid,uuid);
create function app.integration_sync_requeue(sync_id uuid, integration_id uuid)
 returns void
 language sql
 security definer
 set search_path to pg_catalog, public, pg_temp
as $function$
  select app.enqueue('integration_sync', jsonb_build_object('sync_id', sync_id, 'integration_id', integration_id), null, 'integration_sync:' || sync_id)
$function$;
alter function app.integration_sync_requeue(uuid,uuid) owner to switchboard_system;
comment on function app.integration_sync_requeue(uuid,uuid) is E'Queues a sync''s job (the retry route). Definer: the API role has no right on the queue; only adds a job.';
revoke execute on function app.integration_sync_requeue(uuid,uuid) from public;
grant execute on function app.integration_sync_requeue(uuid,uuid) to switchboard_api;

drop function if exists api.integration_syncs_list(text,text,text,jsonb,jsonb);
drop function if exists api.integration_sync_retry(text,text,text,uuid);
drop function if exists app.integration_sync_json(app.integration_syncs);

create function app.integration_sync_json(s app.integration_syncs)
 returns jsonb
 language sql
 stable parallel safe
as $function$
  select jsonb_build_object('id', s.id, 'record_type', s.record_type, 'record_id', s.record_id, 'action', s.action,
    'status', s.status, 'attempts', s.attempts, 'external_id', s.external_id, 'last_error', s.last_error,
    'next_attempt_at', case when s.status = 'pending' then app.iso(s.next_attempt_at) end,
    'created_at', app.iso(s.created_at), 'updated_at', app.iso(s.updated_at))
$function$;
comment on function app.integration_sync_json(app.integration_syncs) is E'A sync as the API shows it (no remote ids beyond external_id, no lease).';

create function api.integration_syncs_list(token_hash text, location_ref text, provider text, filters jsonb, page jsonb)
 returns jsonb
 language plpgsql
as $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'integrations:read');
  lim int := app.page_limit(page);
  after app.page_cursor := app.page_after(page);
  f_status text := filters ->> 'status';
begin
  return app.page_result(array(
    select app.page_item(s.created_at, s.id, app.integration_sync_json(s)) from app.integration_syncs s
     where s.provider = integration_syncs_list.provider
       and app.before_cursor(s.created_at, s.id, after)
       and (f_status is null or s.status = f_status)
     order by s.created_at desc, s.id desc limit lim + 1), lim);
end
$function$;
comment on function api.integration_syncs_list(text,text,text,jsonb,jsonb) is E'GET integrations/{provider}/syncs: the sync log of the location''s connection to the provider, newest first; filter status.';
revoke execute on function api.integration_syncs_list(text,text,text,jsonb,jsonb) from public;
grant execute on function api.integration_syncs_list(text,text,text,jsonb,jsonb) to switchboard_api;

create function api.integration_sync_retry(token_hash text, location_ref text, provider text, sync_id uuid)
 returns jsonb
 language plpgsql
as $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'integrations:write');
  s app.integration_syncs;
begin
  select * into s from app.integration_syncs x where x.id = sync_id and x.provider = integration_sync_retry.provider;
  if s.id is null then return null; end if;
  if s.status <> 'failed' then
    perform app.raise('SB409', format('Only a failed sync can be retried; this one is %s', s.status), jsonb_build_object('status', s.status));
  end if;
  update app.integration_syncs x
     set status = 'pending', attempts = 0, next_attempt_at = now(), lease_until = null
   where x.id = s.id and x.location_id = s.location_id
  returning * into s;
  perform app.integration_sync_requeue(s.id, s.integration_id);
  return app.integration_sync_json(s);
end
$function$;
comment on function api.integration_sync_retry(text,text,text,uuid) is E'POST integrations/{provider}/syncs/{id}/retry: a failed sync becomes pending again with a fresh retry schedule (SB409 otherwise); it runs when its connection is connected.';
revoke execute on function api.integration_sync_retry(text,text,text,uuid) from public;
grant execute on function api.integration_sync_retry(text,text,text,uuid) to switchboard_api;

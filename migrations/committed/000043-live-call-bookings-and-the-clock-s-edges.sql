--! Previous: sha1:d06380be7f8d04315bda01c7ef91572145c9360a
--! Hash: sha1:06ddc4eab440811c03c582a31b6b8fc4db91fc79
--! Message: live call bookings and the clock's edges

-- Live-call tools and arrival windows: a booking the caller cancelled is not booked, a move or cancel acts on the booking as it is now, windows of a spring-forward day neither vanish nor overlap, a business may close at midnight, a new time zone re-reads upcoming bookings, and the agent books only when booking is enabled (docs/scheduling.md, docs/voice-integration.md §6).

CREATE OR REPLACE FUNCTION app.voice_tool(payload jsonb)
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

  elsif tool in ('book_appointment', 'reschedule_appointment')
        and not coalesce((select a.booking_enabled from app.agent_settings a where a.location_id = l.id), true) then
    -- The contractor turned booking by the agent off (PATCH agent): nothing is booked or moved.
    return jsonb_build_object('ok', false, 'reason', 'booking_disabled',
      'message', 'Booking by phone is turned off for this business. Take the caller''s details and say the office will call back to schedule.');

  elsif tool = 'book_appointment' then
    ws := (args ->> 'window_start')::timestamptz;
    -- Retell retries a failed request up to twice: one call books one window once. Class 7303
    -- keeps these keys apart from the post-call's (7301) and Idempotency-Key's (7302). Only an
    -- active booking answers a retry: one the caller has since cancelled is not "booked", and
    -- booking that window again makes a new one (capacity permitting).
    perform pg_advisory_xact_lock(7303, hashtext(l.id::text || '/' || v_call_id));
    select * into b from app.bookings t
     where t.location_id = l.id and t.platform_call_id = v_call_id and t.window_start = ws
       and t.status in ('scheduled', 'confirmed')
     order by t.created_at limit 1;
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
    -- The row lock first, then the caller's active bookings read after it: a contractor's change
    -- that committed meanwhile (cancelled, completed) is seen, not overwritten.
    perform 1 from app.bookings t where t.location_id = l.id and t.id = app.uuid_or_null(args ->> 'booking_id') for update;
    select x.* into b from app.voice_caller_bookings(l.id, caller) x where x.id = app.uuid_or_null(args ->> 'booking_id');
    if b.id is null then
      return jsonb_build_object('ok', false, 'message', 'I could not find that appointment for this phone number.');
    end if;
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

CREATE OR REPLACE FUNCTION app.voice_finalize_effects(c app.calls, fired boolean)
 RETURNS void
 LANGUAGE plpgsql
 SET plan_cache_mode TO 'force_generic_plan'
AS $function$
declare
  voicemail boolean := coalesce(c.in_voicemail, false) or c.disconnection_reason = 'voicemail_reached';
  l app.leads;
  tz text := (select t.timezone from app.locations t where t.id = c.location_id);
  -- Bookings the agent made during the call: any of them stands for the call's appointment (the
  -- analysis's date does not make another), but only one still active makes the lead "booked".
  tool_any boolean := exists (select 1 from app.bookings b where b.location_id = c.location_id and b.platform_call_id = c.platform_call_id);
  tool_booked boolean := exists (select 1 from app.bookings b where b.location_id = c.location_id and b.platform_call_id = c.platform_call_id
                                    and b.status in ('scheduled', 'confirmed'));
  ws timestamptz;
  we timestamptz;
begin
  if c.outcome in ('lead', 'booked', 'transferred') or (voicemail and c.outcome <> 'spam') or tool_booked then
    insert into app.leads (location_id, call_id, customer_id, name, phone, email, address, service_type,
                           urgency_level, estimated_value, status, notes)
    values (c.location_id, c.id, c.customer_id, c.caller_name, c.caller_phone,
            case when c.caller_email ~ '^[^@\s]+@[^@\s]+\.[^@\s]+$' and length(c.caller_email) <= 320 then c.caller_email end,
            c.caller_address, c.service_type, c.urgency_level, c.estimated_value,
            case when tool_booked or (c.outcome = 'booked' and not tool_any) then 'booked' else 'new' end, c.issue_summary)
    returning * into l;
  end if;

  if tool_any then
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

CREATE OR REPLACE FUNCTION app.scheduling_windows(loc uuid, from_date date, days integer, at timestamp with time zone DEFAULT now())
 RETURNS TABLE(window_start timestamp with time zone, window_end timestamp with time zone, remaining integer)
 LANGUAGE sql
 STABLE
AS $function$
  -- Windows are cut in local wall-clock time, then placed on the time line in the location's
  -- zone: across a DST change an 8-10 window stays 8-10 on the clock. On a spring-forward day a
  -- wall time in the missing hour lands an hour later, so a cut can end where it starts, before it
  -- starts, or overlap the one before it: those are left out (each window then starts after the
  -- last one kept ended, and one capacity counter per start stays one window's).
  select x.ws, x.we, x.capacity - coalesce(bw.booked, 0)
    from (select w.ws, w.we, s.capacity, s.lead_time_minutes, s.horizon_days,
                 max(w.we) over (partition by g.d, h.open order by k rows between unbounded preceding and 1 preceding) as before_end
            from app.scheduling_settings_of(loc) s
            cross join (select l.timezone from app.locations l where l.id = loc) l
            cross join lateral generate_series(from_date::timestamp, (from_date + least(greatest(days, 0), 400) - 1)::timestamp, interval '1 day') g (d)
            join app.business_hours h on h.location_id = loc and h.day = extract(dow from g.d)
            cross join lateral generate_series(0, (extract(epoch from h.close::time - h.open::time) / 60)::int / s.window_minutes - 1) k
            -- offset 0: each window's instants are computed once, not at every place the plan uses them.
            cross join lateral (select (g.d::date + h.open::time + make_interval(mins => k * s.window_minutes)) at time zone l.timezone as ws,
                                       (g.d::date + h.open::time + make_interval(mins => (k + 1) * s.window_minutes)) at time zone l.timezone as we
                                offset 0) w
           where g.d::date <> all (s.closed_dates)) x
    left join app.booking_windows bw on bw.location_id = loc and bw.window_start = x.ws
   where x.we > x.ws and x.ws >= coalesce(x.before_end, x.ws)
     and x.ws >= at + make_interval(mins => x.lead_time_minutes)
     and x.ws <= at + make_interval(days => x.horizon_days)
   order by x.ws
$function$;
comment on function app.scheduling_windows(uuid,date,integer,timestamp with time zone) is E'Bookable windows of the days from from_date (location time), oldest first, with the room left in each (0 or less: full): cut from business hours by window_minutes, without closed dates, windows inside the lead time or past the horizon as seen at `at` (now), or cuts a spring-forward gap leaves empty or overlapping.';

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
      'booking_enabled', coalesce(s.booking_enabled, true)::text,
      'caller_name', coalesce(cust.name, ''),
      'is_returning_customer', (cust.id is not null)::text),
    'metadata', jsonb_build_object('location_id', l.id)));
end
$function$;
alter function app.voice_inbound(jsonb) owner to switchboard_system;
comment on function app.voice_inbound(jsonb) is E'Pre-call webhook: routes by to_number (SB404 when unknown), answers the agent''s dynamic variables (with the next open window, the caller''s upcoming appointment and whom to transfer to), whether the agent may book, or rejects a blocklisted caller (records a spam call, fires spam.blocked and call.ended).';
revoke execute on function app.voice_inbound(jsonb) from public;


-- One call books one window once is kept by app.voice_tool (its advisory lock and look-up, active
-- bookings only); as a unique index it also refused booking a window again after a cancellation
-- and moving a booking into a window the same call had booked (a 409 for a move with room).
drop index if exists app.bookings_tool_call_key;
create index if not exists bookings_tool_call_idx on app.bookings (location_id, platform_call_id, window_start) where platform_call_id is not null;

-- A business open until midnight closes at 24:00: 23:59 lost the day's last window (a remainder
-- shorter than a window is not one). Only closing times may be 24:00.
do $$ begin
  if not exists (select 1 from pg_type t join pg_namespace n on n.oid = t.typnamespace where n.nspname = 'app' and t.typname = 'hhmm_close') then
    create domain app.hhmm_close as text constraint hhmm_close_check check (value ~ '^(([01][0-9]|2[0-3]):[0-5][0-9]|24:00)$');
  end if;
end $$;
comment on domain app.hhmm_close is E'A closing wall-clock time HH:MM (24 h), or 24:00 for midnight at the end of the day, in the location''s timezone.';
alter table app.business_hours alter column close type app.hhmm_close;

-- A new time zone: upcoming active bookings' scheduled_date and scheduled_time are re-read from
-- their window's start in it (app.tg_bookings__window), each a booking.updated. Past and closed
-- bookings keep the date and time they were held at.
create or replace function app.tg_locations__bookings_timezone() returns trigger
language plpgsql security definer set search_path = pg_catalog, public, pg_temp as $fn$
begin
  update app.bookings b set window_start = b.window_start
   where b.location_id = new.id and b.window_start is not null
     and b.status in ('scheduled', 'confirmed') and b.window_end > now();
  return null;
end
$fn$;
comment on function app.tg_locations__bookings_timezone() is E'A location''s new time zone re-reads its upcoming active bookings'' scheduled_date and scheduled_time from their windows (booking.updated for each that changes). SECURITY DEFINER (switchboard_system): whoever changes the zone (the API, a staff admin), the bookings follow.';
alter function app.tg_locations__bookings_timezone() owner to switchboard_system;
revoke execute on function app.tg_locations__bookings_timezone() from public;
drop trigger if exists _400_bookings_timezone on app.locations;
create trigger _400_bookings_timezone after update of timezone on app.locations for each row
  when (old.timezone is distinct from new.timezone) execute function app.tg_locations__bookings_timezone();

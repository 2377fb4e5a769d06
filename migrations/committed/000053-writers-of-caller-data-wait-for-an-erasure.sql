--! Previous: sha1:7e60604b1d63ec9cefcbb27269744230cb4c7031
--! Hash: sha1:24a82016bff6834cbe5e4f0b2c2c20206477a64f
--! Message: writers of caller data wait for an erasure

-- An erasure and the writers of caller data, one after the other per location: the writers take
-- the erasure's advisory lock (7303, the location) shared, before any row lock (docs/privacy.md).

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
  -- The row our inbound answer made for a blocklisted call, and only such a row: one still waiting
  -- for its platform call id, or the one this call already settled into. Metadata is echoed back
  -- by the platform and could name any row of any location.
  if meta ->> 'call_row_id' ~ uuid_re then
    select id, location_id into row_id, loc from app.calls
     where id = (meta ->> 'call_row_id')::uuid
       and (platform_call_id like 'rejected:%' or platform_call_id = pc ->> 'call_id');
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
  -- Writers of caller data take the erasure's per-location lock (class 7303) shared, before any row
  -- lock: an erasure waits for those in flight and then matches what they wrote; those that come
  -- after it wait for it (docs/privacy.md, "Erasure").
  perform pg_advisory_xact_lock_shared(7303, hashtext(loc::text));
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
  -- Writers of caller data take the erasure's per-location lock (class 7303) shared, before any row
  -- lock: an erasure waits for those in flight and then matches what they wrote; those that come
  -- after it wait for it (docs/privacy.md, "Erasure").
  perform pg_advisory_xact_lock_shared(7303, hashtext(l.id::text));
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
  -- Writers of caller data take the erasure's per-location lock (class 7303) shared, before any row
  -- lock: an erasure waits for those in flight and then matches what they wrote; those that come
  -- after it wait for it (docs/privacy.md, "Erasure").
  perform pg_advisory_xact_lock_shared(7303, hashtext(l.id::text));
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

CREATE OR REPLACE FUNCTION app.voice_finalize_overdue(call_id uuid)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
declare
  c app.calls;
  loc uuid;
begin
  select location_id into loc from app.calls where id = call_id;
  if not found then return jsonb_build_object('finalized', false, 'reason', 'missing'); end if;
  -- Writers of caller data take the erasure's per-location lock (class 7303) shared, before any row
  -- lock: an erasure waits for those in flight and then matches what they wrote; those that come
  -- after it wait for it (docs/privacy.md, "Erasure").
  perform pg_advisory_xact_lock_shared(7303, hashtext(loc::text));
  select * into c from app.calls where id = call_id for update;
  if not found then return jsonb_build_object('finalized', false, 'reason', 'missing'); end if;
  perform set_config('app.location_id', c.location_id::text, true);
  if c.finalized_at is not null then return jsonb_build_object('finalized', false, 'reason', 'already_final'); end if;
  c := app.voice_finalize(c, '{}');
  return jsonb_build_object('finalized', true, 'outcome', c.outcome);
end
$function$;
alter function app.voice_finalize_overdue(uuid) owner to switchboard_system;
comment on function app.voice_finalize_overdue(uuid) is E'Task finalize_call: settles a call whose call_analyzed never came (outcome from disconnection_reason). SECURITY DEFINER (switchboard_system) because the worker knows only the call id, not its tenant. No-op when already final.';
revoke execute on function app.voice_finalize_overdue(uuid) from public;

CREATE OR REPLACE FUNCTION api.lead_create(token_hash text, location_ref text, body jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'leads:write');
  l app.leads;
begin
  -- Writers of caller data take the erasure's per-location lock (class 7303) shared, before any row
  -- lock: an erasure waits for those in flight and then matches what they wrote; those that come
  -- after it wait for it (docs/privacy.md, "Erasure").
  perform pg_advisory_xact_lock_shared(7303, hashtext(a.location_id::text));
  perform app.check_member((body ->> 'assigned_to')::uuid);
  insert into app.leads (location_id, name, phone, email, address, service_type, urgency_level,
                         estimated_value, notes, assigned_to, status)
  select a.location_id, p.name, p.phone, p.email, p.address, p.service_type,
         coalesce(p.urgency_level, 0), p.estimated_value, p.notes, p.assigned_to, coalesce(p.status, 'new')
    from jsonb_populate_record(null::app.leads, body) p
  returning * into l;
  return app.lead_json(l);
end
$function$;
comment on function api.lead_create(text,text,jsonb) is E'POST leads: a lead without a call (call_id null); fires lead.created.';
grant execute on function api.lead_create(text,text,jsonb) to switchboard_api;

CREATE OR REPLACE FUNCTION api.booking_create(token_hash text, location_ref text, body jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'bookings:write');
begin
  -- Writers of caller data take the erasure's per-location lock (class 7303) shared, before any row
  -- lock: an erasure waits for those in flight and then matches what they wrote; those that come
  -- after it wait for it (docs/privacy.md, "Erasure").
  perform pg_advisory_xact_lock_shared(7303, hashtext(a.location_id::text));
  return app.booking_json(app.booking_place(a.location_id, body, 'api', null));
end
$function$;
comment on function api.booking_create(text,text,jsonb) is E'POST bookings: books a window (409 slot_unavailable with the next three open windows when it cannot); fires booking.created.';
grant execute on function api.booking_create(text,text,jsonb) to switchboard_api;

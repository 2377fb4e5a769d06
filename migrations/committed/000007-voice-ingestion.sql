--! Previous: sha1:195f5859feb906cdd9bfe929a364fe621b121b70
--! Hash: sha1:8dad48edd97d1a435f9a3de50c5725d1332c095a
--! Message: voice ingestion

-- Voice platform ingestion (docs/voice-integration.md): inbound routing by service phone, post-call
-- webhooks, finalisation of a call into customer, lead, booking and events.

create function app.voice_ms(ms jsonb)
 RETURNS timestamp with time zone
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$ select case when jsonb_typeof(ms) = 'number' then to_timestamp((ms #>> '{}')::double precision / 1000) end $function$;
comment on function app.voice_ms(jsonb) is E'A platform timestamp in Unix milliseconds (JSON number) as timestamptz; null otherwise.';

create function app.voice_e164(phone text)
 RETURNS app.e164
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$ select case when phone ~ '^\+[1-9][0-9]{6,14}$' then phone::app.e164 end $function$;
comment on function app.voice_e164(text) is E'The phone if it is E.164, else null (anonymous callers, web calls).';

create function app.voice_status_rank(status text)
 RETURNS integer
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$ select case status when 'started' then 1 when 'ended' then 2 when 'analyzed' then 3 when 'rejected' then 9 else 0 end $function$;
comment on function app.voice_status_rank(text) is E'Order of platform_status values: a call only moves forward (rejected is terminal).';

create function app.voice_hours_text(loc uuid)
 RETURNS text
 LANGUAGE sql
 STABLE
AS $function$
  select string_agg(d.label || ': ' || coalesce(
           (select string_agg(h.open || '-' || h.close, ', ' order by h.open)
              from app.business_hours h where h.location_id = loc and h.day = d.day), 'closed'),
         '; ' order by d.ord)
    from (values (1, 'Mon', 1), (2, 'Tue', 2), (3, 'Wed', 3), (4, 'Thu', 4), (5, 'Fri', 5),
                 (6, 'Sat', 6), (0, 'Sun', 7)) d (day, label, ord)
$function$;
comment on function app.voice_hours_text(uuid) is E'Business hours as one line for the agent, e.g. "Mon: 08:00-17:00; ...; Sun: closed" (location time).';

create function app.voice_is_open(loc uuid, tz text, instant timestamp with time zone DEFAULT now())
 RETURNS boolean
 LANGUAGE sql
 STABLE
AS $function$
  select exists (
    select 1 from app.business_hours h
     where h.location_id = loc
       and h.day = extract(dow from instant at time zone tz)
       and to_char(instant at time zone tz, 'HH24:MI') >= h.open
       and to_char(instant at time zone tz, 'HH24:MI') < h.close)
$function$;
comment on function app.voice_is_open(uuid,text,timestamp with time zone) is E'Whether the location is inside one of its opening intervals at the given instant (its own timezone).';

create function app.voice_inbound(payload jsonb)
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
      'transfer_number', coalesce(s.transfer_number, ''),
      'emergency_keywords', array_to_string(s.emergency_keywords, ', '),
      'caller_name', coalesce(cust.name, ''),
      'is_returning_customer', (cust.id is not null)::text),
    'metadata', jsonb_build_object('location_id', l.id)));
end
$function$;
alter function app.voice_inbound(jsonb) owner to switchboard_system;
comment on function app.voice_inbound(jsonb) is E'Pre-call webhook: routes by to_number (SB404 when unknown), answers the agent''s dynamic variables, or rejects a blocklisted caller (records a spam call, fires spam.blocked and call.ended).';

create function app.voice_finalize(c app.calls, analysis jsonb)
 RETURNS app.calls
 LANGUAGE plpgsql
AS $function$
declare
  s app.calls := app.voice_settle(c, analysis);
begin
  update app.calls set
    outcome = s.outcome,
    urgency_level = s.urgency_level,
    is_emergency = s.is_emergency,
    emergency_fired_at = s.emergency_fired_at,
    customer_id = s.customer_id,
    is_returning_customer = s.is_returning_customer,
    caller_name = s.caller_name,
    caller_address = s.caller_address,
    caller_email = s.caller_email,
    service_type = s.service_type,
    issue_summary = s.issue_summary,
    detected_intent = s.detected_intent,
    estimated_value = s.estimated_value,
    appointment_date = s.appointment_date,
    appointment_time = s.appointment_time,
    finalized_at = s.finalized_at
  where id = c.id
  returning * into s;
  perform app.voice_finalize_effects(s, c.emergency_fired_at is null and s.emergency_fired_at is not null);
  return s;
end
$function$;
comment on function app.voice_finalize(app.calls,jsonb) is E'Settles a stored call once (app.voice_settle), writes it, and creates what settling creates (app.voice_finalize_effects: lead, booking, call.emergency once, call.ended). Caller holds the row lock (and removes a queued finalize_call job, see app.voice_post_call).';

create function app.voice_finalize_overdue(call_id uuid)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
declare
  c app.calls;
begin
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

create function app.voice_post_call(payload jsonb, defer_wakeups boolean DEFAULT false)
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
alter function app.voice_post_call(jsonb,boolean) owner to switchboard_system;
comment on function app.voice_post_call(jsonb,boolean) is E'Post-call webhook (call_started | call_ended | call_analyzed | transfer_started): routes by the dialled number first (then metadata call_row_id / location_id), serialises deliveries of one platform call id (transaction advisory lock), inserts a new call with its facts (settled at once when this delivery carries the analysis) or updates a known one idempotently on the platform call_id, fires call.emergency on a warm transfer, finalises on analysis (removing a queued finalize_call job) or schedules finalize_call 10 minutes after call_ended. With defer_wakeups the transaction sends no NOTIFY: its jobs wait in app_private.deferred_jobs until the caller runs app.flush_deferred_jobs() after the commit.';

create function app.voice_settle(c app.calls, analysis jsonb)
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
    returning t.id, (t.xmax = 0), t.name into v_customer_id, inserted, known_name;
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

create function app.voice_finalize_effects(c app.calls, fired boolean)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
declare
  voicemail boolean := coalesce(c.in_voicemail, false) or c.disconnection_reason = 'voicemail_reached';
  l app.leads;
begin
  if c.outcome in ('lead', 'booked', 'transferred') or (voicemail and c.outcome <> 'spam') then
    insert into app.leads (location_id, call_id, customer_id, name, phone, email, address, service_type,
                           urgency_level, estimated_value, status, notes)
    values (c.location_id, c.id, c.customer_id, c.caller_name, c.caller_phone,
            case when c.caller_email ~ '^[^@\s]+@[^@\s]+\.[^@\s]+$' and length(c.caller_email) <= 320 then c.caller_email end,
            c.caller_address, c.service_type, c.urgency_level, c.estimated_value,
            case when c.outcome = 'booked' then 'booked' else 'new' end, c.issue_summary)
    returning * into l;
  end if;

  if c.outcome = 'booked' and c.appointment_date is not null then
    insert into app.bookings (location_id, call_id, lead_id, customer_id, status, scheduled_date,
                              scheduled_time, service_type, address, notes)
    values (c.location_id, c.id, l.id, c.customer_id, 'scheduled', c.appointment_date,
            c.appointment_time, c.service_type, c.caller_address, c.issue_summary);
  end if;

  if fired then
    perform app.emit(c.location_id, 'call.emergency', app.call_summary_json(c) || jsonb_build_object(
      'reason', case when c.outcome = 'transferred' and c.urgency_level < 5 then 'warm_transfer' else 'urgency' end,
      'lead_id', l.id));
  end if;

  perform app.emit(c.location_id, 'call.ended', app.call_summary_json(c));
end
$function$;
comment on function app.voice_finalize_effects(app.calls,boolean) is E'What settling a call creates: its lead (lead, booked, transferred, or voicemail not spam), its booking (booked with a date), call.emergency when this settlement fired it, and call.ended.';

-- Grants: the one place for this concern's privileges (tenant tables get theirs from
-- app.secure_tenant_table above; only departures from it are here).
revoke execute on function app.voice_inbound(jsonb) from public;
revoke execute on function app.voice_finalize(app.calls,jsonb) from public;
grant execute on function app.voice_finalize(app.calls,jsonb) to switchboard_system;
revoke execute on function app.voice_finalize_overdue(uuid) from public;
revoke execute on function app.voice_post_call(jsonb,boolean) from public;
revoke execute on function app.voice_settle(app.calls,jsonb) from public;
grant execute on function app.voice_settle(app.calls,jsonb) to switchboard_system;
revoke execute on function app.voice_finalize_effects(app.calls,boolean) from public;
grant execute on function app.voice_finalize_effects(app.calls,boolean) to switchboard_system;

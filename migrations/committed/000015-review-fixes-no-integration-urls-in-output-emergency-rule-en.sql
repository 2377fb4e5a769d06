--! Previous: sha1:dab90ec1eb0d601c1b6e04e9ec3e0bea0f1b7a1b
--! Hash: sha1:7e6aac95ea13a450bc537435328baa2e4a370280
--! Message: review fixes: no integration URLs in output, emergency rule, enqueue narrowed, insights after-hours

-- Review fixes: integration secrets, emergency event rule, operator-only service_phone, narrow
-- job queueing, insights after-hours count, integration disconnect, post-call routing.

-- ---------------------------------------------------------------------------------------------
-- 1. An integration's webhook_url is a credential (a Slack incoming-webhook URL lets anyone post
-- to the channel), so the API never shows it back; label identifies the integration instead.
create or replace function app.integration_json(i app.integrations) returns jsonb
  language sql stable parallel safe
as $$
  select jsonb_build_object(
    'id', i.id, 'location_id', i.location_id, 'provider', i.provider, 'status', i.status,
    'label', i.label, 'external_id', i.external_id,
    'expires_at', app.iso(i.expires_at), 'config', i.config,
    'connected_at', app.iso(i.connected_at), 'disconnected_at', app.iso(i.disconnected_at),
    'last_synced_at', app.iso(i.last_synced_at), 'last_error', i.last_error,
    'created_at', app.iso(i.created_at), 'updated_at', app.iso(i.updated_at))
$$;
comment on function app.integration_json(app.integrations) is
  E'Integration as the API shows it: never access or refresh tokens, never webhook_url (a secret for Slack).';

-- ---------------------------------------------------------------------------------------------
-- 2. call.emergency fires only for urgency 5 or a warm transfer (spec Events table, DESIGN §6).
-- custom_analysis_data.is_emergency alone still marks the call (calls.is_emergency, counted by
-- insights) but raises no alert.
create or replace function app.voice_finalize(c app.calls, analysis jsonb) returns app.calls
  language plpgsql volatile
as $$
declare
  cad jsonb := coalesce(analysis -> 'custom_analysis_data', '{}');
  v_outcome text := cad ->> 'outcome';
  urgency int := least(greatest(coalesce((cad ->> 'urgency_level')::int, 0), 0), 5);
  voicemail boolean := coalesce(c.in_voicemail, false) or c.disconnection_reason = 'voicemail_reached';
  captured boolean := cad ?| array['caller_name', 'caller_address', 'caller_email', 'service_type',
                                   'issue_summary', 'appointment_date'];
  alert boolean;
  emergency boolean;
  v_customer_id uuid;
  inserted boolean;
  known_name text;
  l app.leads;
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

  update app.calls set
    outcome = v_outcome,
    urgency_level = urgency,
    is_emergency = emergency or calls.emergency_fired_at is not null,
    customer_id = v_customer_id,
    is_returning_customer = coalesce(not inserted, false),
    caller_name = coalesce(left(cad ->> 'caller_name', 200), known_name),
    caller_address = left(cad ->> 'caller_address', 500),
    caller_email = cad ->> 'caller_email',
    service_type = left(cad ->> 'service_type', 200),
    issue_summary = left(cad ->> 'issue_summary', 10000),
    detected_intent = left(cad ->> 'detected_intent', 200),
    estimated_value = (cad ->> 'estimated_value')::numeric,
    appointment_date = (cad ->> 'appointment_date')::date,
    appointment_time = case when cad ->> 'appointment_time' ~ '^([01][0-9]|2[0-3]):[0-5][0-9]$' then cad ->> 'appointment_time' end,
    finalized_at = now()
  where id = c.id
  returning * into c;

  if v_outcome in ('lead', 'booked', 'transferred') or (voicemail and v_outcome <> 'spam') then
    insert into app.leads (location_id, call_id, customer_id, name, phone, email, address, service_type,
                           urgency_level, estimated_value, status, notes)
    values (c.location_id, c.id, c.customer_id, c.caller_name, c.caller_phone,
            case when c.caller_email ~ '^[^@\s]+@[^@\s]+\.[^@\s]+$' and length(c.caller_email) <= 320 then c.caller_email end,
            c.caller_address, c.service_type, c.urgency_level, c.estimated_value,
            case when v_outcome = 'booked' then 'booked' else 'new' end, c.issue_summary)
    returning * into l;
  end if;

  if v_outcome = 'booked' and c.appointment_date is not null then
    insert into app.bookings (location_id, call_id, lead_id, customer_id, status, scheduled_date,
                              scheduled_time, service_type, address, notes)
    values (c.location_id, c.id, l.id, c.customer_id, 'scheduled', c.appointment_date,
            c.appointment_time, c.service_type, c.caller_address, c.issue_summary);
  end if;

  if alert and c.emergency_fired_at is null then
    update app.calls set emergency_fired_at = now() where id = c.id returning * into c;
    perform app.emit(c.location_id, 'call.emergency', app.call_summary_json(c) || jsonb_build_object(
      'reason', case when v_outcome = 'transferred' and urgency < 5 then 'warm_transfer' else 'urgency' end,
      'lead_id', l.id));
  end if;

  perform app.emit(c.location_id, 'call.ended', app.call_summary_json(c));
  return c;
end
$$;
comment on function app.voice_finalize(app.calls, jsonb) is
  E'Settles a call once (outcome from custom_analysis_data, else from disconnection_reason), upserts the customer, creates lead/booking, fires call.emergency (once, only for urgency 5 or a transfer; the analysis is_emergency flag only marks the row) and call.ended. Caller holds the row lock.';

-- ---------------------------------------------------------------------------------------------
-- 8. Post-call routing: the dialled number is the platform's own fact, metadata is only echoed
-- back from our inbound answer. When the number names a location it wins over
-- metadata.location_id, and metadata.call_row_id is attached only if that row belongs to it.
create or replace function app.voice_post_call(payload jsonb) returns jsonb
  language plpgsql volatile security definer
  set search_path to pg_catalog, public, pg_temp
as $$
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
begin
  if ev not in ('call_started', 'call_ended', 'call_analyzed', 'transfer_started') then
    return jsonb_build_object('status', 'ignored');
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

  if row_id is not null then
    select * into c from app.calls where id = row_id for update;
  else
    insert into app.calls (location_id, platform_call_id) values (loc, pc ->> 'call_id')
    on conflict (location_id, platform_call_id) do nothing;
    select * into c from app.calls where location_id = loc and platform_call_id = pc ->> 'call_id' for update;
  end if;
  prev_status := c.platform_status;

  -- Platform facts: newer values win, absent ones keep what we have. Nothing is written when a
  -- replay brings nothing new, so replays change nothing (not even updated_at).
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

  if c.finalized_at is null then
    if ev = 'transfer_started' and c.emergency_fired_at is null then
      update app.calls set is_emergency = true, emergency_fired_at = now() where id = c.id returning * into c;
      perform app.emit(loc, 'call.emergency', app.call_summary_json(c)
        || jsonb_build_object('reason', 'warm_transfer', 'lead_id', null));
    elsif ev = 'call_analyzed' or (ev = 'call_ended' and analysis is not null) then
      c := app.voice_finalize(c, coalesce(analysis, '{}'));
    elsif ev = 'call_ended' and app.voice_status_rank(prev_status) < app.voice_status_rank('ended') then
      -- If call_analyzed never comes, settle the call from its disconnection reason later.
      perform app.enqueue('finalize_call', jsonb_build_object('call_id', c.id),
                          now() + interval '10 minutes', 'finalize_call:' || c.id, 5);
    end if;
  end if;

  return jsonb_build_object('call_id', c.id, 'platform_call_id', c.platform_call_id,
    'platform_status', c.platform_status, 'outcome', c.outcome, 'finalized', c.finalized_at is not null);
end
$$;
comment on function app.voice_post_call(jsonb) is
  E'Post-call webhook (call_started | call_ended | call_analyzed | transfer_started): routes by the dialled number first (then metadata call_row_id / location_id), upserts the call idempotently on the platform call_id, fires call.emergency on a warm transfer, finalises on analysis or schedules finalize_call 10 minutes after call_ended.';

-- ---------------------------------------------------------------------------------------------
-- 3. service_phone routes the platform's calls to a location, so only an operator (CLI / staff)
-- sets it; a token with locations:write cannot (the API schema refuses the field too).
create or replace function api.location_patch(token_hash text, location_ref text, patch jsonb) returns jsonb
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'locations:write');
  l app.locations;
begin
  update app.locations t
     set (slug, name, legal_name, license_number, industry, website_url, timezone, owner_cell,
          service_areas, zip_codes, travel_radius_miles)
       = (select p.slug, p.name, p.legal_name, p.license_number, p.industry, p.website_url,
                 p.timezone, p.owner_cell, p.service_areas, p.zip_codes, p.travel_radius_miles
            from jsonb_populate_record(t, patch) p)
   where t.id = a.location_id
  returning * into l;
  return app.location_json(l);
end
$$;
comment on function api.location_patch(text, text, jsonb) is
  E'PATCH /locations/{id}: fields present in the body replace the stored ones (validated by the API first); service_phone is operator-only and never changed here.';

-- ---------------------------------------------------------------------------------------------
-- 4. Job queueing. app.enqueue (any task, payload, key, time) is no longer callable by the API or
-- staff roles; only SECURITY DEFINER code owned by switchboard_system (event fan-out and notify
-- triggers, voice ingestion, webhook worker functions) and the owner reach it. The API
-- functions that re-queue webhook attempts (resume, retry) go through app.webhook_enqueue, now a
-- narrow definer wrapper: one fixed task, payload and job key derived from an existing pending
-- delivery row of the caller's tenant.
revoke execute on function app.enqueue(text, jsonb, timestamptz, text, int) from public, switchboard_api, switchboard_staff;

/*
 * SECURITY DEFINER (owned by switchboard_system) so that API transactions can queue a webhook
 * attempt without EXECUTE on app.enqueue. It queues nothing the caller chooses freely: the
 * delivery must exist, be pending, belong to location_id and, when a tenant is set
 * (app.current_location_id(), always so for the API role), to that tenant; otherwise it does
 * nothing (a job for such a row would find nothing to send anyway).
 */
create or replace function app.webhook_enqueue(delivery_id uuid, location_id uuid, due timestamptz) returns void
  language plpgsql volatile security definer
  set search_path to pg_catalog, public, pg_temp
as $$
declare
  d app.webhook_deliveries;
begin
  select * into d from app.webhook_deliveries w
   where w.id = webhook_enqueue.delivery_id and w.location_id = webhook_enqueue.location_id
     and w.status = 'pending'
     and w.location_id = coalesce(app.current_location_id(), w.location_id);
  if not found then return; end if;
  perform app.enqueue('deliver_webhook',
    jsonb_build_object('delivery_id', d.id, 'location_id', d.location_id),
    greatest(due, now()), 'delivery:' || d.id);
end
$$;
alter function app.webhook_enqueue(uuid, uuid, timestamptz) owner to switchboard_system;
revoke execute on function app.webhook_enqueue(uuid, uuid, timestamptz) from public;
grant execute on function app.webhook_enqueue(uuid, uuid, timestamptz) to switchboard_api;
comment on function app.webhook_enqueue(uuid, uuid, timestamptz) is
  E'Queues the deliver_webhook job of one pending attempt of the caller''s tenant, due at `due` (or now); no-op for any other row. SECURITY DEFINER (switchboard_system): the only way API transactions add jobs.';

-- ---------------------------------------------------------------------------------------------
-- 6. DELETE integrations/{provider} disconnects the one connected row (at most one by the
-- partial unique index); rows in error/expired are history, and 404 when nothing is connected.
create or replace function api.integration_delete(token_hash text, location_ref text, provider text) returns jsonb
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'integrations:write');
  i app.integrations;
begin
  update app.integrations t
     set status = 'disconnected', disconnected_at = now(), access_token = null, refresh_token = null
   where t.location_id = a.location_id and t.provider = integration_delete.provider and t.status = 'connected'
  returning * into i;
  if i.id is null then return null; end if;
  return app.integration_json(i);
end
$$;
comment on function api.integration_delete(text, text, text) is
  E'DELETE integrations/{provider}: marks the connected one disconnected (and drops its tokens); 404 when none is connected.';

-- ---------------------------------------------------------------------------------------------
-- 5. Insights: after_hours_calls counts every inbound call of the window started outside
-- business hours, spam included (DESIGN §10 limits only the other metrics to non-spam).
create or replace function api.insights(token_hash text, location_ref text, days int) returns jsonb
  language plpgsql volatile
  -- The planner expects every call to be its own group (it cannot know that a few thousand
  -- (day, hour, class) groups absorb them) and would sort 250k rows; a hash aggregate in memory
  -- is what fits.
  set work_mem to '32MB'
  set enable_sort to off
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'insights:read');
  tz text;
  today date;
  first_day date;
  w_start timestamptz;
  w_end timestamptz;
  open_minutes int4multirange;
  seg record;
  o0 int;
  o1 int;
  b1 bigint;
  b2 bigint;
  result jsonb;
begin
  if days is null or days not between 1 and 90 then
    perform app.raise('SB400', 'days must be an integer from 1 to 90',
      jsonb_build_object('issues', jsonb_build_array(jsonb_build_object('path', 'days', 'message', 'Must be from 1 to 90'))));
  end if;
  select l.timezone into tz from app.locations l where l.id = a.location_id;
  today := (now() at time zone tz)::date;
  first_day := today - (days - 1);
  w_start := first_day::timestamp at time zone tz;
  w_end := (today + 1)::timestamp at time zone tz;
  open_minutes := app_private.open_minutes(a.location_id);
  seg := app.offset_segments(w_start, w_end, tz);
  -- Scalars for the usual case (at most one offset change in the window); the array is the fallback.
  o0 := seg.offsets[1];
  o1 := coalesce(seg.offsets[2], o0);
  b1 := seg.bounds[1];
  b2 := coalesce(seg.bounds[2], 9223372036854775807);

  with raw as (
    -- lm = local minutes since 1970-01-01 00:00 local
    select c.started_minute + case when c.started_minute < b1 then o0
                                   when c.started_minute < b2 then o1
                                   else seg.offsets[width_bucket(c.started_minute, seg.bounds) + 1] end as lm,
           c.outcome, c.is_emergency, c.service_type, c.estimated_value
      from app.calls c
     where c.location_id = a.location_id and c.direction = 'inbound'
       and c.started_at >= w_start and c.started_at < w_end
  ), g as materialized (
    -- The only scan of calls, folded into (local day, local hour, class) groups: a few thousand rows at most.
    select (lm / 1440)::int as dn,                       -- local day number (0 = 1970-01-01, a Thursday)
           ((lm % 1440) / 60)::int as hour,
           not open_minutes @> ((((lm / 1440) + 4) % 7) * 1440 + lm % 1440)::int as after_hours,
           outcome = 'spam' as spam,
           outcome in ('spam', 'dropped') as unanswered,
           is_emergency,
           service_type,
           count(*) as n,
           coalesce(sum(estimated_value) filter (where outcome = 'booked'), 0) as revenue
      from raw
     group by 1, 2, 3, 4, 5, 6, 7
  ), tot as (
    select coalesce(sum(n) filter (where not spam), 0) as non_spam,
           coalesce(sum(n) filter (where not unanswered), 0) as answered,
           coalesce(sum(n) filter (where spam), 0) as spam,
           coalesce(sum(n) filter (where is_emergency), 0) as emergencies,
           coalesce(sum(n) filter (where after_hours), 0) as after_hours,               -- spam included
           coalesce(sum(revenue), 0) as revenue
      from g
  ), per_day as (
    select date '1970-01-01' + dn as d, sum(n) filter (where not spam) as calls, sum(revenue) as revenue from g group by dn
  ), hours as (
    select h.hour, coalesce(sum(g.n), 0) as n
      from generate_series(0, 23) h(hour)
      left join g on not g.spam and g.hour = h.hour
     group by h.hour
  ), hour_shares as (
    -- Shares rounded to 4 decimals by largest remainder, so that they sum to exactly 1.
    select hour, floor(n * 10000.0 / nullif(t.non_spam, 0)) as base,
           n * 10000.0 / nullif(t.non_spam, 0) - floor(n * 10000.0 / nullif(t.non_spam, 0)) as rem
      from hours, tot t
  ), hour_final as (
    select hour, coalesce(base, 0) + case when row_number() over (order by rem desc nulls last, hour)
                                              <= 10000 - coalesce(sum(base) over (), 10000) then 1 else 0 end as units
      from hour_shares
  ), svc as (
    select service_type, sum(n) as n from g
     where not spam and service_type is not null
     group by service_type
  )
  select jsonb_build_object(
    'days', days,
    'from', first_day, 'to', today, 'timezone', tz,
    'calls_answered', t.answered,
    -- A lead made from a call is never older than the call, so only leads created since the
    -- window opened need joining (index on leads (location_id, created_at)).
    -- A lead made from a call is never older than the call, so only leads created since the
    -- window opened are looked at (index-only), each checked against its call by primary key.
    'leads_captured', (select count(*) from app.leads l
                        where l.location_id = a.location_id and l.created_at >= w_start and l.call_id is not null
                          and tstzrange(w_start, w_end) @> (select c.started_at from app.calls c
                                                             where c.id = l.call_id and c.direction = 'inbound' offset 0)),
    'revenue_recovered', t.revenue,
    'spam_blocked', t.spam,
    'emergencies', t.emergencies,
    'answer_rate_pct', case when t.non_spam = 0 then 0 else round(100.0 * t.answered / t.non_spam, 1) end,
    'after_hours_calls', t.after_hours,
    'per_day', (select jsonb_agg(jsonb_build_object(
                  'date', s.day::date, 'calls', coalesce(p.calls, 0), 'revenue', coalesce(p.revenue, 0)) order by s.day)
                  from generate_series(first_day, today, interval '1 day') s(day)
                  left join per_day p on p.d = s.day::date),
    'per_hour', (select jsonb_agg(jsonb_build_object('hour', hour, 'share', units / 10000.0) order by hour) from hour_final),
    'services', (select coalesce(jsonb_agg(jsonb_build_object(
                    'service', service_type,
                    'pct', round(100.0 * n / (select sum(n) from svc), 1)) order by n desc, service_type), '[]')
                   from svc))
    into result
    from tot t;
  return result;
end
$$;
comment on function api.insights(text, text, int) is
  E'GET insights?days=N: the last N local days (today included) of inbound calls, per DESIGN.md §10.';

--! Previous: sha1:7e6aac95ea13a450bc537435328baa2e4a370280
--! Hash: sha1:1662cdfaad52b9d3943af6bda978d29aaa02dbbc
--! Message: finalising a call removes its pending finalize_call job

-- Polish: app.dequeue (narrow job removal) and finalisation taking its finalize_call job off the queue.

/*
 * Removes a queued job by its job_key (graphile_worker.remove_job): deleted when not yet taken
 * by a worker; a job a worker is running keeps running but loses its key and will not retry.
 * SECURITY DEFINER, owned by the migrating role like app.enqueue, because switchboard_system
 * (owner of the voice functions) has no rights on the graphile_worker schema; it can only remove
 * a job by key, and only switchboard_system may call it.
 */
create function app.dequeue(job_key text) returns void
  language plpgsql volatile security definer
  set search_path to pg_catalog, public, pg_temp
as $$
begin
  perform graphile_worker.remove_job(dequeue.job_key);
end
$$;
comment on function app.dequeue(text) is
  E'SECURITY DEFINER because the voice functions'' owner has no rights on graphile_worker; only removes the job with this job_key (no-op when there is none).';
revoke execute on function app.dequeue(text) from public;
grant execute on function app.dequeue(text) to switchboard_system;

-- Finalisation (call_analyzed, call_ended with analysis, or the finalize_call task itself)
-- removes the call's pending finalize_call job. Otherwise identical to 000015.
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

  -- Settled now: the fallback finalize_call job (queued on call_ended without analysis) has
  -- nothing left to do, so it is taken off the queue instead of running as a no-op.
  perform app.dequeue('finalize_call:' || c.id);

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
  E'Settles a call once (outcome from custom_analysis_data, else from disconnection_reason), upserts the customer, creates lead/booking, fires call.emergency (once, only for urgency 5 or a transfer; the analysis is_emergency flag only marks the row) and call.ended, and removes the call''s queued finalize_call job. Caller holds the row lock.';

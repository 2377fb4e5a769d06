--! Previous: sha1:d53e925658570c80111b3098d7fe38596f4b5400
--! Hash: sha1:dd05453324aa330e15dd9cbf937611408ee90385
--! Message: Erasure locks attempts and notifications in id order

-- An erasure locks the caller's webhook attempts and notifications in id order, as the record steps do (docs/privacy.md "Erasure").
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
  n_customers int; n_calls int; n_leads int; n_bookings int; n_events int; n_attempts int; n_notifications int; n_syncs int;
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
  -- Field-service syncs of those leads and bookings: a provider's refusal can quote the record it
  -- was sent (the caller's phone, name, address), so their last_error is cleared; the connection's
  -- last_error too when it is one of those messages (it is a copy of its latest failed sync's).
  -- The record counts the syncs cleared (integration_syncs); the connection's copy is one of them.
  with hit as (
    select s.id, s.integration_id, s.last_error from app.integration_syncs s
     where s.location_id = loc and s.last_error is not null
       and s.record_id = any (m.lead_ids || m.booking_ids)
       and (case s.record_type when 'lead' then s.record_id = any (m.lead_ids) else s.record_id = any (m.booking_ids) end)
       for update
  ), cleared as (
    update app.integration_syncs s set last_error = null
      from hit
     where s.location_id = loc and s.id = hit.id
    returning hit.integration_id, hit.last_error
  ), copies as (
    update app.integrations i set last_error = null
      from (select distinct c.integration_id, c.last_error from cleared c) c
     where i.location_id = loc and i.id = c.integration_id and i.last_error = c.last_error
  )
  select count(*)::int into n_syncs from cleared;
  update app.events e set data = app.privacy_scrub(e.data), redacted_at = now()
   where e.location_id = loc and e.id = any (m.event_ids);
  get diagnostics n_events = row_count;
  update app.events e set body = app.privacy_event_body(e)
   where e.location_id = loc and e.id = any (m.event_ids);
  -- Attempts keep no payload (they send the event's body) but may keep a receiver's echo of it.
  -- Locked first in id order, the order the record steps lock theirs in (app.webhook_record_batch),
  -- so an erasure and a record of the same attempts wait for each other instead of deadlocking.
  perform 1 from app.webhook_deliveries d
   where d.location_id = loc and d.event_id = any (m.event_ids)
   order by d.id
     for no key update;
  update app.webhook_deliveries d set response_body = null
   where d.location_id = loc and d.event_id = any (m.event_ids);
  get diagnostics n_attempts = row_count;
  -- Notifications render from the event at send time; their log keeps provider answers, which
  -- can quote the message (an SMS API answers with the text it sent).
  -- Share-locked first: a try being recorded (app.notification_record_batch, which locks its
  -- notifications before it writes the log) either commits before the log is cleared below, or
  -- waits for this erasure and then finds the event cleared and stores no detail.
  -- In id order, as app.notification_record_batch locks them: the two never deadlock.
  select count(*)::int into n_notifications
    from (select 1 from app.notifications n
           where n.location_id = loc and n.event_id = any (m.event_ids)
           order by n.id
             for share of n) n;
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
    'idempotency_answers', n_replays, 'integration_syncs', n_syncs));

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
comment on function app.erasure_perform(uuid,text,text,uuid,text,uuid,boolean) is E'Erases one caller''s personal data in the pinned location (docs/privacy.md "Erasure"): customers, calls (caller fields and content), leads, bookings, event data and bodies, webhook attempt response bodies, notification log details, the last_error of their field-service syncs (and of the connection when it is one of those; the record counts the syncs), stored Idempotency-Key answers that hold them (replays then answer 410); rows stay, so counts and insights do not change. Records the erasure (identifiers hashed), emits customer.erased (ids only) when anything matched, serialised per location (an advisory lock) so concurrent erasures of one caller match and emit once, and with platform queues the voice-platform deletions. SECURITY DEFINER (switchboard_system) because events are append-only to the API role; it refuses any location but the one app.authorize pinned, and filters every statement by it.';
revoke execute on function app.erasure_perform(uuid,text,text,uuid,text,uuid,boolean) from public;
grant execute on function app.erasure_perform(uuid,text,text,uuid,text,uuid,boolean) to switchboard_api;

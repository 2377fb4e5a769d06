-- ==== Caller data: live-call tool redaction ====

-- Live-call tools: whether the location a call dialled redacts sensitive numbers. Asked by the tool
-- route only when its scan of the tool's free-text arguments found a card number, security code or
-- SSN (docs/privacy.md "Redaction at ingestion").
create or replace function app.voice_redacts(to_number text)
 returns boolean
 language sql
 stable security definer
 set search_path to 'pg_catalog', 'public', 'pg_temp'
as $function$
  select coalesce((select p.redact_sensitive_data
                     from app.locations l join app.privacy_settings p on p.location_id = l.id
                    where l.service_phone = voice_redacts.to_number), true)
$function$;
alter function app.voice_redacts(text) owner to switchboard_system;
comment on function app.voice_redacts(text) is E'Live-call tools: whether the location answering to_number redacts card numbers, security codes and SSNs (app.privacy_settings.redact_sensitive_data; true, the default, when no location or setting is found). The tool route asks only when its scan found something (docs/privacy.md "Redaction at ingestion").';
revoke execute on function app.voice_redacts(text) from public;

-- ==== Caller data: field-service sync errors ====

-- A provider's refusal quotes the record it was sent (ServiceTitan: "Phone '+1512…' for 'Name' at
-- '3 Emu Street'…"): integration_syncs.last_error and its copy integrations.last_error are caller
-- content (docs/privacy.md), withheld from staff viewers and cleared by erasure and the
-- personal-data window. The indexes hold only rows with an error (failures are few).
create index if not exists integration_syncs_error_record_idx on app.integration_syncs (location_id, record_id) where last_error is not null;
create index if not exists integration_syncs_personal_retention_idx on app.integration_syncs (location_id, created_at) where last_error is not null;
select app.staff_hide_columns('app.integration_syncs', array['last_error'], array['viewer']);
select app.staff_hide_columns('app.integrations', array['last_error'], array['viewer']);

create or replace function app.erasure_perform(loc uuid, phone text, email text, customer_id uuid, source text, api_key_id uuid, platform boolean)
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
  -- Field-service syncs of those leads and bookings: a provider's refusal can quote the record it
  -- was sent (the caller's phone, name, address), so their last_error is cleared; the connection's
  -- last_error too when it is one of those messages (it is a copy of its latest failed sync's).
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
  )
  update app.integrations i set last_error = null
    from (select distinct c.integration_id, c.last_error from cleared c) c
   where i.location_id = loc and i.id = c.integration_id and i.last_error = c.last_error;
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
comment on function app.erasure_perform(uuid,text,text,uuid,text,uuid,boolean) is E'Erases one caller''s personal data in the pinned location (docs/privacy.md "Erasure"): customers, calls (caller fields and content), leads, bookings, event data and bodies, webhook attempt response bodies, notification log details, the last_error of their field-service syncs (and of the connection when it is one of those), stored Idempotency-Key answers that hold them (replays then answer 410); rows stay, so counts and insights do not change. Records the erasure (identifiers hashed), emits customer.erased (ids only) when anything matched, serialised per location (an advisory lock) so concurrent erasures of one caller match and emit once, and with platform queues the voice-platform deletions. SECURITY DEFINER (switchboard_system) because events are append-only to the API role; it refuses any location but the one app.authorize pinned, and filters every statement by it.';
revoke execute on function app.erasure_perform(uuid,text,text,uuid,text,uuid,boolean) from public;
grant execute on function app.erasure_perform(uuid,text,text,uuid,text,uuid,boolean) to switchboard_api;

create or replace function app.privacy_prune(kind text, batch_size integer)
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
declare
  n int;
begin
  if kind = 'content' then
    update app.calls c
       set transcript = null, transcript_turns = null, recording_url = null, public_log_url = null,
           call_summary = null, metadata = '{}', content_purged_at = now()
      from (select x.id, x.location_id from app.privacy_settings s cross join lateral (
              select k.id, k.location_id from app.calls k
               where k.location_id = s.location_id and k.content_purged_at is null
                 and k.created_at < now() - make_interval(days => s.content_retention_days)
               order by k.created_at limit batch_size
                 for update of k skip locked) x
             where s.content_retention_days is not null
             limit batch_size) b
     where c.id = b.id and c.location_id = b.location_id;
  elsif kind = 'personal_calls' then
    update app.calls c
       set caller_phone = null, caller_name = null, caller_address = null, caller_email = null, issue_summary = null,
           transcript = null, transcript_turns = null, recording_url = null, public_log_url = null,
           call_summary = null, metadata = '{}', anonymised_at = now(), content_purged_at = coalesce(c.content_purged_at, now())
      from (select x.id, x.location_id from app.privacy_settings s cross join lateral (
              select k.id, k.location_id from app.calls k
               where k.location_id = s.location_id and k.anonymised_at is null
                 and k.created_at < now() - make_interval(days => s.personal_data_retention_days)
               order by k.created_at limit batch_size
                 for update of k skip locked) x
             where s.personal_data_retention_days is not null
             limit batch_size) b
     where c.id = b.id and c.location_id = b.location_id;
  elsif kind = 'personal_customers' then
    update app.customers c set phone = null, name = null, email = null, address = null, anonymised_at = now()
      from (select x.id, x.location_id from app.privacy_settings s cross join lateral (
              select k.id, k.location_id from app.customers k
               where k.location_id = s.location_id and k.anonymised_at is null
                 and coalesce(k.last_call_at, k.created_at) < now() - make_interval(days => s.personal_data_retention_days)
               order by coalesce(k.last_call_at, k.created_at) limit batch_size
                 for update of k skip locked) x
             where s.personal_data_retention_days is not null
             limit batch_size) b
     where c.id = b.id and c.location_id = b.location_id;
  elsif kind = 'personal_leads' then
    update app.leads l set name = null, phone = null, email = null, address = null, notes = null, anonymised_at = now()
      from (select x.id, x.location_id from app.privacy_settings s cross join lateral (
              select k.id, k.location_id from app.leads k
               where k.location_id = s.location_id and k.anonymised_at is null
                 and k.created_at < now() - make_interval(days => s.personal_data_retention_days)
               order by k.created_at limit batch_size
                 for update of k skip locked) x
             where s.personal_data_retention_days is not null
             limit batch_size) b
     where l.id = b.id and l.location_id = b.location_id;
  elsif kind = 'personal_bookings' then
    update app.bookings t set address = null, notes = null, anonymised_at = now()
      from (select x.id, x.location_id from app.privacy_settings s cross join lateral (
              select k.id, k.location_id from app.bookings k
               where k.location_id = s.location_id and k.anonymised_at is null
                 and k.created_at < now() - make_interval(days => s.personal_data_retention_days)
               order by k.created_at limit batch_size
                 for update of k skip locked) x
             where s.personal_data_retention_days is not null
             limit batch_size) b
     where t.id = b.id and t.location_id = b.location_id;
  elsif kind = 'personal_events' then
    -- Events naming a call, lead or booking lose their personal fields (data and body alike);
    -- customer.erased (ids only) and test sends are only marked.
    update app.events e
       set data = case when e.type in ('customer.erased', 'webhook.test') then e.data else app.privacy_scrub(e.data) end,
           body = case when e.type in ('customer.erased', 'webhook.test') then e.body
                       else jsonb_build_object('event', e.type, 'location_id', e.location_id, 'created_at', app.iso(e.created_at),
                                               'data', app.privacy_scrub(e.data))::text end,
           redacted_at = now()
      from (select x.id, x.location_id from app.privacy_settings s cross join lateral (
              select k.id, k.location_id from app.events k
               where k.location_id = s.location_id and k.redacted_at is null
                 and k.created_at < now() - make_interval(days => s.personal_data_retention_days)
               order by k.created_at limit batch_size
                 for update of k skip locked) x
             where s.personal_data_retention_days is not null
             limit batch_size) b
     where e.id = b.id and e.location_id = b.location_id;
  elsif kind = 'personal_integration_syncs' then
    -- A field-service provider's refusal can quote the record it was sent (the caller's phone,
    -- name, address): the sync's last_error goes with the window, counted from the sync's creation
    -- (as an event's), and the connection's last_error with it when it is that message.
    with hit as (
      select x.id, x.location_id, x.integration_id, x.last_error from app.privacy_settings s cross join lateral (
              select k.id, k.location_id, k.integration_id, k.last_error from app.integration_syncs k
               where k.location_id = s.location_id and k.last_error is not null
                 and k.created_at < now() - make_interval(days => s.personal_data_retention_days)
               order by k.created_at limit batch_size
                 for update of k skip locked) x
       where s.personal_data_retention_days is not null
       limit batch_size
    ), cleared as (
      update app.integration_syncs y set last_error = null
        from hit
       where y.id = hit.id and y.location_id = hit.location_id
      returning hit.location_id, hit.integration_id, hit.last_error
    ), connections as (
      update app.integrations i set last_error = null
        from (select distinct c.location_id, c.integration_id, c.last_error from cleared c) c
       where i.id = c.integration_id and i.location_id = c.location_id and i.last_error = c.last_error
    )
    select count(*)::int into n from cleared;
    return n;
  else
    perform app.raise('SB400', format('Unknown privacy retention kind %s', kind));
  end if;
  get diagnostics n = row_count;
  return n;
end
$function$;
alter function app.privacy_prune(text,integer) owner to switchboard_system;
comment on function app.privacy_prune(text,integer) is E'Worker (prune_deliveries, through app.retention_prune): clears one batch (at most batch_size rows, SKIP LOCKED, index-led per location) of one kind past the location''s window: content (call transcript, turns, recording and log URLs, platform summary, metadata) | personal_calls (caller fields and content) | personal_customers | personal_leads | personal_bookings | personal_events | personal_integration_syncs (a sync''s last_error, and its connection''s when the same). Rows stay, so counts and insights do not change (docs/privacy.md "Retention").';
revoke execute on function app.privacy_prune(text,integer) from public;

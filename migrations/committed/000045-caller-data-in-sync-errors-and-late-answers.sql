--! Previous: sha1:24af0a6655d5ddf01304484109bf4079f7b01e7b
--! Hash: sha1:7d50dbb443a4838b8f9ae883c1a02b44ce6893ea
--! Message: caller data in sync errors and late answers

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
  -- Share-locked first: a try being recorded (app.notification_record_batch, which locks its
  -- notifications before it writes the log) either commits before the log is cleared below, or
  -- waits for this erasure and then finds the event cleared and stores no detail.
  select count(*)::int into n_notifications
    from (select 1 from app.notifications n
           where n.location_id = loc and n.event_id = any (m.event_ids)
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

-- ==== Caller data: answers recorded after an erasure ====
-- A webhook attempt or a notification in flight while an erasure committed recorded the
-- receiver's or provider's answer (which can quote the payload) after the erasure had cleared the
-- others: the record step stores none for an event already cleared (docs/privacy.md "Erasure").

create or replace function app.webhook_record(delivery_id uuid, result jsonb, retry_delays integer[], disable_after_failures integer, disable_after_seconds integer)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
declare
  d app.webhook_deliveries;
  ok boolean := coalesce((result ->> 'ok')::boolean, false);
  http_status int := (result ->> 'response_status')::int;
  retry_after double precision := (result ->> 'retry_after_seconds')::double precision;
  delay double precision;
  next_at timestamptz;
  nd app.webhook_deliveries;
  ep app.webhook_endpoints;
  reason text;
begin
  -- The endpoint first, then the attempt: the order in which DELETE of an endpoint takes them (it
  -- locks the endpoint, then its ON DELETE SET NULL rewrites the attempts). Taking the attempt
  -- first deadlocked against a DELETE that arrived while a first success was being recorded.
  perform 1 from app.webhook_endpoints e
   where e.id = (select w.endpoint_id from app.webhook_deliveries w where w.id = webhook_record.delivery_id)
     for key share;
  select * into d from app.webhook_deliveries w where w.id = webhook_record.delivery_id for update;
  if not found or d.status <> 'pending' then return null; end if;
  if not ok and d.attempt <= cardinality(retry_delays) then
    delay := retry_delays[d.attempt];
    if http_status in (429, 503) and retry_after > delay then
      delay := greatest(delay, least(retry_after, (select max(x) from unnest(retry_delays) x)));
    end if;
    next_at := now() + make_interval(secs => delay);
  end if;
  -- An erasure (or the personal-data window) that cleared the event while this attempt was in
  -- flight has already emptied the attempts' response_body: the receiver's echo of the body it
  -- was sent is not stored after it. The attempt is locked (above) before this statement, so an
  -- erasure still running has committed by the time it reads the event (docs/privacy.md "Erasure").
  update app.webhook_deliveries w
     set status = case when ok then 'delivered' when next_at is null then 'dead' else 'failed' end,
         response_status = http_status,
         response_body = case when exists (select 1 from app.events e
                                             where e.id = w.event_id and e.location_id = w.location_id and e.redacted_at is not null)
                              then null else result ->> 'response_body' end,
         error = result ->> 'error',
         duration_ms = (result ->> 'duration_ms')::int,
         attempted_at = coalesce((result ->> 'attempted_at')::timestamptz, w.attempted_at, now()),
         next_attempt_at = next_at,
         lease_expires_at = null,
         lease_owner = null
   where w.id = d.id
  returning * into d;
  -- Endpoint bookkeeping. A success on an endpoint already at 0 failures refreshes
  -- last_success_at at most once a second: a busy endpoint's row is not rewritten for every
  -- delivery.
  if ok then
    update app.webhook_endpoints e set failure_count = 0, failing_since = null, last_success_at = now()
     where e.id = d.endpoint_id
       and (e.failure_count <> 0 or e.last_success_at is null or e.last_success_at < now() - interval '1 second');
  elsif d.endpoint_id is not null then
    update app.webhook_endpoints w
       set failure_count = w.failure_count + 1, last_failure_at = now(),
           failing_since = case when w.failure_count = 0 or w.failing_since is null then now() else w.failing_since end
     where w.id = d.endpoint_id
    returning * into ep;
    if ep.active then
      if http_status = 410 then
        reason := 'The endpoint answered 410 Gone';
      elsif ep.failure_count >= disable_after_failures
            and ep.failing_since <= now() - make_interval(secs => disable_after_seconds) then
        reason := format('%s consecutive failed attempts since %s', ep.failure_count, app.iso(ep.failing_since));
      end if;
      if reason is not null then
        update app.webhook_endpoints w set active = false, disabled_at = now(), disabled_reason = reason
         where w.id = ep.id
        returning * into ep;
        perform app.webhook_endpoint_alert('webhook_endpoint.disabled', ep, d, disable_after_failures, disable_after_seconds);
      elsif ep.failure_count = (disable_after_failures + 1) / 2 then
        perform app.webhook_endpoint_alert('webhook_endpoint.failing', ep, d, disable_after_failures, disable_after_seconds);
      end if;
    end if;
  end if;
  if next_at is not null and d.endpoint_id is not null then
    insert into app.webhook_deliveries (location_id, event_id, endpoint_id, event, attempt, status, url, next_attempt_at)
    values (d.location_id, d.event_id, d.endpoint_id, d.event, d.attempt + 1, 'pending', d.url, next_at)
    returning * into nd;
    perform app.webhook_enqueue(nd.id, nd.location_id, nd.next_attempt_at);
  end if;
  return jsonb_build_object('delivery_id', d.id, 'status', d.status, 'next_delivery_id', nd.id,
                            'disabled', reason is not null);
end
$function$;
alter function app.webhook_record(uuid,jsonb,integer[],integer,integer) owner to switchboard_system;
comment on function app.webhook_record(uuid,jsonb,integer[],integer,integer) is E'Worker: stores a leased attempt''s outcome, ends the lease, schedules the next attempt (Retry-After on 429/503, capped at the largest delay) or marks the delivery dead, and applies the endpoint health rules (auto-disable, 410 Gone, warning at half the threshold).';
revoke execute on function app.webhook_record(uuid,jsonb,integer[],integer,integer) from public;

create or replace function app.webhook_record_batch(results jsonb, retry_delays integer[], disable_after_failures integer, disable_after_seconds integer)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
declare
  r record;
  done jsonb := '[]';
  ids uuid[];
  all_ok boolean;
  recorded uuid[];
  recorded_eps uuid[];
  stale_eps uuid[];
begin
  select array_agg((x ->> 'delivery_id')::uuid), coalesce(bool_and(coalesce((x -> 'result' ->> 'ok')::boolean, false)), true)
    into ids, all_ok
    from jsonb_array_elements(results) x;
  if all_ok then
    perform 1 from app.webhook_endpoints e
     where e.id in (select w.endpoint_id from app.webhook_deliveries w where w.id = any (ids))
     order by e.id
       for key share;
    -- Then the attempts, in id order, in a statement of their own: the update below reads each
    -- attempt's event after any erasure that held an attempt has committed, so an event cleared
    -- while its attempt was in flight gets no response_body (docs/privacy.md "Erasure").
    perform 1 from app.webhook_deliveries w where w.id = any (ids) order by w.id for no key update;
    with res as (
      select x.delivery_id as id, x.result
        from jsonb_to_recordset(results) x(delivery_id uuid, result jsonb)
    ), upd as (
      update app.webhook_deliveries w
         set status = 'delivered',
             response_status = (res.result ->> 'response_status')::int,
             response_body = case when exists (select 1 from app.events e
                                                where e.id = w.event_id and e.location_id = w.location_id and e.redacted_at is not null)
                                  then null else res.result ->> 'response_body' end,
             error = res.result ->> 'error',
             duration_ms = (res.result ->> 'duration_ms')::int,
             attempted_at = coalesce((res.result ->> 'attempted_at')::timestamptz, w.attempted_at, now()),
             next_attempt_at = null,
             lease_expires_at = null,
             lease_owner = null
        from res
       -- The ids as an array too: an index scan of the primary key. Joined to the recordset alone,
       -- whose size the planner cannot know, a plan made while few attempts were pending read every
       -- pending attempt for each outcome (a drain fell to a fifth of its rate; docs/performance.md,
       -- "Performance after a realistic history: the fourth round").
       where w.id = any (ids) and w.id = res.id and w.status = 'pending'
      returning w.id, w.endpoint_id
    )
    select coalesce(array_agg(u.id), '{}'), coalesce(array_agg(distinct u.endpoint_id), '{}')
      into recorded, recorded_eps
      from upd u;
    -- The health rows to refresh, locked in id order; held, they cannot change before the update.
    select coalesce(array_agg(x.id), '{}') into stale_eps
      from (select e.id from app.webhook_endpoints e
             where e.id = any (recorded_eps)
               and (e.failure_count <> 0 or e.last_success_at is null or e.last_success_at < now() - interval '1 second')
             order by e.id
               for no key update) x;
    update app.webhook_endpoints e set failure_count = 0, failing_since = null, last_success_at = now()
     where e.id = any (stale_eps);
    select coalesce(jsonb_agg(case when x.id = any (recorded)
                                   then jsonb_build_object('delivery_id', x.id, 'status', 'delivered',
                                                           'next_delivery_id', null, 'disabled', false)
                              end order by x.endpoint_id, x.id::text), '[]')
      into done
      from (select (x ->> 'delivery_id')::uuid as id, x ->> 'endpoint_id' as endpoint_id from jsonb_array_elements(results) x) x;
    return done;
  end if;
  for r in
    select (x ->> 'delivery_id')::uuid as id, x -> 'result' as result
      from jsonb_array_elements(results) x
     order by x ->> 'endpoint_id', x ->> 'delivery_id'
  loop
    done := done || jsonb_build_array(app.webhook_record(r.id, r.result, retry_delays,
                                                         disable_after_failures, disable_after_seconds));
  end loop;
  return done;
end
$function$;
alter function app.webhook_record_batch(jsonb,integer[],integer,integer) owner to switchboard_system;
comment on function app.webhook_record_batch(jsonb,integer[],integer,integer) is E'Worker: records a batch of { delivery_id, endpoint_id, result }: a batch of successes in one pass (endpoints key-share-locked in id order, then the attempts, then the endpoints'' health at most once a second), otherwise app.webhook_record for each, in endpoint order.';
revoke execute on function app.webhook_record_batch(jsonb,integer[],integer,integer) from public;

create or replace function app.notification_record_batch(owner text, results jsonb, max_attempts integer)
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
declare
  bad text;
  n int;
  ids uuid[];
begin
  select x.status into bad
    from jsonb_to_recordset(results) x(status text)
   where x.status is null or x.status not in ('sent', 'failed', 'skipped') limit 1;
  if found then
    perform app.raise('SB400', format('Unknown notification outcome %s', coalesce(bad, 'null')));
  end if;
  ids := array(select x.id from jsonb_to_recordset(results) x(id uuid));
  -- The notifications first, in a statement of their own: an erasure share-locks the
  -- notifications of the events it clears before it clears their log, so either it waits for
  -- this record (and clears the detail written here) or this waits for it and, in the statement
  -- below, sees the event cleared and stores no detail (the provider's answer can quote the
  -- message, an SMS API the text it sent; docs/privacy.md "Erasure").
  perform 1 from app.notifications t where t.id = any (ids) and t.lease_owner = owner order by t.id for no key update;
  with r as (
    select x.id, x.status, x.detail, x.response_status,
           x.status = 'failed' and not coalesce(x.permanent, false) as retryable
      from jsonb_to_recordset(results) x(id uuid, status text, detail text, response_status integer, permanent boolean)
  ), moved as (
    update app.notifications t
       set attempts = t.attempts + case when r.status = 'skipped' then 0 else 1 end,
           status = case when r.retryable and t.attempts + 1 < max_attempts then 'pending' else r.status end,
           -- graphile-worker's backoff, which this lane used before: e^attempts seconds (2.7 s, 7.4 s, 20 s).
           next_attempt_at = case when r.retryable and t.attempts + 1 < max_attempts
                                  then now() + make_interval(secs => exp(least(10, t.attempts + 1))) end,
           lease_expires_at = null,
           lease_owner = null
      from r
     -- The ids as an array: an index scan of the primary key (joined to the recordset alone, whose
     -- size the planner cannot know, it would read the whole table).
     where t.id = any (ids)
       and t.id = r.id and t.status = 'pending' and t.lease_owner = owner
    returning t.id, t.location_id, t.event_id, r.status, r.detail, r.response_status
  )
  insert into app.notification_log (location_id, notification_id, status, detail, response_status)
  select m.location_id, m.id, m.status,
         case when exists (select 1 from app.events e
                            where e.id = m.event_id and e.location_id = m.location_id and e.redacted_at is not null)
              then null else left(m.detail, 2000) end,
         m.response_status
    from moved m;
  get diagnostics n = row_count;
  return n;
end
$function$;
alter function app.notification_record_batch(text,jsonb,integer) owner to switchboard_system;
comment on function app.notification_record_batch(text,jsonb,integer) is E'Notification engine: records tries [{id, status sent|failed|skipped, detail, response_status, permanent}] held by owner. Each appends to notification_log, ends its lease and moves the notification: sent | skipped | failed (permanent, or the max_attempts-th try) or pending again after e^attempts seconds. A try whose lease was swept and taken by another engine is not recorded twice. Returns how many were recorded.';
revoke execute on function app.notification_record_batch(text,jsonb,integer) from public;

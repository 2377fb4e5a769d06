--! Previous: sha1:aeebf02b25b66593ac40901bb9a2093785069e3c
--! Hash: sha1:dd5f62073f80786ca7d2751cdd9735dad519add9
--! Message: staff and caller data hardening

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

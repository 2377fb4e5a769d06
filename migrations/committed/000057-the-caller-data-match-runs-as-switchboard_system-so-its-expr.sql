--! Previous: sha1:941993c1f56df431968749ac2547fb97ca24f6c4
--! Hash: sha1:61dc1081f3a514fa136d540a8f9293523c220cc9
--! Message: The caller-data match runs as switchboard_system so its expression indexes serve it; indexes for three list filters

-- The caller-data export (GET caller-data) matches a caller's rows through the indexes it was
-- meant to use, and three list filters get the index they lacked (docs/performance.md, "Index
-- audit at 1 M calls").
--
-- app.privacy_match_ids ran as the API role, under the tables' RLS policies: lower(email) and
-- data ->> 'id' are not leakproof, so PostgreSQL would not use the expression indexes beneath a
-- policy and scanned the location's customers, leads and events (0.5-1.2 s at 1 M calls). It now
-- runs as switchboard_system, as app.erasure_perform (its other caller) already does; it refuses
-- any location but the one app.authorize pinned and filters every statement by it.
create or replace function app.privacy_match_ids(loc uuid, phone text, email text, customer_id uuid, only_uncleared boolean)
 RETURNS app.privacy_match
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
declare
  m app.privacy_match;
  em text := lower(email);
  phones text[];
  emails text[];
  ids text[];
  call_texts text[];
begin
  if loc is null or loc is distinct from app.current_location_id() then
    perform app.raise('SB400', 'app.privacy_match_ids runs for the pinned location only');
  end if;
  -- Customers by phone (unique per location), e-mail or id; their phones and e-mails widen the
  -- search to calls and leads that never got a customer (unfinalised calls, API leads).
  select coalesce(array_agg(c.id), '{}'),
         array_remove(array_agg(c.phone::text), null), array_remove(array_agg(lower(c.email)), null)
    into m.customer_ids, phones, emails
    from app.customers c
   where c.location_id = loc
     and (c.phone = privacy_match_ids.phone or lower(c.email) = em or c.id = privacy_match_ids.customer_id)
     and (not only_uncleared or c.anonymised_at is null);
  phones := array(select distinct x from unnest(phones || privacy_match_ids.phone) x where x is not null);
  emails := array(select distinct x from unnest(emails || em) x where x is not null);
  select coalesce(array_agg(c.id), '{}') into m.call_ids
    from app.calls c
   where c.location_id = loc
     and (c.customer_id = any (m.customer_ids) or c.caller_phone = any (phones) or lower(c.caller_email) = any (emails))
     and (not only_uncleared or c.anonymised_at is null or c.content_purged_at is null);
  select coalesce(array_agg(l.id), '{}') into m.lead_ids
    from app.leads l
   where l.location_id = loc
     and (l.customer_id = any (m.customer_ids) or l.call_id = any (m.call_ids)
          or l.phone = any (phones) or lower(l.email) = any (emails))
     and (not only_uncleared or l.anonymised_at is null);
  select coalesce(array_agg(b.id), '{}') into m.booking_ids
    from app.bookings b
   where b.location_id = loc
     and (b.customer_id = any (m.customer_ids) or b.call_id = any (m.call_ids) or b.lead_id = any (m.lead_ids))
     and (not only_uncleared or b.anonymised_at is null);
  -- Events name their record by data.id (calls, leads, bookings) or, for spam.blocked, data.call_id.
  ids := (m.call_ids || m.lead_ids || m.booking_ids)::text[];
  call_texts := m.call_ids::text[];
  select coalesce(array_agg(e.id), '{}') into m.event_ids
    from app.events e
   where e.location_id = loc
     and ((e.data ->> 'id') = any (ids) or (e.type = 'spam.blocked' and (e.data ->> 'call_id') = any (call_texts)))
     and e.type not in ('customer.erased', 'webhook.test')
     and (not only_uncleared or e.redacted_at is null);
  return m;
end
$function$;
alter function app.privacy_match_ids(uuid,text,text,uuid,boolean) owner to switchboard_system;
comment on function app.privacy_match_ids(uuid,text,text,uuid,boolean) is E'One caller''s rows in one location: customers by phone, e-mail or id; calls by customer, phone or e-mail; leads by customer, call, phone or e-mail; bookings by customer, call or lead; events naming any of them. only_uncleared leaves out rows already cleared (erasure); every look-up is an index scan (docs/privacy.md "Erasure"). SECURITY DEFINER (switchboard_system) so the expression indexes serve it, which RLS policies over non-leakproof expressions prevented; it refuses any location but the one app.authorize pinned, and filters every statement by it.';

-- GET webhook-deliveries?endpoint_id=: an endpoint whose deliveries are old or sparse (one
-- disabled months ago) walked the location's whole created_at index (470 ms at 2.7 M attempts).
create index if not exists webhook_deliveries_endpoint_created_idx on app.webhook_deliveries (endpoint_id, location_id, created_at desc, id desc);
-- GET bookings?status=: no status index, so a rare status read every booking of the location.
create index if not exists bookings_location_status_created_idx on app.bookings (location_id, status, created_at desc, id desc);
-- GET integrations/{provider}/syncs?status=failed: about 430 rows read per row returned.
create index if not exists integration_syncs_location_status_created_idx on app.integration_syncs (location_id, provider, status, created_at desc, id desc);

--! Previous: sha1:d0f15e602ee08b79379409ae91e50372bf9fabc2
--! Hash: sha1:c880cf81b139e041fedd38f905422424e3438300
--! Message: booking update after a reconnection finds the earlier create

-- Enter migration here

-- ==== a booking's update after a reconnection finds the create of the earlier connection (docs/integrations.md "Order") ====
CREATE OR REPLACE FUNCTION app.integration_sync_claim(sync_id uuid, lease_seconds integer)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
declare
  s app.integration_syncs;
  rec jsonb;
  loc app.locations;
  erased boolean;
  cs app.integration_syncs;
begin
  select * into s from app.integration_syncs x
   where x.id = integration_sync_claim.sync_id and x.status = 'pending'
     and (x.lease_until is null or x.lease_until < now()) and x.next_attempt_at <= now() + interval '1 second'
     and exists (select 1 from app.integrations i where i.id = x.integration_id and i.location_id = x.location_id and i.status = 'connected');
  if s.id is null then return null; end if;
  -- One sync in flight per connection, across worker processes: two at once would each look for
  -- the same client or customer, find none and create it twice. Claims of one connection take
  -- turns on this lock (to the end of the transaction), so the second sees the first's lease.
  perform pg_advisory_xact_lock(7311, hashtext(s.integration_id::text));
  if exists (select 1 from app.integration_syncs o
              where o.location_id = s.location_id and o.integration_id = s.integration_id and o.id <> s.id
                and o.status = 'pending' and o.lease_until > now()) then
    return jsonb_build_object('busy', true, 'id', s.id, 'integration_id', s.integration_id);
  end if;
  update app.integration_syncs x
     set lease_until = now() + make_interval(secs => lease_seconds), attempts = x.attempts + 1
   where x.id = s.id and x.location_id = s.location_id and x.status = 'pending'
     and (x.lease_until is null or x.lease_until < now()) and x.next_attempt_at <= now() + interval '1 second'
  returning * into s;
  if s.id is null then return null; end if;
  select * into loc from app.locations l where l.id = s.location_id;
  if s.record_type = 'lead' then
    select app.lead_json(l), l.anonymised_at is not null into rec, erased
      from app.leads l where l.id = s.record_id and l.location_id = s.location_id;
  else
    select app.booking_json(b) || to_jsonb(b) - array['location_id'] || jsonb_build_object('customer', (
             select jsonb_build_object('name', coalesce(c.name, ld.name), 'phone', coalesce(c.phone::text, ld.phone::text),
                                       'email', coalesce(c.email, ld.email), 'address', coalesce(b.address, c.address, ld.address))
               from (select 1) one
               left join app.customers c on c.id = b.customer_id and c.location_id = b.location_id
               left join app.leads ld on ld.id = b.lead_id and ld.location_id = b.location_id)),
           b.anonymised_at is not null
             or exists (select 1 from app.customers c where c.id = b.customer_id and c.location_id = b.location_id and c.anonymised_at is not null)
             or exists (select 1 from app.leads ld where ld.id = b.lead_id and ld.location_id = b.location_id and ld.anonymised_at is not null)
      into rec, erased from app.bookings b where b.id = s.record_id and b.location_id = s.location_id;
  end if;
  if s.action = 'update' then
    select * into cs from app.integration_syncs x
     where x.location_id = s.location_id and x.integration_id = s.integration_id and x.record_type = s.record_type
       and x.record_id = s.record_id and x.action = 'create';
    -- A reconnection is a new integration record (docs/integrations.md "Disconnect"): the record's
    -- create may have gone through an earlier one. The same account: that create stands for this
    -- connection's (its remote ids are this account's). Another account has no remote record: the
    -- create is added through this connection, and the update waits for it ("Order").
    if cs.id is null then
      select x.* into cs from app.integration_syncs x
        join app.integrations i on i.id = x.integration_id and i.location_id = x.location_id
        join app.integrations cur on cur.id = s.integration_id and cur.location_id = s.location_id
       where x.location_id = s.location_id and x.provider = s.provider and x.record_type = s.record_type
         and x.record_id = s.record_id and x.action = 'create' and i.external_id = cur.external_id
       order by (x.status = 'synced') desc, x.created_at desc limit 1;
    end if;
    if cs.id is null and rec is not null and not coalesce(erased, false) and exists (
         select 1 from app.integration_syncs x
          where x.location_id = s.location_id and x.provider = s.provider and x.record_type = s.record_type
            and x.record_id = s.record_id and x.action = 'create') then
      insert into app.integration_syncs (location_id, integration_id, provider, record_type, record_id, action)
      values (s.location_id, s.integration_id, s.provider, s.record_type, s.record_id, 'create')
      on conflict (location_id, integration_id, record_type, record_id, action) where action = 'create' do nothing
      returning * into cs;
      if cs.id is not null then
        perform app.enqueue('integration_sync', jsonb_build_object('sync_id', cs.id, 'integration_id', cs.integration_id), null, 'integration_sync:' || cs.id);
      end if;
    end if;
  end if;
  return jsonb_build_object('id', s.id, 'location_id', s.location_id, 'integration_id', s.integration_id, 'provider', s.provider,
    'record_type', s.record_type, 'record_id', s.record_id, 'action', s.action, 'attempts', s.attempts,
    'tried_before', s.attempts > 1 or s.attempts_before_retry > 0, 'remote', s.remote,
    'external_id', s.external_id, 'record', rec, 'erased', coalesce(erased, false), 'timezone', loc.timezone, 'business', loc.name,
    'create_remote', cs.remote, 'create_status', cs.status, 'create_error', cs.last_error,
    'create_next_attempt_at', case when cs.status = 'pending' then app.iso(cs.next_attempt_at) end);
end
$function$;
alter function app.integration_sync_claim(uuid,integer) owner to switchboard_system;
comment on function app.integration_sync_claim(uuid,integer) is E'Worker: claims a due pending sync of a connected integration for lease_seconds (counting the attempt) and returns it with the record to write (booking with its customer), whether its personal data was erased, whether it was attempted before (tried_before, also across a manual retry), the location''s time zone, and for an update the record''s create sync (remote ids, status, last error, next attempt): this connection''s, else one of an earlier connection of the same account, else (the create went through another account) a create added through this connection and queued (docs/integrations.md "Order"). {busy, id, integration_id} when another sync of the same connection holds a lease (one in flight per connection). Null when not due, leased elsewhere, finished or its connection is not connected. Definer: worker-side read across locations, and writes to the sync log and the queue the API role has no right on.';
revoke execute on function app.integration_sync_claim(uuid,integer) from public;

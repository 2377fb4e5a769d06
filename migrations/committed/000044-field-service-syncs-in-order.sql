--! Previous: sha1:06ddc4eab440811c03c582a31b6b8fc4db91fc79
--! Hash: sha1:24af0a6655d5ddf01304484109bf4079f7b01e7b
--! Message: field-service syncs in order

-- Field-service syncs: one in flight per connection, a retried sync looks before it creates, an
-- update waits for its create, a disconnect fails the waiting syncs, an erased record is never
-- written (docs/integrations.md).

alter table app.integration_syncs add column if not exists attempts_before_retry integer default 0 not null;
comment on column app.integration_syncs.attempts_before_retry is E'Attempts made before the last POST …/syncs/{id}/retry (attempts counts since it): a sync attempted before looks for the remote record before creating one (docs/integrations.md "Exactly once").';

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
comment on function app.integration_sync_claim(uuid,integer) is E'Worker: claims a due pending sync of a connected integration for lease_seconds (counting the attempt) and returns it with the record to write (booking with its customer), whether its personal data was erased, whether it was attempted before (tried_before, also across a manual retry), the location''s time zone, and for an update the record''s create sync (remote ids, status, last error, next attempt). {busy, id, integration_id} when another sync of the same connection holds a lease (one in flight per connection). Null when not due, leased elsewhere, finished or its connection is not connected. Definer: worker-side read across locations.';
revoke execute on function app.integration_sync_claim(uuid,integer) from public;

CREATE OR REPLACE FUNCTION app.integration_sync_finish(sync_id uuid, outcome text, external_id text, error text, retry_in_seconds integer)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
declare
  s app.integration_syncs;
begin
  if outcome not in ('synced', 'failed', 'retry', 'wait', 'defer') then
    perform app.raise('SB400', format('Unknown sync outcome %s', outcome));
  end if;
  update app.integration_syncs x
     set status = case outcome when 'synced' then 'synced' when 'failed' then 'failed' else 'pending' end,
         external_id = coalesce(integration_sync_finish.external_id, x.external_id),
         last_error = case when outcome = 'synced' then null else left(error, 2000) end,
         next_attempt_at = case when outcome in ('retry', 'defer') then now() + make_interval(secs => retry_in_seconds) else x.next_attempt_at end,
         -- 'wait': the connection cannot be used (expired); 'defer': an update whose create has not
         -- synced yet. Neither counts the attempt.
         attempts = case when outcome in ('wait', 'defer') then greatest(x.attempts - 1, 0) else x.attempts end,
         lease_until = null
   where x.id = integration_sync_finish.sync_id
     -- A sync failed meanwhile (its connection was disconnected) stays failed unless this attempt wrote it.
     and (x.status = 'pending' or outcome = 'synced')
  returning * into s;
  if s.id is null then return null; end if;
  update app.integrations i
     set last_synced_at = case when outcome = 'synced' then now() else i.last_synced_at end,
         last_error = case when outcome = 'synced' then null when outcome in ('wait', 'defer') then i.last_error else s.last_error end
   where i.id = s.integration_id and i.location_id = s.location_id;
  if outcome in ('retry', 'defer') then
    perform app.enqueue('integration_sync', jsonb_build_object('sync_id', s.id, 'integration_id', s.integration_id), s.next_attempt_at, 'integration_sync:' || s.id);
  end if;
  return jsonb_build_object('status', s.status, 'attempts', s.attempts, 'next_attempt_at', app.iso(s.next_attempt_at));
end
$function$;
alter function app.integration_sync_finish(uuid,text,text,text,integer) owner to switchboard_system;
comment on function app.integration_sync_finish(uuid,text,text,text,integer) is E'Worker: records an attempt''s outcome: synced (remote id), failed (the provider''s validation message, not retried), retry (queued again after retry_in_seconds), wait (connection expired; stays pending until re-authorised) or defer (an update whose create has not synced: queued again after retry_in_seconds, the attempt not counted). A sync no longer pending (failed by a disconnect meanwhile) takes only synced. The integration''s last_synced_at and last_error follow. Definer: worker-side write.';
revoke execute on function app.integration_sync_finish(uuid,text,text,text,integer) from public;

CREATE OR REPLACE FUNCTION api.integration_sync_retry(token_hash text, location_ref text, provider text, sync_id uuid)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'integrations:write');
  s app.integration_syncs;
  was app.integrations;
  now_on app.integrations;
begin
  select * into s from app.integration_syncs x where x.id = sync_id and x.provider = integration_sync_retry.provider for update;
  if s.id is null then return null; end if;
  if s.status <> 'failed' then
    perform app.raise('SB409', format('Only a failed sync can be retried; this one is %s', s.status), jsonb_build_object('status', s.status));
  end if;
  select * into was from app.integrations i where i.id = s.integration_id and i.location_id = s.location_id;
  if was.status = 'disconnected' then
    -- Its connection was disconnected: the retry goes through the provider's current connection of
    -- the location (a reconnection is a new integration), without the old remote ids when the
    -- account is another.
    select * into now_on from app.integrations i
     where i.location_id = s.location_id and i.provider = s.provider and i.status in ('connected', 'expired')
     order by (i.status = 'connected') desc, i.created_at desc limit 1;
    if now_on.id is null then
      perform app.raise('SB409', format('The %s integration was disconnected; connect it again, then retry', s.provider),
                        jsonb_build_object('status', s.status, 'integration_status', was.status));
    end if;
    if s.action = 'create' and exists (
         select 1 from app.integration_syncs o
          where o.location_id = s.location_id and o.integration_id = now_on.id and o.record_type = s.record_type
            and o.record_id = s.record_id and o.action = 'create') then
      perform app.raise('SB409', format('This %s already has a sync through the new %s connection', s.record_type, s.provider),
                        jsonb_build_object('status', s.status));
    end if;
    update app.integration_syncs x
       set integration_id = now_on.id,
           remote = case when now_on.external_id is not distinct from was.external_id then x.remote else '{}' end
     where x.id = s.id and x.location_id = s.location_id;
  end if;
  -- attempts counts from the retry (a fresh schedule); the attempts before it are kept, so the
  -- next attempt looks for a record an earlier one may have created before it creates one.
  update app.integration_syncs x
     set status = 'pending', attempts_before_retry = x.attempts_before_retry + x.attempts, attempts = 0,
         next_attempt_at = now(), lease_until = null
   where x.id = s.id and x.location_id = s.location_id
  returning * into s;
  perform app.integration_sync_requeue(s.id, s.integration_id);
  return app.integration_sync_json(s);
end
$function$;
comment on function api.integration_sync_retry(text,text,text,uuid) is E'POST integrations/{provider}/syncs/{id}/retry: a failed sync becomes pending again with a fresh retry schedule (attempts from 0, the earlier ones kept in attempts_before_retry so it looks before it creates; SB409 otherwise); it runs when its connection is connected. A sync of a disconnected connection moves to the provider''s current connection of the location (SB409 when there is none).';
revoke execute on function api.integration_sync_retry(text,text,text,uuid) from public;
grant execute on function api.integration_sync_retry(text,text,text,uuid) to switchboard_api;

CREATE OR REPLACE FUNCTION api.integration_disconnect(token_hash text, location_ref text, provider text)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'integrations:write');
  old_secrets bytea;
  i app.integrations;
begin
  select x.secrets_ciphertext into old_secrets from app.integrations x
   where x.location_id = a.location_id and x.provider = integration_disconnect.provider
     and (x.status = 'connected' or (x.status in ('expired', 'error') and x.secrets_ciphertext is not null))
   order by (x.status = 'connected') desc, x.created_at desc limit 1 for update;
  update app.integrations t
     set status = 'disconnected', disconnected_at = now(), access_token = null, refresh_token = null, secrets_ciphertext = null
   where t.id = (select y.id from app.integrations y
                  where y.location_id = a.location_id and y.provider = integration_disconnect.provider
                    and (y.status = 'connected' or (y.status in ('expired', 'error') and y.secrets_ciphertext is not null))
                  order by (y.status = 'connected') desc, y.created_at desc limit 1)
     and t.location_id = a.location_id
  returning * into i;
  if i.id is null then return null; end if;
  -- Nothing will run its waiting syncs now: they fail, and can be retried after reconnecting.
  update app.integration_syncs x
     set status = 'failed', last_error = 'integration disconnected', lease_until = null
   where x.location_id = a.location_id and x.integration_id = i.id and x.status = 'pending';
  return jsonb_build_object('integration', app.integration_json(i), 'secrets_ciphertext', encode(old_secrets, 'base64'));
end
$function$;
comment on function api.integration_disconnect(text,text,text) is E'DELETE integrations/{provider}: marks the connected one (or an expired one still holding secrets) disconnected, erases its secrets and fails its pending syncs (integration disconnected; retried after reconnecting); returns the record and, for the route only, the erased ciphertext so it can revoke at the provider. 404 when none.';
revoke execute on function api.integration_disconnect(text,text,text) from public;
grant execute on function api.integration_disconnect(text,text,text) to switchboard_api;

--! Previous: sha1:22c0741d707b5aa1eed3eec2f8bc7215fb905382
--! Hash: sha1:d06380be7f8d04315bda01c7ef91572145c9360a
--! Message: The API role's queue doors reach only its own tenant

create or replace function app.webhook_enqueue(delivery_id uuid, location_id uuid, due timestamp with time zone)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
declare
  cur timestamptz;
begin
  select w.next_attempt_at into cur from app.webhook_deliveries w
   where w.id = webhook_enqueue.delivery_id and w.location_id = webhook_enqueue.location_id
     and w.status = 'pending'
     -- The caller's tenant's row only; with none pinned, only for the worker and the owner's own
     -- functions: a connection of the API role always has its tenant pinned by app.authorize.
     and w.location_id = coalesce(app.current_location_id(),
                                  case when current_setting('role', true) = 'switchboard_api' then null else w.location_id end);
  if not found then return; end if;
  if due is not null and cur is distinct from due then
    update app.webhook_deliveries w set next_attempt_at = due where w.id = webhook_enqueue.delivery_id;
  end if;
  if coalesce(due, cur, now()) <= now() then
    perform app.webhook_wake();
  end if;
end
$function$;
alter function app.webhook_enqueue(uuid,uuid,timestamp with time zone) owner to switchboard_system;
comment on function app.webhook_enqueue(uuid,uuid,timestamp with time zone) is E'Schedules one pending attempt of the caller''s tenant at `due` (now or later) and wakes the delivery engines when it is due (unless the transaction defers its wake-ups to app.flush_deferred_jobs()); no-op for any other row. SECURITY DEFINER (switchboard_system) so API transactions (resume, retry) can schedule without rights on the worker''s wake-up channel or other tenants'' rows.';
revoke execute on function app.webhook_enqueue(uuid,uuid,timestamp with time zone) from public;
grant execute on function app.webhook_enqueue(uuid,uuid,timestamp with time zone) to switchboard_api;

create or replace function app.integration_sync_requeue(sync_id uuid, integration_id uuid)
 RETURNS void
 LANGUAGE sql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
  -- Only a sync of the caller's tenant (the retry route has pinned it): no job for another's.
  select app.enqueue('integration_sync', jsonb_build_object('sync_id', s.id, 'integration_id', s.integration_id), null, 'integration_sync:' || s.id)
    from app.integration_syncs s
   where s.id = integration_sync_requeue.sync_id and s.integration_id = integration_sync_requeue.integration_id
     and s.location_id = app.current_location_id()
$function$;
alter function app.integration_sync_requeue(uuid,uuid) owner to switchboard_system;
comment on function app.integration_sync_requeue(uuid,uuid) is E'Queues a sync''s job (the retry route), for a sync of the tenant the transaction has pinned only. Definer: the API role has no right on the queue; only adds a job.';
revoke execute on function app.integration_sync_requeue(uuid,uuid) from public;
grant execute on function app.integration_sync_requeue(uuid,uuid) to switchboard_api;

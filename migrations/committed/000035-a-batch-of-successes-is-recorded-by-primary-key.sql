--! Previous: sha1:11b4a67d2797a840898686dd8e8bbfac180ac6b8
--! Hash: sha1:4a3c5bd549f0fda8e5ffe72c12eda9cc77530f5b
--! Message: a batch of successes is recorded by primary key

-- A batch of successes recorded by primary key (docs/performance.md, "Performance after a
-- realistic history: the fourth round"): the update joined the outcomes' recordset alone, and a
-- plan made on statistics that showed few pending attempts read every pending attempt for each
-- outcome once a burst or a drain had queued thousands.
CREATE OR REPLACE FUNCTION app.webhook_record_batch(results jsonb, retry_delays integer[], disable_after_failures integer, disable_after_seconds integer)
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
    with res as (
      select x.delivery_id as id, x.result
        from jsonb_to_recordset(results) x(delivery_id uuid, result jsonb)
    ), upd as (
      update app.webhook_deliveries w
         set status = 'delivered',
             response_status = (res.result ->> 'response_status')::int,
             response_body = res.result ->> 'response_body',
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

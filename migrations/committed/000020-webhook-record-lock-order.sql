--! Previous: sha1:6b018cd965913ff4bb21f95495ed5a5130994406
--! Hash: sha1:72dec85745389f7a7a0860c72d9c98c02564acde
--! Message: webhook record lock order

-- app.webhook_record locks the endpoint before the attempt, in the order DELETE of an endpoint
-- takes them (docs/webhooks.md, "Pause and delete").
CREATE OR REPLACE FUNCTION app.webhook_record(delivery_id uuid, result jsonb, retry_delays integer[], disable_after_failures integer, disable_after_seconds integer)
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
  update app.webhook_deliveries w
     set status = case when ok then 'delivered' when next_at is null then 'dead' else 'failed' end,
         response_status = http_status,
         response_body = result ->> 'response_body',
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

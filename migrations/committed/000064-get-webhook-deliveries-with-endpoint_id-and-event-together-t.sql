--! Previous: sha1:bb66f84c28e57254b0ea893ec9046d4e1630deed
--! Hash: sha1:b864ee4fb3fac31c334cd3fd21e1afc5868dd7af
--! Message: GET webhook-deliveries with endpoint_id and event together tests the event in the endpoint's index

-- GET webhook-deliveries with endpoint_id and event together (docs/performance.md, "Filters in
-- combination"). Each had its index, and neither held the other's column: in 2.5 M attempts, an
-- emergency-only endpoint's attempts of call.ended (none) fetched 78,000 attempts to test each
-- (85 ms warm, 0.9 s cold), and a disabled endpoint's attempts of lead.created walked the event
-- index past every newer lead.created (200 ms warm, 1.2 s cold). Now the endpoint's index holds
-- event and status, the filtered page reads its keys first (the columns that index holds, so an
-- index-only scan can answer) and then its attempts by key, and that statement is planned for
-- each request's values, as api.calls_list's (000063). The index is rebuilt here: writes to
-- app.webhook_deliveries wait meanwhile (3.2 s at 2.5 M attempts).

drop index if exists app.webhook_deliveries_endpoint_created_idx;
create index webhook_deliveries_endpoint_created_idx on app.webhook_deliveries (endpoint_id, location_id, created_at desc, id desc)
  include (event, status);

create or replace function api.webhook_deliveries_list(token_hash text, location_ref text, filters jsonb, page jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'webhooks:read');
  lim int := app.page_limit(page);
  after app.page_cursor := app.page_after(page);
  f_endpoint uuid := (filters ->> 'endpoint_id')::uuid;
  f_event_id uuid := (filters ->> 'event_id')::uuid;
  f_type text := filters ->> 'event';
  f_status text := filters ->> 'status';
  plan_mode text := current_setting('plan_cache_mode');
  result jsonb;
begin
  if f_endpoint is null and f_event_id is null and f_type is null and f_status is null then
    -- Unfiltered pages: planned once per connection (see api.calls_list).
    return app.page_result(array(
      select app.page_item(d.created_at, d.id, app.webhook_delivery_json(d)) from app.webhook_deliveries d
       where (d.created_at, d.id) < (select after.created_at, after.id)
       order by d.created_at desc, d.id desc limit (select lim + 1)), lim);
  end if;
  -- Filtered pages, planned for each request's values (see api.calls_list): the page's keys from
  -- the status, event or endpoint index (the endpoint's holds event and status, so an endpoint's
  -- attempts of one event type are tested in the index), then the page's attempts by key.
  perform set_config('plan_cache_mode', 'force_custom_plan', true);
  result := app.page_result(array(
    select app.page_item(d.created_at, d.id, app.webhook_delivery_json(d))
      from (select k.id, k.created_at from app.webhook_deliveries k
             where app.before_cursor(k.created_at, k.id, after)
               and (f_endpoint is null or k.endpoint_id = f_endpoint)
               and (f_event_id is null or k.event_id = f_event_id)
               and (f_type is null or k.event = f_type)
               and (f_status is null or k.status = f_status)
             order by k.created_at desc, k.id desc limit lim + 1) w
      join app.webhook_deliveries d on d.id = w.id and d.location_id = a.location_id
     order by d.created_at desc, d.id desc), lim);
  perform set_config('plan_cache_mode', plan_mode, true);
  return result;
end
$function$;

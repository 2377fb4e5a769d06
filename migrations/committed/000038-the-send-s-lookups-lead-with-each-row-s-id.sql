--! Previous: sha1:97f89034d69f1dac71fde3b2093d469f9798e7cc
--! Hash: sha1:6501fe4372894317094136ede28a9e7e6881eb82
--! Message: the send's lookups lead with each row's id

CREATE OR REPLACE FUNCTION app.notification_for_send(ids uuid[])
 RETURNS json
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
 SET plan_cache_mode TO 'force_generic_plan'
 SET enable_seqscan TO 'off'
 SET enable_bitmapscan TO 'off'
AS $function$
begin
  -- plpgsql, not sql: its plan is kept for the session (a SQL function's body is planned on every call).
  return (select coalesce(json_agg(jsonb_build_object(
    'id', n.id, 'location_id', n.location_id, 'channel', n.channel, 'provider', n.provider,
    'recipient', n.recipient, 'status', n.status, 'attempts', n.attempts,
    'target_url', case when i.status = 'connected' then i.webhook_url end,
    'integration_status', i.status,
    'location', jsonb_build_object('name', l.name, 'timezone', l.timezone, 'service_phone', l.service_phone),
    'event', case when e.id is null
                  then jsonb_build_object('event', n.event, 'location_id', n.location_id,
                                          'created_at', app.iso(n.created_at), 'data', coalesce(n.data, '{}'::jsonb))
                  else jsonb_build_object('event', e.type, 'location_id', e.location_id,
                                          'created_at', app.iso(e.created_at), 'data', e.data) end,
    -- The event data masks caller phones; people being told to call back need the real number.
    'callback_phone', coalesce(
      case when e.type like 'call.%' then (select c.caller_phone from app.calls c
                                            where c.id = app.uuid_or_null(e.data ->> 'id') and (c.location_id = n.location_id) is true) end,
      case when e.type like 'lead.%' then e.data ->> 'phone' end,
      case when e.type like 'booking.%' then (
        select coalesce(ld.phone, cu.phone) from (select 1) one
          left join app.leads ld on ld.id = app.uuid_or_null(e.data ->> 'lead_id') and (ld.location_id = n.location_id) is true
          left join app.customers cu on cu.id = app.uuid_or_null(e.data ->> 'customer_id') and (cu.location_id = n.location_id) is true) end,
      case when e.type = 'spam.blocked' then null end)) order by x.o), '[]'::json)
    -- Each row is found by the leading column of its primary key, one lateral probe a notification
    -- (`limit 1` keeps each one a probe), and its location is checked as `(… = …) is true`, which
    -- no index can serve: planned once per session while the tables were nearly empty, plain joins
    -- read whole indexes of the notifications and the events, and `location_id = …` let the planner
    -- walk a location's events or calls by an index that leads with it, for every notification of a
    -- burst (docs/performance.md, "Performance after a realistic history: the fifth round").
    from unnest(ids) with ordinality x(id, o)
    cross join lateral (select n.* from app.notifications n where n.id = x.id limit 1) n
    cross join lateral (select l.name, l.timezone, l.service_phone from app.locations l where l.id = n.location_id limit 1) l
    left join lateral (select e.id, e.type, e.location_id, e.created_at, e.data from app.events e
                        where e.id = n.event_id and (e.location_id = n.location_id) is true limit 1) e on true
    left join lateral (select i.status, i.webhook_url from app.integrations i
                        where i.id = n.integration_id and (i.location_id = n.location_id) is true limit 1) i on true);
end
$function$;
alter function app.notification_for_send(uuid[]) owner to switchboard_system;
comment on function app.notification_for_send(uuid[]) is E'Everything the engine needs to send these notifications, as a JSON array in the order of ids: channel, recipient, target URL (only while the integration is connected), the body (the event''s, or the notification''s own data for an operational one), location and the unmasked callback number.';
revoke execute on function app.notification_for_send(uuid[]) from public;

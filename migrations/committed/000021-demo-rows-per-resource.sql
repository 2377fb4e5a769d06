--! Previous: sha1:72dec85745389f7a7a0860c72d9c98c02564acde
--! Hash: sha1:ef520e9804aaeb6d885b7da86576d3f8473b424f
--! Message: demo rows per resource

-- ==== demo rows of every resource ====
-- admin.demo_seed_finish runs each app_private.demo_seed__<table>(uuid) a resource's migration
-- adds (migrations/CONVENTIONS.md, "Adding a tenant table").
CREATE OR REPLACE FUNCTION admin.demo_seed_finish(location_ref text)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
declare
  loc uuid := admin.resolve_location(location_ref);
  n_leads int;
  n_bookings int;
  hook regproc;
begin
  perform set_config('app.location_id', loc::text, true);
  perform set_config('app.seeding', 'on', true);
  -- Statistics first: the calls just seeded may be unknown to them (docs/performance.md).
  perform app_private.demo_seed_analyze();

  update app.customers cu
     set first_call_at = s.first_at, last_call_at = s.last_at, call_count = s.n
    from (select customer_id, min(started_at) first_at, max(started_at) last_at, count(*)::int n
            from app.calls where location_id = loc group by customer_id) s
   where cu.id = s.customer_id;
  -- Before leads and bookings are written: the foreign-key actions of this delete then find no
  -- row of this run to walk.
  delete from app.customers cu where cu.location_id = loc and cu.call_count = 0
     and not exists (select 1 from app.calls c where c.customer_id = cu.id);

  insert into app.leads (location_id, call_id, customer_id, name, phone, address, service_type,
                         urgency_level, estimated_value, status, status_changed_at, created_at, updated_at)
  select c.location_id, c.id, c.customer_id, c.caller_name, c.caller_phone, c.caller_address, c.service_type,
         c.urgency_level, c.estimated_value,
         case when c.outcome = 'booked' then 'booked'
              else (array['new','new','contacted','closed','lost'])[1 + floor(random() * 5)::int] end,
         c.ended_at, c.ended_at, c.ended_at
    from app.calls c
   where c.location_id = loc and c.outcome in ('booked', 'lead', 'transferred')
     and not exists (select 1 from app.leads l where l.call_id = c.id);
  get diagnostics n_leads = row_count;

  insert into app.bookings (location_id, call_id, lead_id, customer_id, status, scheduled_date,
                            scheduled_time, service_type, address, created_at, updated_at)
  select c.location_id, c.id, l.id, c.customer_id,
         case when c.appointment_date < current_date then 'completed' else 'scheduled' end,
         c.appointment_date, c.appointment_time, c.service_type, c.caller_address, c.ended_at, c.ended_at
    from app.calls c join app.leads l on l.call_id = c.id
   where c.location_id = loc and c.outcome = 'booked' and c.appointment_date is not null
     and not exists (select 1 from app.bookings b where b.call_id = c.id);
  get diagnostics n_bookings = row_count;

  -- Every other resource's demo rows: each app_private.demo_seed__<table>(location uuid), in name
  -- order, so a new tenant table gets demo rows (and test/db/rls.test.ts its rows) from its own
  -- migration (migrations/CONVENTIONS.md, "Adding a tenant table"). Only the migrating role
  -- creates functions in app_private.
  for hook in
    select p.oid::regproc from pg_catalog.pg_proc p join pg_catalog.pg_namespace n on n.oid = p.pronamespace
     where n.nspname = 'app_private' and p.proname like 'demo\_seed\_\_%'
       and p.pronargs = 1 and p.proargtypes[0] = 'uuid'::regtype
     order by p.proname
  loop
    execute pg_catalog.format('select %s($1)', hook) using loc;
  end loop;

  return jsonb_build_object(
    'location_id', loc, 'leads', n_leads, 'bookings', n_bookings,
    'calls', (select count(*) from app.calls where location_id = loc),
    'customers', (select count(*) from app.customers where location_id = loc));
end
$function$;
alter function admin.demo_seed_finish(text) owner to switchboard_system;
comment on function admin.demo_seed_finish(text) is E'Demo seed, step 3: customer call statistics (customers no call picked are deleted), then leads and bookings from the seeded calls, then each resource''s app_private.demo_seed__<table>(location); statistics are refreshed first (app_private.demo_seed_analyze).';
revoke execute on function admin.demo_seed_finish(text) from public;

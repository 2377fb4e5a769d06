--! Previous: sha1:d715aafa28310b4fa1c03147df52b46dd654d169
--! Hash: sha1:aeebf02b25b66593ac40901bb9a2093785069e3c
--! Message: bulk paths after a history

-- ==== Performance after a realistic history ====
-- The demo seeder's last step deleted the customers no seeded call picked after creating the
-- run's leads and bookings. Each deleted customer fires the `on delete set null (customer_id)`
-- actions of calls, leads and bookings, whose query (`… where $1 = location_id and $2 =
-- customer_id`) PostgreSQL plans with that customer's values. On statistics taken before the
-- location had rows (its id absent from the most-common-values list of location_id, which covers
-- every row), the location is estimated at one row and a location-led index wins; it then reads
-- every row of the location per deleted customer (docs/performance.md, "Seeding after a history").
-- Now the step refreshes the statistics of the four tables first (the rows of this transaction
-- count), and deletes unused customers before it writes leads and bookings.

create or replace function app_private.demo_seed_analyze()
 returns void
 language plpgsql
 security definer
 set search_path to pg_catalog, public, pg_temp
as $$
begin
  -- Only the columns the step's statements and its foreign-key actions filter on: a full ANALYZE
  -- of these tables also samples the transcripts and the expression indexes, seconds for nothing.
  analyze app.calls (location_id, customer_id, outcome), app.customers (location_id, call_count),
          app.leads (location_id, customer_id, call_id), app.bookings (location_id, customer_id, call_id);
end
$$;
comment on function app_private.demo_seed_analyze() is E'Demo seed (admin.demo_seed_finish): ANALYZE of the key columns of calls, customers, leads and bookings, so that the step''s own statements and the foreign-key actions of its deletes are planned on statistics that know the seeded location. Security definer, owned by the migrating role: only a table''s owner may ANALYZE it before PostgreSQL 17 (docs/decisions.md, "Performance after a realistic history").';
revoke execute on function app_private.demo_seed_analyze() from public;
grant execute on function app_private.demo_seed_analyze() to switchboard_system;

create or replace function admin.demo_seed_finish(location_ref text)
 returns jsonb
 language plpgsql
 security definer
 set search_path to pg_catalog, public, pg_temp
as $function$
declare
  loc uuid := admin.resolve_location(location_ref);
  n_leads int;
  n_bookings int;
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

  return jsonb_build_object(
    'location_id', loc, 'leads', n_leads, 'bookings', n_bookings,
    'calls', (select count(*) from app.calls where location_id = loc),
    'customers', (select count(*) from app.customers where location_id = loc));
end
$function$;
alter function admin.demo_seed_finish(text) owner to switchboard_system;
comment on function admin.demo_seed_finish(text) is E'Demo seed, step 3: customer call statistics (customers no call picked are deleted), then leads and bookings from the seeded calls; statistics are refreshed first (app_private.demo_seed_analyze).';
revoke execute on function admin.demo_seed_finish(text) from public;

-- Retention's deletes have the same plan shape: deleting an event runs the `on delete cascade`
-- actions of webhook_deliveries and notifications (`… where $1 = location_id and $2 = event_id`),
-- deleting a notification that of notification_log. For a location the statistics do not know,
-- the custom plan of each action walks the location's rows through a location-led index, per
-- deleted row. The generic plan estimates from n_distinct and takes the foreign key's own index,
-- whatever the statistics say about one location; the two deletes run with it.
create or replace function app.retention_prune(kind text, retention_days integer, batch_size integer)
 returns integer
 language plpgsql
 security definer
 set search_path to pg_catalog, public, pg_temp
as $function$
declare
  cutoff timestamptz := now() - make_interval(days => retention_days);
  n int;
  plan_mode text := current_setting('plan_cache_mode');
begin
  if retention_days < 1 or batch_size < 1 then
    perform app.raise('SB400', 'retention_days and batch_size must be positive');
  end if;
  if kind = 'deliveries' then
    delete from app.webhook_deliveries w using (
      select x.id from app.locations l cross join lateral (
        select d.id from app.webhook_deliveries d
         where d.location_id = l.id and d.created_at < cutoff and d.status <> 'pending'
         order by d.created_at, d.id limit batch_size
           for update of d skip locked) x
       limit batch_size) s
     where w.id = s.id;
  elsif kind = 'notifications' then
    -- Generic plans for the cascade to notification_log (above); back to the caller's mode after.
    perform set_config('plan_cache_mode', 'force_generic_plan', true);
    delete from app.notifications t using (
      select x.id from app.locations l cross join lateral (
        select n.id from app.notifications n
         where n.location_id = l.id and n.created_at < cutoff and n.status <> 'pending'
         order by n.created_at, n.id limit batch_size
           for update of n skip locked) x
       limit batch_size) s
     where t.id = s.id;
    get diagnostics n = row_count;
    perform set_config('plan_cache_mode', plan_mode, true);
    return n;
  elsif kind = 'events' then
    -- Generic plans for the cascades to webhook_deliveries and notifications (above).
    perform set_config('plan_cache_mode', 'force_generic_plan', true);
    delete from app.events t using (
      select x.id from app.locations l cross join lateral (
        select e.id from app.events e
         where e.location_id = l.id and e.created_at < cutoff
           and not exists (select 1 from app.webhook_deliveries d where d.event_id = e.id)
           and not exists (select 1 from app.notifications n where n.event_id = e.id)
         order by e.created_at, e.id limit batch_size
           for update of e skip locked) x
       limit batch_size) s
     where t.id = s.id;
    get diagnostics n = row_count;
    perform set_config('plan_cache_mode', plan_mode, true);
    return n;
  -- per-location caller-data windows (app.privacy_settings; docs/privacy.md)
  elsif kind like 'privacy\_%' then
    return app.privacy_prune(substr(kind, 9), batch_size);
  -- Idempotency-Key answers after 24 h, rate-limit counters of past minutes (app.idempotency_prune)
  elsif kind in ('idempotency_keys', 'rate_limits') then
    return app.idempotency_prune(kind, batch_size);
  else
    perform app.raise('SB400', format('Unknown retention kind %s', kind));
  end if;
  get diagnostics n = row_count;
  return n;
end
$function$;
alter function app.retention_prune(text,integer,integer) owner to switchboard_system;
comment on function app.retention_prune(text,integer,integer) is E'Worker (prune_deliveries): deletes one batch of settled deliveries | notifications (with their log) | events older than the retention window; a privacy_* kind clears one batch of caller data past its location''s window instead (app.privacy_prune); idempotency_keys | rate_limits drop Idempotency-Key answers older than 24 hours and rate-limit counters of past minutes (app.idempotency_prune); returns the count. The notification and event deletes run with generic plans, so their foreign-key cascades use the key''s index whatever the statistics know of a location (docs/performance.md, "Seeding after a history").';
revoke execute on function app.retention_prune(text,integer,integer) from public;

--! Previous: sha1:3c0b94cc59fcc6dc5111331e7ed3ca4917948963
--! Hash: sha1:f0eebb16105b5652e2048b16766879204cbde756
--! Message: demo seeding

-- Demo seeding for the CLI (`demo seed`): history, not live traffic (app.seeding suppresses events).

create function admin.demo_seed_prepare(location_ref text, customers integer)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
declare
  loc uuid := admin.resolve_location(location_ref);
  first_names text[] := array['Maria','James','Linda','Robert','Patricia','Michael','Jennifer','David','Susan','Carlos','Aisha','Wei','Priya','Tom','Grace','Diego'];
  last_names text[] := array['Garcia','Smith','Johnson','Brown','Nguyen','Miller','Davis','Lopez','Wilson','Patel','Kim','Clark','Lewis','Young','Hall','Rivera'];
  streets text[] := array['Oak St','Maple Ave','Pine Rd','Cedar Ln','Elm St','Lakeview Dr','Hillcrest Blvd','Sunset Ave'];
  base bigint;
begin
  perform set_config('app.location_id', loc::text, true);
  perform set_config('app.seeding', 'on', true);
  -- Distinct number ranges per location keep (location_id, phone) unique across reruns.
  select coalesce(max(substr(phone, 3)::bigint), 2020000000) + 1 into base
    from app.customers where location_id = loc and phone like '+1202%';
  insert into app.customers (location_id, phone, name, email, address)
  select loc, '+1' || (base + g)::text,
         first_names[1 + (g % 16)] || ' ' || last_names[1 + ((g / 16) % 16)],
         case when g % 3 = 0 then lower(first_names[1 + (g % 16)]) || '.' || lower(last_names[1 + ((g / 16) % 16)]) || g || '@example.com' end,
         (100 + g % 9800)::text || ' ' || streets[1 + (g % 8)]
    from generate_series(0, customers - 1) g;

  if not exists (select 1 from app.faqs where location_id = loc) then
    insert into app.faqs (location_id, question, answer, position, asked_count) values
      (loc, 'Do you charge for estimates?', 'Estimates are free for replacements; diagnostic visits are $89, credited toward the repair.', 1, 42),
      (loc, 'Do you offer emergency service?', 'Yes, 24/7 for no-heat, no-cooling and active leaks.', 2, 37),
      (loc, 'Which areas do you serve?', 'The metro area and suburbs within 30 miles.', 3, 18),
      (loc, 'Do you offer financing?', 'Yes, 0% for 12 months on approved credit for new systems.', 4, 11);
  end if;
  if not exists (select 1 from app.pricebook_items where location_id = loc) then
    insert into app.pricebook_items (location_id, service_name, price, note, position) values
      (loc, 'Diagnostic visit', '$89', 'Credited toward the repair', 1),
      (loc, 'AC tune-up', '$129-$159', 'Spring special', 2),
      (loc, 'Furnace repair', '$150-$650', 'Most repairs same day', 3),
      (loc, 'Water heater replacement', '$1,400-$2,800', '40-50 gal, installed', 4),
      (loc, 'Drain cleaning', '$175-$325', null, 5);
  end if;
  if not exists (select 1 from app.business_hours where location_id = loc) then
    insert into app.business_hours (location_id, day, open, close)
    select loc, d, '08:00', '18:00' from generate_series(1, 5) d
    union all select loc, 6, '09:00', '14:00';
  end if;
  return jsonb_build_object('location_id', loc, 'customers', customers);
end
$function$;
alter function admin.demo_seed_prepare(text,integer) owner to switchboard_system;
comment on function admin.demo_seed_prepare(text,integer) is E'Demo seed, step 1: customers, FAQs, pricebook and business hours.';

create function admin.demo_seed_calls(location_ref text, calls integer, days integer)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
declare
  loc uuid := admin.resolve_location(location_ref);
  tz text;
  services text[] := array['AC repair','Furnace repair','Water heater','Drain cleaning','Leak repair','Maintenance','Thermostat install','Duct cleaning'];
  values_ numeric[] := array[350, 480, 1800, 240, 420, 149, 260, 520];
  cust uuid[];
  n int;
  open_minutes int4multirange;
begin
  perform set_config('app.location_id', loc::text, true);
  perform set_config('app.seeding', 'on', true);
  select timezone into tz from app.locations where id = loc;
  open_minutes := app_private.open_minutes(loc);
  cust := array(select id from app.customers where location_id = loc);
  n := cardinality(cust);
  if n = 0 then perform app.raise('SB400', 'Run demo_seed_prepare first'); end if;

  with raw as (
    select g, random() as r_outcome, random() as r_svc, random() as r_urg, random() as r_len,
           floor(random() * days)::int as day_ago,
           -- Most calls come in working hours; some at night and at weekends.
           case when random() < 0.8 then 7 + floor(random() * 12)::int else floor(random() * 24)::int end as hour,
           floor(random() * 60)::int as minute, floor(random() * 60)::int as second,
           cust[1 + floor(random() * n)::int] as customer_id
      from generate_series(1, calls) g
  ), shaped as (
    select r.*,
           case when r_outcome < 0.10 then 'spam' when r_outcome < 0.16 then 'dropped'
                when r_outcome < 0.44 then 'booked' when r_outcome < 0.74 then 'lead'
                when r_outcome < 0.84 then 'transferred' else 'other' end as outcome,
           1 + floor(r_svc * 8)::int as svc,
           case when r_urg > 0.96 then 5 when r_urg > 0.85 then 4 when r_urg > 0.6 then 3
                when r_urg > 0.3 then 2 else 1 end as urgency,
           ((date_trunc('day', now() at time zone tz) - make_interval(days => day_ago)
             + make_interval(hours => hour, mins => minute, secs => second)) at time zone tz) as started
      from raw r
  ), timed as (
    select s.*, least(s.started, now() - interval '1 minute') as started_at from shaped s
  )
  insert into app.calls (location_id, platform_call_id, customer_id, direction, caller_phone, caller_name,
                         caller_address, outcome, urgency_level, is_emergency, is_returning_customer,
                         started_at, ended_at, duration_sec, service_type, issue_summary, detected_intent,
                         estimated_value, appointment_date, appointment_time, disconnection_reason,
                         transcript, platform_status, finalized_at, created_at, after_hours)
  select loc, 'demo_' || replace(gen_random_uuid()::text, '-', ''), s.customer_id, 'inbound', c.phone,
         case when s.outcome in ('spam', 'dropped') then null else c.name end,
         case when s.outcome in ('booked', 'lead') then c.address end,
         s.outcome, case when s.outcome = 'spam' then 0 else s.urgency end,
         s.outcome <> 'spam' and s.urgency = 5, random() < 0.35,
         s.started_at,
         s.started_at + make_interval(secs => (case when s.outcome = 'dropped' then 4 else 45 + s.r_len * 400 end)::int),
         (case when s.outcome = 'dropped' then 4 else 45 + s.r_len * 400 end)::int,
         case when s.outcome in ('spam', 'dropped') then null else services[s.svc] end,
         case when s.outcome in ('spam', 'dropped') then null else 'Caller needs help with ' || lower(services[s.svc]) end,
         case when s.outcome = 'booked' then 'book_appointment' when s.outcome = 'spam' then 'spam'
              when s.outcome = 'transferred' then 'speak_to_human' else 'get_quote' end,
         case when s.outcome in ('booked', 'lead', 'transferred') then values_[s.svc] end,
         case when s.outcome = 'booked' then (s.started at time zone tz)::date + 1 + (s.g % 5) end,
         case when s.outcome = 'booked' then lpad((8 + s.g % 9)::text, 2, '0') || ':00' end,
         case s.outcome when 'transferred' then 'call_transfer' when 'spam' then 'marked_as_spam'
                        when 'dropped' then 'user_hangup' else 'agent_hangup' end,
         case when s.outcome in ('spam', 'dropped') then null
              else 'Agent: Thanks for calling, how can I help?' || chr(10) || 'User: I need help with ' || lower(services[s.svc]) || '.' end,
         'analyzed', s.started_at, s.started_at,
         app_private.after_hours(open_minutes, s.started_at at time zone tz)
    from timed s join app.customers c on c.id = s.customer_id;
  return jsonb_build_object('calls', calls);
end
$function$;
alter function admin.demo_seed_calls(text,integer,integer) owner to switchboard_system;
comment on function admin.demo_seed_calls(text,integer,integer) is E'Demo seed, step 2 (repeated): a batch of finalised calls spread over the last `days` days.';

create function admin.demo_seed_finish(location_ref text)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
declare
  loc uuid := admin.resolve_location(location_ref);
  n_leads int;
  n_bookings int;
begin
  perform set_config('app.location_id', loc::text, true);
  perform set_config('app.seeding', 'on', true);
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

  update app.customers cu
     set first_call_at = s.first_at, last_call_at = s.last_at, call_count = s.n
    from (select customer_id, min(started_at) first_at, max(started_at) last_at, count(*)::int n
            from app.calls where location_id = loc group by customer_id) s
   where cu.id = s.customer_id;
  delete from app.customers cu where cu.location_id = loc and cu.call_count = 0
     and not exists (select 1 from app.calls c where c.customer_id = cu.id);
  return jsonb_build_object(
    'location_id', loc, 'leads', n_leads, 'bookings', n_bookings,
    'calls', (select count(*) from app.calls where location_id = loc),
    'customers', (select count(*) from app.customers where location_id = loc));
end
$function$;
alter function admin.demo_seed_finish(text) owner to switchboard_system;
comment on function admin.demo_seed_finish(text) is E'Demo seed, step 3: leads and bookings from the seeded calls, customer call statistics.';

-- Grants: the one place for this concern's privileges (tenant tables get theirs from
-- app.secure_tenant_table above; only departures from it are here).
revoke execute on function admin.demo_seed_prepare(text,integer) from public;
revoke execute on function admin.demo_seed_calls(text,integer,integer) from public;
revoke execute on function admin.demo_seed_finish(text) from public;

--! Previous: sha1:7d50dbb443a4838b8f9ae883c1a02b44ce6893ea
--! Hash: sha1:10f91ca8b88f4ac969c1bbc43dd195897a1a80a7
--! Message: list cursors as written and seeded bookings of calls

-- List cursors are exactly what app.cursor_encode writes (a finite instant and an id), and demo-seeded bookings of calls say source 'call' (docs/decisions.md, docs/api-contract.md).

CREATE OR REPLACE FUNCTION app.page_after(page jsonb)
 RETURNS app.page_cursor
 LANGUAGE plpgsql
 IMMUTABLE
AS $function$
declare
  raw text := page ->> 'cursor';
  parts text[];
begin
  if raw is null or raw = '' then
    return row('infinity'::timestamptz, 'ffffffff-ffff-ffff-ffff-ffffffffffff'::uuid)::app.page_cursor;
  end if;
  begin
    raw := translate(raw, '-_', '+/');
    raw := raw || repeat('=', (4 - length(raw) % 4) % 4);
    parts := string_to_array(convert_from(decode(raw, 'base64'), 'UTF8'), '|');
    -- Exactly what app.cursor_encode writes: a UTC instant and an id. A part missing (a null id
    -- would silently skip the rows of the same instant), an extra part, or 'infinity'/'epoch'
    -- (which timestamptz also reads) is a tampered cursor.
    if cardinality(parts) <> 2 or parts[1] !~ '^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z$' then
      raise exception 'tampered cursor';
    end if;
    return row(parts[1]::timestamptz, parts[2]::uuid)::app.page_cursor;
  exception when others then
    perform app.raise('SB400', 'Invalid cursor',
      jsonb_build_object('issues', jsonb_build_array(jsonb_build_object('path', 'cursor', 'message', 'Invalid cursor'))));
  end;
end
$function$;
comment on function app.page_after(jsonb) is E'Decodes { cursor }; a malformed one is a 400. No cursor is the bound above every row (''infinity'', the largest uuid), so the keyset comparison is the same on every page.';

CREATE OR REPLACE FUNCTION admin.demo_seed_calls(location_ref text, calls integer, first_number bigint, day_from integer, day_to integer, customers integer DEFAULT NULL::integer)
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
  first_names text[] := array['Maria','James','Linda','Robert','Patricia','Michael','Jennifer','David','Susan','Carlos','Aisha','Wei','Priya','Tom','Grace','Diego'];
  last_names text[] := array['Garcia','Smith','Johnson','Brown','Nguyen','Miller','Davis','Lopez','Wilson','Patel','Kim','Clark','Lewis','Young','Hall','Rivera'];
  streets text[] := array['Oak St','Maple Ave','Pine Rd','Cedar Ln','Elm St','Lakeview Dr','Hillcrest Blvd','Sunset Ave'];
  m int := coalesce(customers, ceil(calls * 0.7)::int);
  open_minutes int4multirange;
  result jsonb;
begin
  if calls is null or calls < 1 or calls > 1000000 then perform app.raise('SB400', 'calls must be from 1 to 1000000'); end if;
  if day_from is null or day_to is null or day_from < 0 or day_to <= day_from or day_to > 365 then
    perform app.raise('SB400', 'days must satisfy 0 <= day_from < day_to <= 365');
  end if;
  if m < 1 or m > calls then perform app.raise('SB400', 'customers must be from 1 to calls'); end if;
  if first_number is null or first_number < 2000000000 or first_number + m - 1 > 9999999999 then
    perform app.raise('SB400', 'first_number must leave the batch''s customers 10-digit national numbers');
  end if;
  perform set_config('app.location_id', loc::text, true);
  perform set_config('app.seeding', 'on', true);
  -- The key-share lock a foreign-key check on location_id takes, taken once: the location cannot be
  -- deleted under the batch, also when the CLI loads it with the per-row checks off (replica role).
  select timezone into tz from app.locations where id = loc for key share;
  open_minutes := app_private.open_minutes(loc);

  -- One statement: the batch's customers (each with at least one call: call k < m is customer k's,
  -- the rest pick at random), their calls, the leads of calls that produced one and the bookings
  -- of booked calls. Customers carry their call statistics from the start; nothing is updated or
  -- deleted afterwards.
  with people as materialized (
    select k, app_private.uuid_v7() as id, '+1' || (first_number + k)::text as phone,
           first_names[1 + (k % 16)] || ' ' || last_names[1 + ((k / 16) % 16)] as name,
           case when k % 3 = 0 then lower(first_names[1 + (k % 16)]) || '.' || lower(last_names[1 + ((k / 16) % 16)])
                                    || (first_number + k) || '@example.com' end as email,
           (100 + k % 9800)::text || ' ' || streets[1 + (k % 8)] as address
      from generate_series(0, m - 1) k
  ), raw as (
    select g, random() as r_outcome, random() as r_svc, random() as r_urg, random() as r_len,
           day_from + floor(random() * (day_to - day_from))::int as day_ago,
           -- Most calls come in working hours; some at night and at weekends.
           case when random() < 0.8 then 7 + floor(random() * 12)::int else floor(random() * 24)::int end as hour,
           floor(random() * 60)::int as minute, floor(random() * 60)::int as second,
           case when g < m then g else floor(random() * m)::int end as k
      from generate_series(0, calls - 1) g
  ), shaped as (
    select r.*,
           case when r_outcome < 0.10 then 'spam' when r_outcome < 0.16 then 'dropped'
                when r_outcome < 0.44 then 'booked' when r_outcome < 0.74 then 'lead'
                when r_outcome < 0.84 then 'transferred' else 'other' end as outcome,
           1 + floor(r_svc * 8)::int as svc,
           case when r_urg > 0.96 then 5 when r_urg > 0.85 then 4 when r_urg > 0.6 then 3
                when r_urg > 0.3 then 2 else 1 end as urgency,
           least(((date_trunc('day', now() at time zone tz) - make_interval(days => day_ago)
                   + make_interval(hours => hour, mins => minute, secs => second)) at time zone tz),
                 now() - interval '1 minute') as started_at
      from raw r
  ), timed as materialized (
    select s.*, app_private.uuid_v7() as id, p.id as customer_id, p.phone, p.name, p.address,
           (case when s.outcome = 'dropped' then 4 else 45 + s.r_len * 400 end)::int as duration
      from shaped s join people p using (k)
  ), new_customers as (
    insert into app.customers (id, location_id, phone, name, email, address, first_call_at, last_call_at, call_count)
    select p.id, loc, p.phone, p.name, p.email, p.address, t.first_at, t.last_at, t.n
      from people p
      join (select k, min(started_at) first_at, max(started_at) last_at, count(*)::int n from timed group by k) t using (k)
    returning 1
  ), new_calls as (
    insert into app.calls (id, location_id, platform_call_id, customer_id, direction, caller_phone, caller_name,
                           caller_address, outcome, urgency_level, is_emergency, is_returning_customer,
                           started_at, ended_at, duration_sec, service_type, issue_summary, detected_intent,
                           estimated_value, appointment_date, appointment_time, disconnection_reason,
                           transcript, platform_status, finalized_at, created_at, after_hours)
    select s.id, loc, 'demo_' || replace(s.id::text, '-', ''), s.customer_id, 'inbound', s.phone,
           case when s.outcome in ('spam', 'dropped') then null else s.name end,
           case when s.outcome in ('booked', 'lead') then s.address end,
           s.outcome, case when s.outcome = 'spam' then 0 else s.urgency end,
           s.outcome <> 'spam' and s.urgency = 5, random() < 0.35,
           s.started_at, s.started_at + make_interval(secs => s.duration), s.duration,
           case when s.outcome in ('spam', 'dropped') then null else services[s.svc] end,
           case when s.outcome in ('spam', 'dropped') then null else 'Caller needs help with ' || lower(services[s.svc]) end,
           case when s.outcome = 'booked' then 'book_appointment' when s.outcome = 'spam' then 'spam'
                when s.outcome = 'transferred' then 'speak_to_human' else 'get_quote' end,
           case when s.outcome in ('booked', 'lead', 'transferred') then values_[s.svc] end,
           case when s.outcome = 'booked' then (s.started_at at time zone tz)::date + 1 + (s.g % 5) end,
           case when s.outcome = 'booked' then lpad((8 + s.g % 9)::text, 2, '0') || ':00' end,
           case s.outcome when 'transferred' then 'call_transfer' when 'spam' then 'marked_as_spam'
                          when 'dropped' then 'user_hangup' else 'agent_hangup' end,
           case when s.outcome in ('spam', 'dropped') then null
                else 'Agent: Thanks for calling, how can I help?' || chr(10) || 'User: I need help with ' || lower(services[s.svc]) || '.' end,
           'analyzed', s.started_at, s.started_at,
           app_private.after_hours(open_minutes, s.started_at at time zone tz)
      from timed s
     order by s.started_at
    returning id, customer_id, caller_name, caller_phone, caller_address, service_type, urgency_level,
              estimated_value, outcome, ended_at, appointment_date, appointment_time
  ), new_leads as (
    insert into app.leads (id, location_id, call_id, customer_id, name, phone, address, service_type,
                           urgency_level, estimated_value, status, status_changed_at, created_at, updated_at)
    select app_private.uuid_v7(), loc, c.id, c.customer_id, c.caller_name, c.caller_phone, c.caller_address, c.service_type,
           c.urgency_level, c.estimated_value,
           case when c.outcome = 'booked' then 'booked'
                else (array['new','new','contacted','closed','lost'])[1 + floor(random() * 5)::int] end,
           c.ended_at, c.ended_at, c.ended_at
      from new_calls c
     where c.outcome in ('booked', 'lead', 'transferred')
    returning id, call_id
  ), new_bookings as (
    insert into app.bookings (id, location_id, call_id, lead_id, customer_id, status, scheduled_date,
                              scheduled_time, service_type, address, source, created_at, updated_at)
    select app_private.uuid_v7(), loc, c.id, l.id, c.customer_id,
           case when c.appointment_date < current_date then 'completed' else 'scheduled' end,
           c.appointment_date, c.appointment_time, c.service_type, c.caller_address, 'call', c.ended_at, c.ended_at
      from new_calls c join new_leads l on l.call_id = c.id
     where c.outcome = 'booked' and c.appointment_date is not null
    returning 1
  )
  select jsonb_build_object('calls', (select count(*) from new_calls), 'customers', (select count(*) from new_customers),
                            'leads', (select count(*) from new_leads), 'bookings', (select count(*) from new_bookings))
    into result;
  return result;
end
$function$;
alter function admin.demo_seed_calls(text,integer,bigint,integer,integer,integer) owner to switchboard_system;
comment on function admin.demo_seed_calls(text,integer,bigint,integer,integer,integer) is E'Demo seed, step 2 (repeated, batches may run concurrently): `customers` customers (default 70 % of `calls`) numbered from `first_number`, each with at least one of the batch''s `calls` finalised calls, which started from `day_to` to `day_from` days ago, the leads of the calls that produced one and the bookings of the booked ones, in one statement. Batches running side by side need disjoint number ranges. Every row it writes references the location (locked once), or a row of the same statement, so `demo seed` may run it with session_replication_role = replica (no per-row foreign-key checks); the insights rollup''s bulk triggers fire in that role too.';
revoke execute on function admin.demo_seed_calls(text,integer,bigint,integer,integer,integer) from public;

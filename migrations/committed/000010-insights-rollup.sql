--! Previous: sha1:8cad7861f966db422706d2cfda564a1992f868d3
--! Hash: sha1:3c0b94cc59fcc6dc5111331e7ed3ca4917948963
--! Message: insights rollup

-- Insights from a rollup kept by triggers (docs/rest-api.md "Insights"): after-hours flag, hourly
-- and per-service counts with a journal, rebuild on timezone change, the figures and GET insights.

create function api.insights(token_hash text, location_ref text, days integer)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'insights:read');
begin
  if days is null or days not between 1 and 90 then
    perform app.raise('SB400', 'days must be an integer from 1 to 90',
      jsonb_build_object('issues', jsonb_build_array(jsonb_build_object('path', 'days', 'message', 'Must be from 1 to 90'))));
  end if;
  return app.insights_json(a.location_id, days, now());
end
$function$;
comment on function api.insights(text,text,integer) is E'GET insights?days=N: the last N local days (today included) of inbound calls, per docs/api-contract.md §10, from the rollup.';

create function app_private.after_hours(open_minutes int4multirange, local_time timestamp without time zone)
 RETURNS boolean
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
  select not open_minutes @> (extract(dow from local_time)::int * 1440
                              + extract(hour from local_time)::int * 60 + extract(minute from local_time)::int)
$function$;
comment on function app_private.after_hours(int4multirange,timestamp without time zone) is E'Whether a local wall-clock moment falls outside opening hours given as minutes of the week (app_private.open_minutes); minute resolution, close exclusive.';

create function app.tg_calls__after_hours()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
  if new.started_at is null then
    new.after_hours := null;
  else
    -- Same rule as app_private.after_hours over app_private.open_minutes (minute resolution,
    -- close exclusive): hours are whole minutes, so comparing the time itself is equivalent.
    select not exists (
             select 1 from app.business_hours h
              where h.location_id = new.location_id and h.day = extract(dow from t.local_time)
                and h.open::time <= t.local_time::time and t.local_time::time < h.close::time)
      into new.after_hours
      from (select new.started_at at time zone l.timezone as local_time
              from app.locations l where l.id = new.location_id) t;
  end if;
  return new;
end
$function$;
comment on function app.tg_calls__after_hours() is E'Sets calls.after_hours from the business hours in force now: when the start is recorded or changes, and again when the call is finalised.';

create table app.insights_hourly (
  location_id uuid not null,
  day date not null,
  hour smallint not null,
  calls integer default 0 not null,
  spam integer default 0 not null,
  dropped integer default 0 not null,
  emergencies integer default 0 not null,
  after_hours integer default 0 not null,
  leads integer default 0 not null,
  revenue numeric default 0 not null,
  constraint insights_hourly_pkey primary key (location_id, day, hour),
  constraint insights_hourly_hour_check check (((hour >= 0) AND (hour <= 23))),
  constraint insights_hourly_location_id_fkey foreign key (location_id) references app.locations (id) on delete cascade
);
comment on table app.insights_hourly is E'@behavior -insert -update -delete\nInsights rollup: inbound calls by local start day and hour in the location''s timezone (with app.insights_journal; kept by triggers on calls and leads, rebuilt when the timezone changes).';
comment on column app.insights_hourly.day is E'Local date of started_at in the location''s timezone.';
comment on column app.insights_hourly.hour is E'Local hour (0-23) of started_at.';
comment on column app.insights_hourly.calls is E'Inbound calls, spam included.';
comment on column app.insights_hourly.spam is E'Of which outcome spam.';
comment on column app.insights_hourly.dropped is E'Of which outcome dropped.';
comment on column app.insights_hourly.emergencies is E'Of which is_emergency.';
comment on column app.insights_hourly.after_hours is E'Of which after_hours (spam included).';
comment on column app.insights_hourly.leads is E'Leads whose call_id is one of these calls.';
comment on column app.insights_hourly.revenue is E'Sum of estimated_value of the booked ones.';
select app.secure_tenant_table('app.insights_hourly', 'select');

create table app.insights_services (
  location_id uuid not null,
  day date not null,
  service_type text not null,
  calls integer default 0 not null,
  constraint insights_services_pkey primary key (location_id, day, service_type),
  constraint insights_services_location_id_fkey foreign key (location_id) references app.locations (id) on delete cascade
);
comment on table app.insights_services is E'@behavior -insert -update -delete\nInsights rollup: non-spam inbound calls with a service_type, by local start day (with app.insights_journal).';
comment on column app.insights_services.calls is E'Non-spam inbound calls of that service_type started that local day.';
select app.secure_tenant_table('app.insights_services', 'select');

create table app.insights_journal (
  location_id uuid not null,
  id bigint generated by default as identity,
  day date not null,
  hour smallint not null,
  service_type text,
  service_calls integer default 0 not null,
  calls integer default 0 not null,
  spam integer default 0 not null,
  dropped integer default 0 not null,
  emergencies integer default 0 not null,
  after_hours integer default 0 not null,
  leads integer default 0 not null,
  revenue numeric default 0 not null,
  constraint insights_journal_pkey primary key (location_id, id),
  constraint insights_journal_hour_check check (((hour >= 0) AND (hour <= 23))),
  constraint insights_journal_location_id_fkey foreign key (location_id) references app.locations (id) on delete cascade
);
comment on table app.insights_journal is E'@behavior -insert -update -delete\nInsights changes not yet folded into app.insights_hourly / app.insights_services: added to the hourly row (day, hour), and service_calls to the service''s day. Insert-only for writers, so concurrent calls of a location never wait on each other.';
comment on column app.insights_journal.service_type is E'Service whose day count service_calls changes (null: none).';
comment on column app.insights_journal.service_calls is E'Change of the service''s day count.';
select app.secure_tenant_table('app.insights_journal', 'select');

create type app_private.insights_delta as (
  location_id uuid,
  day date,
  hour smallint,
  service_type text,
  service_calls integer,
  calls integer,
  spam integer,
  dropped integer,
  emergencies integer,
  after_hours integer,
  leads integer,
  revenue numeric
);
comment on type app_private.insights_delta is E'A change to the rollup (the shape of an app.insights_journal row): counts added at (location_id, day, hour), service_calls at (location_id, day, service_type).';

create type app_private.insights_bucket as (
  day date,
  hour smallint,
  service_type text,
  calls bigint,
  spam bigint,
  dropped bigint,
  emergencies bigint,
  after_hours bigint,
  leads bigint,
  revenue numeric
);
comment on type app_private.insights_bucket is E'Insights figures of one (local day, hour) or, with only service_type and calls, of one service: what app_private.insights_assemble reads.';

create function app_private.insights_call_delta(location_id uuid, started_at timestamp with time zone, outcome text, service_type text, is_emergency boolean, after_hours boolean, estimated_value numeric, tz text, leads integer, sign integer)
 RETURNS app_private.insights_delta
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
  select row(location_id, (started_at at time zone tz)::date, extract(hour from started_at at time zone tz)::smallint,
             case when outcome <> 'spam' then service_type end,
             case when outcome <> 'spam' and service_type is not null then sign else 0 end,
             sign, sign * (outcome = 'spam')::int, sign * (outcome = 'dropped')::int,
             sign * is_emergency::int, sign * coalesce(after_hours, false)::int, sign * leads,
             sign * case when outcome = 'booked' then coalesce(estimated_value, 0) else 0 end
         )::app_private.insights_delta
$function$;
alter function app_private.insights_call_delta(uuid,timestamp with time zone,text,text,boolean,boolean,numeric,text,integer,integer) owner to switchboard_system;
comment on function app_private.insights_call_delta(uuid,timestamp with time zone,text,text,boolean,boolean,numeric,text,integer,integer) is E'The rollup contribution of one inbound call (given by the columns that count) with its number of leads, times sign (+1 add, -1 remove), bucketed by its local start in zone tz. Scalar arguments: a trigger passes OLD/NEW fields without building the whole row.';

create function app_private.insights_call_delta(c app.calls, tz text, leads integer, sign integer)
 RETURNS app_private.insights_delta
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
  select app_private.insights_call_delta(c.location_id, c.started_at, c.outcome, c.service_type, c.is_emergency,
                                         c.after_hours, c.estimated_value, tz, leads, sign)
$function$;
alter function app_private.insights_call_delta(app.calls,text,integer,integer) owner to switchboard_system;
comment on function app_private.insights_call_delta(app.calls,text,integer,integer) is E'app_private.insights_call_delta for a whole call row (set-based paths).';

create function app_private.insights_lock(location_id uuid)
 RETURNS text
 LANGUAGE sql
AS $function$ select pg_advisory_xact_lock_shared(1229869897, hashtext(location_id::text))::text $function$;
alter function app_private.insights_lock(uuid) owner to switchboard_system;
comment on function app_private.insights_lock(uuid) is E'Shared per-location lock held from bucketing a rollup change until commit; app_private.insights_rebuild takes it exclusively. Returns an empty text, so PL/pgSQL can take it in a plain assignment.';

create function app_private.insights_apply(deltas app_private.insights_delta[])
 RETURNS void
 LANGUAGE plpgsql
AS $function$
begin
  -- Rows in key order (hourly, then services), so concurrent transactions lock them in one order.
  insert into app.insights_hourly as h (location_id, day, hour, calls, spam, dropped, emergencies, after_hours, leads, revenue)
  select d.location_id, d.day, d.hour, sum(d.calls), sum(d.spam), sum(d.dropped), sum(d.emergencies),
         sum(d.after_hours), sum(d.leads), sum(d.revenue)
    from unnest(deltas) d
   group by 1, 2, 3
  having sum(d.calls) <> 0 or sum(d.spam) <> 0 or sum(d.dropped) <> 0 or sum(d.emergencies) <> 0
      or sum(d.after_hours) <> 0 or sum(d.leads) <> 0 or sum(d.revenue) <> 0
   order by 1, 2, 3
  on conflict (location_id, day, hour) do update
     set calls = h.calls + excluded.calls, spam = h.spam + excluded.spam, dropped = h.dropped + excluded.dropped,
         emergencies = h.emergencies + excluded.emergencies, after_hours = h.after_hours + excluded.after_hours,
         leads = h.leads + excluded.leads, revenue = h.revenue + excluded.revenue;
  insert into app.insights_services as s (location_id, day, service_type, calls)
  select d.location_id, d.day, d.service_type, sum(d.service_calls)
    from unnest(deltas) d
   where d.service_type is not null
   group by 1, 2, 3
  having sum(d.service_calls) <> 0
   order by 1, 2, 3
  on conflict (location_id, day, service_type) do update set calls = s.calls + excluded.calls;
end
$function$;
alter function app_private.insights_apply(app_private.insights_delta[]) owner to switchboard_system;
comment on function app_private.insights_apply(app_private.insights_delta[]) is E'Adds changes to app.insights_hourly and app.insights_services (set-based; the compaction, the seeder''s bulk path and the rebuild use it).';

create function app_private.insights_compact(location_id uuid)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
declare
  loc uuid := insights_compact.location_id;
  moved app_private.insights_delta[];
begin
  -- One compactor per location at a time; a busy one means the journal is being folded anyway.
  if not pg_try_advisory_xact_lock(1229869898, hashtext(loc::text)) then
    return;
  end if;
  with m as (
    delete from app.insights_journal j where j.location_id = loc
    returning j.location_id, j.day, j.hour, j.service_type, j.service_calls, j.calls, j.spam, j.dropped,
              j.emergencies, j.after_hours, j.leads, j.revenue
  )
  select array_agg(g.d) into moved
    from (select row(m.location_id, m.day, m.hour, m.service_type, sum(m.service_calls), sum(m.calls), sum(m.spam),
                     sum(m.dropped), sum(m.emergencies), sum(m.after_hours), sum(m.leads), sum(m.revenue))::app_private.insights_delta as d
            from m
           group by m.location_id, m.day, m.hour, m.service_type) g;
  perform app_private.insights_apply(moved);
end
$function$;
alter function app_private.insights_compact(uuid) owner to switchboard_system;
comment on function app_private.insights_compact(uuid) is E'Folds a location''s committed journal rows (and this transaction''s own) into app.insights_hourly / app.insights_services; skipped while another transaction does it.';

create function app_private.insights_record(d app_private.insights_delta)
 RETURNS boolean
 LANGUAGE plpgsql
AS $function$
declare
  jid bigint;
begin
  if d.service_calls = 0 and d.calls = 0 and d.spam = 0 and d.dropped = 0 and d.emergencies = 0
     and d.after_hours = 0 and d.leads = 0 and d.revenue = 0 then
    return false;
  end if;
  insert into app.insights_journal (location_id, day, hour, service_type, service_calls, calls, spam, dropped,
                                    emergencies, after_hours, leads, revenue)
  values (d.location_id, d.day, d.hour, case when d.service_calls <> 0 then d.service_type end, d.service_calls,
          d.calls, d.spam, d.dropped, d.emergencies, d.after_hours, d.leads, d.revenue)
  returning id into jid;
  if jid % 32 = 0 then
    perform app_private.insights_compact(d.location_id);
  end if;
  return true;
end
$function$;
alter function app_private.insights_record(app_private.insights_delta) owner to switchboard_system;
comment on function app_private.insights_record(app_private.insights_delta) is E'Writes one change to app.insights_journal (nothing when it changes nothing); every 32nd journal row also compacts its location. True when a row was written.';

create function app_private.tg_calls__insights()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
declare
  was boolean := tg_op <> 'INSERT' and old.direction = 'inbound' and old.started_at is not null;
  is_now boolean := tg_op <> 'DELETE' and new.direction = 'inbound' and new.started_at is not null;
  n_leads int := 0;
  tz text;
  o app_private.insights_delta;
  n app_private.insights_delta;
  ignored text;
  ignored_b boolean;
begin
  if tg_op = 'DELETE' then
    if not exists (select 1 from app.locations l where l.id = old.location_id) then
      return old;  -- the whole location is being deleted; its rollup goes with it
    end if;
  end if;
  -- The call's leads move with it when its bucket may change (counted now, before a DELETE has
  -- detached them); otherwise they stay where they are.
  if not (was and is_now and old.location_id = new.location_id and old.started_at = new.started_at) then
    select count(*) into n_leads from app.leads l where l.call_id = coalesce(new.id, old.id);
  end if;
  if was then
    ignored := app_private.insights_lock(old.location_id);
    select l.timezone into tz from app.locations l where l.id = old.location_id;
    o := app_private.insights_call_delta(old.location_id, old.started_at, old.outcome, old.service_type, old.is_emergency,
                                         old.after_hours, old.estimated_value, tz, n_leads, -1);
  end if;
  if is_now then
    if not was or new.location_id <> old.location_id then
      ignored := app_private.insights_lock(new.location_id);
      select l.timezone into tz from app.locations l where l.id = new.location_id;
    end if;
    n := app_private.insights_call_delta(new.location_id, new.started_at, new.outcome, new.service_type, new.is_emergency,
                                         new.after_hours, new.estimated_value, tz, n_leads, 1);
  end if;
  if was and is_now and o.location_id = n.location_id and o.day = n.day and o.hour = n.hour then
    -- Same bucket (a settled outcome, a corrected value...): one journal row with the difference;
    -- a second one only when the call moves from one counted service to another.
    if o.service_type is not null and n.service_type is not null and o.service_type <> n.service_type then
      ignored_b := app_private.insights_record(row(o.location_id, o.day, o.hour, o.service_type, -1, 0, 0, 0, 0, 0, 0, 0)::app_private.insights_delta);
      o.service_type := null;
      o.service_calls := 0;
    end if;
    ignored_b := app_private.insights_record(row(n.location_id, n.day, n.hour, coalesce(n.service_type, o.service_type),
      n.service_calls + o.service_calls, n.calls + o.calls, n.spam + o.spam, n.dropped + o.dropped,
      n.emergencies + o.emergencies, n.after_hours + o.after_hours, n.leads + o.leads, n.revenue + o.revenue)::app_private.insights_delta);
  else
    if was then
      ignored_b := app_private.insights_record(o);
    end if;
    if is_now then
      ignored_b := app_private.insights_record(n);
    end if;
  end if;
  return case when tg_op = 'DELETE' then old else new end;
end
$function$;
alter function app_private.tg_calls__insights() owner to switchboard_system;
comment on function app_private.tg_calls__insights() is E'Rollup upkeep for one call (insert, relevant update, delete): its old contribution out, its new one in, as journal rows. SECURITY DEFINER (switchboard_system): only it writes the rollup, and it reads the call''s leads whatever the writer''s role.';

create function app_private.insights_lead(call_id uuid, sign integer)
 RETURNS boolean
 LANGUAGE plpgsql
AS $function$
declare
  c record;
  tz text;
  ignored text;
begin
  -- FOR SHARE: a concurrent change of the call's start waits for this transaction (or this waits
  -- for it and reads the new start), so the lead is counted where its call ends up. No row: the
  -- call is not counted, or it is being deleted (its own trigger took its leads out).
  select x.location_id, x.started_at into c from app.calls x
   where x.id = insights_lead.call_id and x.direction = 'inbound' and x.started_at is not null
     for share;
  if not found then
    return false;
  end if;
  ignored := app_private.insights_lock(c.location_id);
  select l.timezone into tz from app.locations l where l.id = c.location_id;
  if tz is null then
    return false;
  end if;
  return app_private.insights_record(row(c.location_id, (c.started_at at time zone tz)::date,
    extract(hour from c.started_at at time zone tz)::smallint, null, 0, 0, 0, 0, 0, 0, sign, 0)::app_private.insights_delta);
end
$function$;
alter function app_private.insights_lead(uuid,integer) owner to switchboard_system;
comment on function app_private.insights_lead(uuid,integer) is E'Records sign leads in the bucket of call call_id (nothing when the call is not counted); true when a journal row was written.';

create function app_private.tg_leads__insights()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
declare
  ignored boolean;
begin
  if tg_op <> 'INSERT' and old.call_id is not null then
    ignored := app_private.insights_lead(old.call_id, -1);
  end if;
  if tg_op <> 'DELETE' and new.call_id is not null then
    ignored := app_private.insights_lead(new.call_id, 1);
  end if;
  return null;
end
$function$;
alter function app_private.tg_leads__insights() owner to switchboard_system;
comment on function app_private.tg_leads__insights() is E'Rollup upkeep for leads made from calls (insert, call_id change, delete): one lead in or out of its call''s bucket. SECURITY DEFINER (switchboard_system): only it writes the rollup, and it locks and reads the lead''s call whatever the writer''s role.';

create function app_private.tg_calls__insights_bulk()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
begin
  perform app_private.insights_lock(x.location_id) from (select distinct location_id from new_rows) x;
  perform app_private.insights_apply(array(
    select row(d.location_id, d.day, d.hour, d.service_type, sum(d.service_calls), sum(d.calls), sum(d.spam),
               sum(d.dropped), sum(d.emergencies), sum(d.after_hours), 0, sum(d.revenue))::app_private.insights_delta
      from new_rows c
      join app.locations l on l.id = c.location_id
     cross join lateral app_private.insights_call_delta(c, l.timezone, 0, 1) d
     where c.direction = 'inbound' and c.started_at is not null
     group by d.location_id, d.day, d.hour, d.service_type));
  return null;
end
$function$;
alter function app_private.tg_calls__insights_bulk() owner to switchboard_system;
comment on function app_private.tg_calls__insights_bulk() is E'Rollup upkeep for calls inserted while seeding (app.seeding = on): one aggregate per statement. SECURITY DEFINER (switchboard_system): only it writes the rollup.';

create function app_private.tg_leads__insights_bulk()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
begin
  perform app_private.insights_lock(x.location_id)
     from (select distinct c.location_id from new_rows n join app.calls c on c.id = n.call_id) x;
  perform app_private.insights_apply(array(
    select row(c.location_id, (c.started_at at time zone l.timezone)::date,
               extract(hour from c.started_at at time zone l.timezone)::smallint,
               null, 0, 0, 0, 0, 0, 0, count(*), 0)::app_private.insights_delta
      from new_rows n
      join app.calls c on c.id = n.call_id
      join app.locations l on l.id = c.location_id
     where c.direction = 'inbound' and c.started_at is not null
     group by c.location_id, (c.started_at at time zone l.timezone)::date,
              extract(hour from c.started_at at time zone l.timezone)));
  return null;
end
$function$;
alter function app_private.tg_leads__insights_bulk() owner to switchboard_system;
comment on function app_private.tg_leads__insights_bulk() is E'Rollup upkeep for leads inserted while seeding (app.seeding = on): one aggregate per statement. SECURITY DEFINER (switchboard_system): only it writes the rollup.';

create function app_private.tg_calls__insights_truncate()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
begin
  delete from app.insights_hourly;
  delete from app.insights_services;
  delete from app.insights_journal;
  return null;
end
$function$;
alter function app_private.tg_calls__insights_truncate() owner to switchboard_system;
comment on function app_private.tg_calls__insights_truncate() is E'TRUNCATE of calls empties the rollup. SECURITY DEFINER (switchboard_system): only it writes the rollup.';

create function app_private.insights_rebuild(location_id uuid)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
declare
  loc uuid := insights_rebuild.location_id;
begin
  perform pg_advisory_xact_lock(1229869897, hashtext(loc::text));
  delete from app.insights_journal r where r.location_id = loc;
  delete from app.insights_hourly r where r.location_id = loc;
  delete from app.insights_services r where r.location_id = loc;
  perform app_private.insights_apply(array(
    select row(d.location_id, d.day, d.hour, d.service_type, sum(d.service_calls), sum(d.calls), sum(d.spam),
               sum(d.dropped), sum(d.emergencies), sum(d.after_hours), 0, sum(d.revenue))::app_private.insights_delta
      from app.calls c
      join app.locations l on l.id = c.location_id
     cross join lateral app_private.insights_call_delta(c, l.timezone, 0, 1) d
     where c.location_id = loc and c.direction = 'inbound' and c.started_at is not null
     group by d.location_id, d.day, d.hour, d.service_type
    union all
    select row(c.location_id, (c.started_at at time zone l.timezone)::date,
               extract(hour from c.started_at at time zone l.timezone)::smallint,
               null, 0, 0, 0, 0, 0, 0, count(*), 0)::app_private.insights_delta
      from app.leads x
      join app.calls c on c.id = x.call_id
      join app.locations l on l.id = c.location_id
     where c.location_id = loc and c.direction = 'inbound' and c.started_at is not null
     group by c.location_id, (c.started_at at time zone l.timezone)::date,
              extract(hour from c.started_at at time zone l.timezone)));
end
$function$;
alter function app_private.insights_rebuild(uuid) owner to switchboard_system;
comment on function app_private.insights_rebuild(uuid) is E'Recomputes a location''s rollup from its calls and leads (backfill; timezone change), under the exclusive per-location lock. SECURITY DEFINER (switchboard_system): it writes the rollup and reads every call of the location.';

create function app_private.tg_locations__insights_timezone()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
begin
  perform app_private.insights_rebuild(new.id);
  return null;
end
$function$;
alter function app_private.tg_locations__insights_timezone() owner to switchboard_system;
comment on function app_private.tg_locations__insights_timezone() is E'A new timezone re-buckets the location''s calls: its rollup is rebuilt in the same transaction. SECURITY DEFINER (switchboard_system): only it writes the rollup.';

create function app_private.insights_assemble(days integer, first_day date, today date, tz text, daily app_private.insights_bucket[], hourly app_private.insights_bucket[], services app_private.insights_bucket[])
 RETURNS jsonb
 LANGUAGE sql
 STABLE
AS $function$
  with per_day as (
    select * from unnest(daily)
  ), tot as (
    select coalesce(sum(calls - spam), 0) as non_spam,
           coalesce(sum(calls - spam - dropped), 0) as answered,
           coalesce(sum(spam), 0) as spam,
           coalesce(sum(emergencies), 0) as emergencies,
           coalesce(sum(after_hours), 0) as after_hours,               -- spam included
           coalesce(sum(leads), 0) as leads,
           coalesce(sum(revenue), 0) as revenue
      from per_day
  ), hours as (
    select g.hour, coalesce(h.calls - h.spam, 0) as n
      from generate_series(0, 23) g(hour)
      left join unnest(hourly) h on h.hour = g.hour
  ), hour_shares as (
    -- Shares rounded to 4 decimals by largest remainder, so that they sum to exactly 1.
    select hour, floor(n * 10000.0 / nullif(t.non_spam, 0)) as base,
           n * 10000.0 / nullif(t.non_spam, 0) - floor(n * 10000.0 / nullif(t.non_spam, 0)) as rem
      from hours, tot t
  ), hour_final as (
    select hour, coalesce(base, 0) + case when row_number() over (order by rem desc nulls last, hour)
                                              <= 10000 - coalesce(sum(base) over (), 10000) then 1 else 0 end as units
      from hour_shares
  ), svc as (
    select service_type, sum(calls) as n from unnest(services)
     where service_type is not null
     group by service_type
    having sum(calls) > 0
  )
  select jsonb_build_object(
    'days', days,
    'from', first_day, 'to', today, 'timezone', tz,
    'calls_answered', t.answered,
    'leads_captured', t.leads,
    'revenue_recovered', trim_scale(t.revenue),
    'spam_blocked', t.spam,
    'emergencies', t.emergencies,
    'answer_rate_pct', case when t.non_spam = 0 then 0 else round(100.0 * t.answered / t.non_spam, 1) end,
    'after_hours_calls', t.after_hours,
    'per_day', (select jsonb_agg(jsonb_build_object(
                  'date', s.day::date, 'calls', coalesce(p.calls - p.spam, 0), 'revenue', trim_scale(coalesce(p.revenue, 0)))
                  order by s.day)
                  from generate_series(first_day, today, interval '1 day') s(day)
                  left join per_day p on p.day = s.day::date),
    'per_hour', (select jsonb_agg(jsonb_build_object('hour', hour, 'share', units / 10000.0) order by hour) from hour_final),
    'services', (select coalesce(jsonb_agg(jsonb_build_object(
                    'service', service_type,
                    'pct', round(100.0 * n / (select sum(n) from svc), 1)) order by n desc, service_type), '[]')
                   from svc))
    from tot t
$function$;
comment on function app_private.insights_assemble(integer,date,date,text,app_private.insights_bucket[],app_private.insights_bucket[],app_private.insights_bucket[]) is E'The insights JSON (docs/api-contract.md §10 formulas) from a window''s figures per local day (hour null), its calls and spam per local hour (day null) and its calls per service.';

create function app.insights_json(location_id uuid, days integer, as_of timestamp with time zone)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE
AS $function$
declare
  loc uuid := insights_json.location_id;
  tz text;
  today date;
  first_day date;
  daily app_private.insights_bucket[];
  hourly app_private.insights_bucket[];
begin
  select l.timezone into tz from app.locations l where l.id = loc;
  today := (as_of at time zone tz)::date;
  first_day := today - (days - 1);
  -- At most 24 rows a day, plus the few journal rows not yet folded in.
  with r as (
    select h.day, h.hour, h.calls, h.spam, h.dropped, h.emergencies, h.after_hours, h.leads, h.revenue
      from app.insights_hourly h
     where h.location_id = loc and h.day between first_day and today
    union all
    select j.day, j.hour, j.calls, j.spam, j.dropped, j.emergencies, j.after_hours, j.leads, j.revenue
      from app.insights_journal j
     where j.location_id = loc and j.day between first_day and today
  )
  select array(select row(r.day, null, null, sum(r.calls), sum(r.spam), sum(r.dropped), sum(r.emergencies),
                          sum(r.after_hours), sum(r.leads), sum(r.revenue))::app_private.insights_bucket
                 from r group by r.day),
         array(select row(null, r.hour, null, sum(r.calls), sum(r.spam), 0, 0, 0, 0, 0)::app_private.insights_bucket
                 from r group by r.hour)
    into daily, hourly;
  return app_private.insights_assemble(days, first_day, today, tz, daily, hourly,
    array(select row(null, null, r.service_type, sum(r.calls), 0, 0, 0, 0, 0, 0)::app_private.insights_bucket
            from (select s.service_type, s.calls
                    from app.insights_services s
                   where s.location_id = loc and s.day between first_day and today
                  union all
                  select j.service_type, j.service_calls
                    from app.insights_journal j
                   where j.location_id = loc and j.day between first_day and today and j.service_type is not null) r
           group by r.service_type));
end
$function$;
comment on function app.insights_json(uuid,integer,timestamp with time zone) is E'Insights of the `days` local days up to the local date of as_of, read from the rollup (app.insights_hourly, app.insights_services and the journal not yet folded in): what api.insights answers.';

create function app.insights_direct(location_id uuid, days integer, as_of timestamp with time zone)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE
AS $function$
declare
  loc uuid := insights_direct.location_id;
  tz text;
  today date;
  first_day date;
  daily app_private.insights_bucket[];
  hourly app_private.insights_bucket[];
begin
  select l.timezone into tz from app.locations l where l.id = loc;
  today := (as_of at time zone tz)::date;
  first_day := today - (days - 1);
  with x as (
    select (c.started_at at time zone tz)::date as day,
           extract(hour from c.started_at at time zone tz)::smallint as hour,
           c.outcome, c.is_emergency, c.after_hours, c.estimated_value,
           (select count(*) from app.leads l where l.call_id = c.id) as leads
      from app.calls c
     where c.location_id = loc and c.direction = 'inbound'
       -- every zone is within a day of UTC: a coarse index range, then the exact local date
       and c.started_at >= (first_day - 1)::timestamp at time zone 'UTC'
       and c.started_at < (today + 2)::timestamp at time zone 'UTC'
  ), w as (
    select * from x where x.day between first_day and today
  )
  select array(select row(w.day, null, null, count(*),
                          count(*) filter (where w.outcome = 'spam'),
                          count(*) filter (where w.outcome = 'dropped'),
                          count(*) filter (where w.is_emergency),
                          count(*) filter (where w.after_hours),
                          sum(w.leads),
                          coalesce(sum(w.estimated_value) filter (where w.outcome = 'booked'), 0))::app_private.insights_bucket
                 from w group by w.day),
         array(select row(null, w.hour, null, count(*), count(*) filter (where w.outcome = 'spam'), 0, 0, 0, 0, 0)::app_private.insights_bucket
                 from w group by w.hour)
    into daily, hourly;
  return app_private.insights_assemble(days, first_day, today, tz, daily, hourly,
    array(select row(null, null, c.service_type, count(*), 0, 0, 0, 0, 0, 0)::app_private.insights_bucket
            from app.calls c
           where c.location_id = loc and c.direction = 'inbound' and c.outcome <> 'spam' and c.service_type is not null
             and c.started_at >= (first_day - 1)::timestamp at time zone 'UTC'
             and c.started_at < (today + 2)::timestamp at time zone 'UTC'
             and (c.started_at at time zone tz)::date between first_day and today
           group by c.service_type));
end
$function$;
comment on function app.insights_direct(uuid,integer,timestamp with time zone) is E'Reference for app.insights_json: the same figures computed straight from calls and leads (cost grows with the calls of the window). Tests compare the two.';

-- Triggers (name prefix = firing order; see migrations/CONVENTIONS.md)
create trigger _300_insights_timezone AFTER UPDATE OF timezone ON app.locations FOR EACH ROW WHEN ((old.timezone IS DISTINCT FROM new.timezone))
  execute function app_private.tg_locations__insights_timezone();
create trigger _200_after_hours BEFORE INSERT ON app.calls FOR EACH ROW WHEN (((new.started_at IS NOT NULL) AND (new.after_hours IS NULL)))
  execute function app.tg_calls__after_hours();
create trigger _200_after_hours_update BEFORE UPDATE OF started_at, finalized_at ON app.calls FOR EACH ROW WHEN (((new.started_at IS DISTINCT FROM old.started_at) OR ((old.finalized_at IS NULL) AND (new.finalized_at IS NOT NULL))))
  execute function app.tg_calls__after_hours();
create trigger _300_insights_bulk AFTER INSERT ON app.calls REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT WHEN ((current_setting('app.seeding'::text, true) = 'on'::text))
  execute function app_private.tg_calls__insights_bulk();
create trigger _300_insights_delete BEFORE DELETE ON app.calls FOR EACH ROW WHEN (((old.direction = 'inbound'::text) AND (old.started_at IS NOT NULL)))
  execute function app_private.tg_calls__insights();
create trigger _300_insights_insert AFTER INSERT ON app.calls FOR EACH ROW WHEN (((new.direction = 'inbound'::text) AND (new.started_at IS NOT NULL) AND (current_setting('app.seeding'::text, true) IS DISTINCT FROM 'on'::text)))
  execute function app_private.tg_calls__insights();
create trigger _300_insights_truncate AFTER TRUNCATE ON app.calls FOR EACH STATEMENT
  execute function app_private.tg_calls__insights_truncate();
create trigger _300_insights_update after update on app.calls
  for each row when ((old.location_id, old.direction, old.started_at, old.outcome, old.is_emergency, old.after_hours,
                      old.service_type, old.estimated_value)
                     is distinct from
                     (new.location_id, new.direction, new.started_at, new.outcome, new.is_emergency, new.after_hours,
                      new.service_type, new.estimated_value))
  execute function app_private.tg_calls__insights();
create trigger _300_insights_bulk AFTER INSERT ON app.leads REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT WHEN ((current_setting('app.seeding'::text, true) = 'on'::text))
  execute function app_private.tg_leads__insights_bulk();
create trigger _300_insights_delete AFTER DELETE ON app.leads FOR EACH ROW WHEN ((old.call_id IS NOT NULL))
  execute function app_private.tg_leads__insights();
create trigger _300_insights_insert AFTER INSERT ON app.leads FOR EACH ROW WHEN (((new.call_id IS NOT NULL) AND (current_setting('app.seeding'::text, true) IS DISTINCT FROM 'on'::text)))
  execute function app_private.tg_leads__insights();
create trigger _300_insights_update AFTER UPDATE OF call_id ON app.leads FOR EACH ROW WHEN ((old.call_id IS DISTINCT FROM new.call_id))
  execute function app_private.tg_leads__insights();

-- Grants: the one place for this concern's privileges (tenant tables get theirs from
-- app.secure_tenant_table above; only departures from it are here).
grant execute on function api.insights(text,text,integer) to switchboard_api;
revoke insert, update, delete on app.insights_hourly from switchboard_staff;
revoke insert, update, delete on app.insights_services from switchboard_staff;
revoke insert, update, delete on app.insights_journal from switchboard_staff;
revoke execute on function app_private.insights_lock(uuid) from public;
revoke execute on function app_private.insights_apply(app_private.insights_delta[]) from public;
revoke execute on function app_private.insights_compact(uuid) from public;
revoke execute on function app_private.insights_record(app_private.insights_delta) from public;
revoke execute on function app_private.insights_lead(uuid,integer) from public;
revoke execute on function app_private.insights_rebuild(uuid) from public;

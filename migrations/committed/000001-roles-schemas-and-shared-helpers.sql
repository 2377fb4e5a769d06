--! Previous: -
--! Hash: sha1:db669573273eb80bcda5a28c16c337e593a798f0
--! Message: roles schemas and shared helpers

-- Roles, schemas and the helpers every other file uses: the tenant setting, timestamp and phone
-- formats, our SQLSTATEs (app.raise; migrations/CONVENTIONS.md maps each to HTTP), the standard
-- tenant-table security (app.secure_tenant_table), the only doors into graphile-worker
-- (app.enqueue, app.dequeue, app.worker_unlock) and keyset pagination.

-- Roles are cluster-wide, so they are created only when missing.
do $$
begin
  if not exists (select from pg_roles where rolname = 'switchboard_api') then
    create role switchboard_api nologin noinherit;
  end if;
  if not exists (select from pg_roles where rolname = 'switchboard_staff') then
    create role switchboard_staff nologin;
  end if;
  if not exists (select from pg_roles where rolname = 'switchboard_system') then
    create role switchboard_system nologin;
  end if;
end
$$;
comment on role switchboard_api is E'Role of the public REST layer: sees one location at a time, through RLS.';
comment on role switchboard_staff is E'Role of the internal GraphQL: sees every location and billing.';
comment on role switchboard_system is E'Owner of the few SECURITY DEFINER functions that must look across locations (token lookup, phone routing, CLI).';

-- The connecting (migrator) role switches into these per connection or per request.
grant switchboard_api, switchboard_staff, switchboard_system to current_user;

create extension if not exists pgcrypto;

create schema app;
comment on schema app is E'Application tables and the rules that guard them.';

create schema api;
comment on schema api is E'Functions the REST layer calls: each authenticates a token, checks a scope, sets the tenant and answers JSON.';

create schema admin;
comment on schema admin is E'Session-only operations (CLI): create locations, mint keys, invite members, seed demo data.';

create schema app_private;
comment on schema app_private is E'Internal SQL helpers, not exposed to the staff GraphQL.';

create function app.current_location_id()
 RETURNS uuid
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$ select nullif(current_setting('app.location_id', true), '')::uuid $function$;
comment on function app.current_location_id() is E'The tenant of the current transaction, set from the API token by app.authorize(); null when none.';

create function app.iso(ts timestamp with time zone)
 RETURNS text
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$ select to_char(ts at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') $function$;
comment on function app.iso(timestamp with time zone) is E'ISO 8601 UTC with milliseconds, the API''s timestamp format.';

create function app.mask_phone(phone text)
 RETURNS text
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
  select case when phone is null then null
              else '***-***-' || right(regexp_replace(phone, '\D', '', 'g'), 4) end
$function$;
comment on function app.mask_phone(text) is E'Caller phones leave the API as ***-***-NNNN.';

create function app.is_valid_timezone(tz text)
 RETURNS boolean
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$ select exists (select 1 from pg_catalog.pg_timezone_names where name = tz) $function$;
comment on function app.is_valid_timezone(text) is E'True for IANA zone names PostgreSQL knows. Declared immutable so a CHECK may use it; the zone list only changes with the server.';

create domain app.e164 as text constraint e164_check CHECK ((VALUE ~ '^\+[1-9][0-9]{6,14}$'::text));
comment on domain app.e164 is E'A phone number in E.164 form (+ and 7 to 15 digits).';

create domain app.https_url as text constraint https_url_check CHECK (((VALUE ~ '^https://[^\s/?#@]+[^\s]*$'::text) AND (length(VALUE) <= 2048)));
comment on domain app.https_url is E'An absolute https:// URL; webhooks and integrations never call plain HTTP.';

create domain app.hhmm as text constraint hhmm_check CHECK ((VALUE ~ '^([01][0-9]|2[0-3]):[0-5][0-9]$'::text));
comment on domain app.hhmm is E'A wall-clock time HH:MM (24 h) in the location''s timezone.';

create function app.known_scopes()
 RETURNS text[]
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
  select array[
    'locations:read', 'locations:write', 'api_keys:read', 'calls:read', 'transcripts:read',
    'recordings:read', 'leads:read', 'leads:write', 'bookings:read', 'bookings:write',
    'insights:read', 'faqs:read', 'faqs:write', 'pricebook:read', 'pricebook:write',
    'settings:read', 'settings:write', 'integrations:read', 'integrations:write',
    'webhooks:read', 'webhooks:write', 'notifications:read', 'members:read'
  ]
$function$;
comment on function app.known_scopes() is E'Every API token scope (docs/api-contract.md §5).';

create function app.event_types()
 RETURNS text[]
 LANGUAGE plpgsql
 IMMUTABLE PARALLEL SAFE
AS $function$
begin
  return array['call.ended', 'call.emergency', 'lead.created', 'lead.updated',
               'booking.created', 'booking.updated', 'spam.blocked'];
end
$function$;
comment on function app.event_types() is E'Event types a webhook endpoint may subscribe to.';

create function app.raise(code text, message text, details jsonb DEFAULT '{}'::jsonb)
 RETURNS void
 LANGUAGE plpgsql
 IMMUTABLE
AS $function$
begin
  raise exception using errcode = code, message = message, detail = coalesce(details, '{}')::text;
end
$function$;
comment on function app.raise(text,text,jsonb) is E'Raises one of our SQLSTATEs with JSON details; lets SQL-language functions fail inside expressions.';

create function app.tg__set_updated_at()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
  new.updated_at := now();
  return new;
end
$function$;
comment on function app.tg__set_updated_at() is E'Keeps updated_at current on every UPDATE.';

create function app.secure_tenant_table(tbl regclass, api_privileges text DEFAULT 'select, insert, update, delete'::text, col text DEFAULT 'location_id'::text)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
begin
  execute format('alter table %s enable row level security', tbl);
  execute format('alter table %s force row level security', tbl);
  execute format(
    'create policy tenant_isolation on %s using (%I = (select app.current_location_id())) with check (%I = (select app.current_location_id()))',
    tbl, col, col);
  execute format('create policy staff_all on %s to switchboard_staff using (true) with check (true)', tbl);
  execute format('create policy system_all on %s to switchboard_system using (true) with check (true)', tbl);
  execute format('grant select, insert, update, delete on %s to switchboard_staff, switchboard_system', tbl);
  if api_privileges <> '' then
    execute format('grant %s on %s to switchboard_api', api_privileges, tbl);
  end if;
end
$function$;
comment on function app.secure_tenant_table(regclass,text,text) is E'Enables and forces RLS on a tenant table with the standard policies and grants.';

create type app.page_cursor as (
  created_at timestamp with time zone,
  id uuid
);
comment on type app.page_cursor is E'Sort key of the last row of a list page.';

create function app.cursor_encode(created_at timestamp with time zone, id uuid)
 RETURNS text
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$
  select translate(encode(convert_to(
    to_char(created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') || '|' || id, 'UTF8'), 'base64'),
    E'+/=\n', '-_')
$function$;
comment on function app.cursor_encode(timestamp with time zone,uuid) is E'Opaque list cursor: base64url of the last row''s sort key.';

create function app.page_limit(page jsonb)
 RETURNS integer
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$ select least(greatest(coalesce((page ->> 'limit')::int, 50), 1), 200) $function$;
comment on function app.page_limit(jsonb) is E'Page size from { limit }: 1–200, default 50.';

create function app.page_after(page jsonb)
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
    return row(parts[1]::timestamptz, parts[2]::uuid)::app.page_cursor;
  exception when others then
    perform app.raise('SB400', 'Invalid cursor',
      jsonb_build_object('issues', jsonb_build_array(jsonb_build_object('path', 'cursor', 'message', 'Invalid cursor'))));
  end;
end
$function$;
comment on function app.page_after(jsonb) is E'Decodes { cursor }; a malformed one is a 400. No cursor is the bound above every row (''infinity'', the largest uuid), so the keyset comparison is the same on every page.';

create function app.page_result(items jsonb[], lim integer)
 RETURNS jsonb
 LANGUAGE plpgsql
 IMMUTABLE PARALLEL SAFE
AS $function$
begin
  return jsonb_build_object(
    'data', coalesce((select jsonb_agg(x -> 'j' order by o) from unnest(items[1:lim]) with ordinality as u(x, o)), '[]'::jsonb),
    'next_cursor', case when cardinality(items) > lim then items[lim] ->> 'c' end);
end
$function$;
comment on function app.page_result(jsonb[],integer) is E'Builds { data, next_cursor } from up to limit+1 items shaped { c: cursor, j: json }. plpgsql, so its plan is kept for the connection: a SQL function with a sub-select is not inlined and PostgreSQL 17 plans its body on every call.';

create function app.page_item(created_at timestamp with time zone, id uuid, j jsonb)
 RETURNS jsonb
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$ select jsonb_build_object('c', app.cursor_encode(created_at, id), 'j', j) $function$;
comment on function app.page_item(timestamp with time zone,uuid,jsonb) is E'One list element with its cursor.';

create function app.before_cursor(created_at timestamp with time zone, id uuid, after app.page_cursor)
 RETURNS boolean
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$ select (created_at, id) < (after.created_at, after.id) $function$;
comment on function app.before_cursor(timestamp with time zone,uuid,app.page_cursor) is E'Keyset predicate: the row sorts after the cursor (newest first; app.page_after). One row comparison, so it is an index condition on (created_at desc, id desc) in a plan made for the cursor''s value: a deep page starts at its cursor instead of filtering past every newer row. Statements whose plan is kept for any value write (created_at, id) < (select after.created_at, after.id) instead, whose sub-select reaches the index as plain values.';

create function api.ready()
 RETURNS boolean
 LANGUAGE sql
 STABLE
AS $function$ select true $function$;
comment on function api.ready() is E'Readiness probe: exists only once migrations are applied.';

create function app.dequeue(job_key text)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
begin
  delete from app_private.deferred_jobs d where d.job_key = dequeue.job_key;
  perform graphile_worker.remove_job(dequeue.job_key);
end
$function$;
comment on function app.dequeue(text) is E'SECURITY DEFINER because the voice functions'' owner has no rights on graphile_worker; only removes the job with this job_key, queued or deferred (no-op when there is none).';

create function app.worker_unlock(worker_ids text[])
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
begin
  perform graphile_worker.force_unlock_workers(worker_ids);
end
$function$;
comment on function app.worker_unlock(text[]) is E'graphile_worker.force_unlock_workers for pools presumed dead. SECURITY DEFINER because switchboard_system has no rights on graphile_worker.';

create table app_private.deferred_jobs (
  id bigint generated always as identity,
  job_key text,
  task text not null,
  payload json not null,
  run_at timestamp with time zone,
  max_attempts integer,
  priority integer default 0 not null,
  constraint deferred_jobs_pkey primary key (id),
  constraint deferred_jobs_job_key unique (job_key)
);
comment on table app_private.deferred_jobs is E'graphile-worker jobs queued by a transaction that deferred its wake-ups (app.defer_wakeups = on), waiting for app.flush_deferred_jobs() after its commit. Not tenant data: a local queue beside graphile_worker''s, like it.';

create function app.wakeups_deferred()
 RETURNS boolean
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$ select coalesce(current_setting('app.defer_wakeups', true), '') = 'on' $function$;
comment on function app.wakeups_deferred() is E'True when the current transaction defers its job inserts and engine wake-ups to app.flush_deferred_jobs() after its commit.';

create function app.flush_deferred_jobs()
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
declare
  specs graphile_worker.job_spec[];
  total int := 0;
begin
  -- Not waiting for the WAL flush: what this moves is already durable in app_private.deferred_jobs
  -- (committed by the transaction that parked it); if this commit is lost in a crash the rows are
  -- still parked and the next flush or the sweep hands them over.
  perform set_config('synchronous_commit', 'off', true);
  loop
    with taken as (
      delete from app_private.deferred_jobs d
       where d.id in (select q.id from app_private.deferred_jobs q order by q.id limit 1000 for update skip locked)
      returning d.*
    )
    select array_agg(row(t.task, t.payload, null, t.run_at, t.max_attempts, t.job_key, t.priority, null)::graphile_worker.job_spec
                     order by t.id)
      into specs from taken t;
    exit when specs is null;
    perform graphile_worker.add_jobs(specs);
    total := total + cardinality(specs);
  end loop;
  perform pg_notify('switchboard_webhooks', '');
  perform pg_notify('switchboard_notifications', '');
  return total;
end
$function$;
comment on function app.flush_deferred_jobs() is E'Adds the jobs deferring transactions parked in app_private.deferred_jobs (batches of 1,000) and wakes the webhook and notification engines; returns how many jobs it added. SECURITY DEFINER because the callers have no rights on graphile_worker.';

create function app.uuid_or_null(v text)
 RETURNS uuid
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$ select case when v ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' then v::uuid end $function$;
comment on function app.uuid_or_null(text) is E'The text as a uuid, or null when it is not one: lets a uuid column''s index serve a match on an id read from JSON.';

create function app.enqueue(task text, payload jsonb, run_at timestamp with time zone DEFAULT NULL::timestamp with time zone, job_key text DEFAULT NULL::text, max_attempts integer DEFAULT NULL::integer, priority integer DEFAULT NULL::integer)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
begin
  if app.wakeups_deferred() then
    insert into app_private.deferred_jobs (job_key, task, payload, run_at, max_attempts, priority)
    values (enqueue.job_key, enqueue.task, enqueue.payload::json, enqueue.run_at, enqueue.max_attempts,
            coalesce(enqueue.priority, 0))
    on conflict on constraint deferred_jobs_job_key do update
      set task = excluded.task, payload = excluded.payload, run_at = excluded.run_at,
          max_attempts = excluded.max_attempts, priority = excluded.priority;
    return;
  end if;
  perform graphile_worker.add_job(
    identifier := task, payload := payload::json, run_at := run_at,
    job_key := job_key, max_attempts := max_attempts, priority := priority);
end
$function$;
comment on function app.enqueue(text,jsonb,timestamp with time zone,text,integer,integer) is E'Adds a graphile-worker job (or, when the transaction defers its wake-ups, parks it in app_private.deferred_jobs): the one door into the queue. SECURITY DEFINER because the calling roles have no rights on graphile_worker; only adds a job.';

create function app.engine_wake(channel text)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
begin
  -- While the transaction defers its wake-ups, app.flush_deferred_jobs wakes every engine after the commit.
  if not app.wakeups_deferred() then
    -- One notification per channel and transaction (identical ones are merged at commit).
    perform pg_notify(channel, '');
  end if;
end
$function$;
comment on function app.engine_wake(text) is E'Wakes the engines listening on channel (NOTIFY) when work became due now, unless the transaction defers its wake-ups: the one place that decides it, for the webhook and notification engines alike.';

-- Grants: the one place for this concern's privileges (tenant tables get theirs from
-- app.secure_tenant_table above; only departures from it are here).
grant usage on schema app to switchboard_api, switchboard_staff;
grant usage, create on schema app to switchboard_system;
grant usage on schema api to switchboard_api, switchboard_staff;
grant usage, create on schema api to switchboard_system;
grant usage, create on schema admin to switchboard_system;
grant usage on schema app_private to switchboard_api, switchboard_staff, switchboard_system;
grant execute on function api.ready() to switchboard_api;
revoke execute on function app.dequeue(text) from public;
grant execute on function app.dequeue(text) to switchboard_system;
revoke execute on function app.worker_unlock(text[]) from public;
grant execute on function app.worker_unlock(text[]) to switchboard_system;
revoke execute on function app.flush_deferred_jobs() from public;
grant execute on function app.flush_deferred_jobs() to switchboard_system;
revoke execute on function app.enqueue(text,jsonb,timestamp with time zone,text,integer,integer) from public;
grant execute on function app.enqueue(text,jsonb,timestamp with time zone,text,integer,integer) to switchboard_system;

--! Previous: -
--! Hash: sha1:454a1f259a452425b6bd07c0509b750ec6b760b7
--! Message: roles, schemas and shared helpers

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

create schema app;
comment on schema app is E'Application tables and the rules that guard them.';
create schema api;
comment on schema api is E'Functions the REST layer calls: each authenticates a token, checks a scope, sets the tenant and answers JSON.';
create schema admin;
comment on schema admin is E'Session-only operations (CLI): create locations, mint keys, invite members, seed demo data.';

grant usage on schema app, api to switchboard_api, switchboard_staff, switchboard_system;
grant usage on schema admin to switchboard_system;
grant create on schema app, api, admin to switchboard_system;
revoke all on schema admin from public;

create extension if not exists pgcrypto;

-- Custom SQLSTATEs raised by our functions; src/http/errors.ts maps each to the error envelope.
--   SB400 validation_error   SB401 unauthorized   SB403 forbidden   SB404 not_found
--   SB409 conflict           SBTR9 invalid_transition               SBOA0 oauth_required
-- DETAIL, when present, is the JSON `details` object.

create function app.current_location_id() returns uuid
  language sql stable parallel safe
as $$ select nullif(current_setting('app.location_id', true), '')::uuid $$;
comment on function app.current_location_id() is
  E'The tenant of the current transaction, set from the API token by app.authorize(); null when none.';

create function app.iso(ts timestamptz) returns text
  language sql immutable parallel safe
as $$ select to_char(ts at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') $$;
comment on function app.iso(timestamptz) is E'ISO 8601 UTC with milliseconds, the API''s timestamp format.';

create function app.mask_phone(phone text) returns text
  language sql immutable parallel safe
as $$
  select case when phone is null then null
              else '***-***-' || right(regexp_replace(phone, '\D', '', 'g'), 4) end
$$;
comment on function app.mask_phone(text) is E'Caller phones leave the API as ***-***-NNNN.';

create function app.is_valid_timezone(tz text) returns boolean
  language sql immutable parallel safe
as $$ select exists (select 1 from pg_catalog.pg_timezone_names where name = tz) $$;
comment on function app.is_valid_timezone(text) is
  E'True for IANA zone names PostgreSQL knows. Declared immutable so a CHECK may use it; the zone list only changes with the server.';

create domain app.e164 as text check (value ~ '^\+[1-9][0-9]{6,14}$');
comment on domain app.e164 is E'A phone number in E.164 form (+ and 7 to 15 digits).';

create domain app.https_url as text check (value ~ '^https://[^\s/?#@]+[^\s]*$' and length(value) <= 2048);
comment on domain app.https_url is E'An absolute https:// URL; webhooks and integrations never call plain HTTP.';

create domain app.hhmm as text check (value ~ '^([01][0-9]|2[0-3]):[0-5][0-9]$');
comment on domain app.hhmm is E'A wall-clock time HH:MM (24 h) in the location''s timezone.';

create function app.known_scopes() returns text[]
  language sql immutable parallel safe
as $$
  select array[
    'locations:read', 'locations:write', 'api_keys:read', 'calls:read', 'transcripts:read',
    'recordings:read', 'leads:read', 'leads:write', 'bookings:read', 'bookings:write',
    'insights:read', 'faqs:read', 'faqs:write', 'pricebook:read', 'pricebook:write',
    'settings:read', 'settings:write', 'integrations:read', 'integrations:write',
    'webhooks:read', 'webhooks:write', 'notifications:read', 'members:read'
  ]
$$;
comment on function app.known_scopes() is E'Every API token scope (DESIGN.md §5).';

create function app.event_types() returns text[]
  language sql immutable parallel safe
as $$
  select array['call.ended', 'call.emergency', 'lead.created', 'lead.updated',
               'booking.created', 'booking.updated', 'spam.blocked']
$$;
comment on function app.event_types() is E'Event types a webhook endpoint may subscribe to.';

create function app.raise(code text, message text, details jsonb default '{}') returns void
  language plpgsql immutable
as $$
begin
  raise exception using errcode = code, message = message, detail = coalesce(details, '{}')::text;
end
$$;
comment on function app.raise(text, text, jsonb) is
  E'Raises one of our SQLSTATEs with JSON details; lets SQL-language functions fail inside expressions.';

create function app.tg__set_updated_at() returns trigger
  language plpgsql
as $$
begin
  new.updated_at := now();
  return new;
end
$$;
comment on function app.tg__set_updated_at() is E'Keeps updated_at current on every UPDATE.';

/*
 * Tenancy: every tenant table gets the same three policies, so a table secured through this
 * function cannot differ from the others. The API role sees only the location of its token;
 * staff see all; switchboard_system (owner of the cross-tenant lookups) sees all.
 * FORCE makes the owner obey the policies too when the owner is not a superuser.
 */
create function app.secure_tenant_table(tbl regclass, api_privileges text default 'select, insert, update, delete', col text default 'location_id')
  returns void
  language plpgsql
as $$
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
$$;
comment on function app.secure_tenant_table(regclass, text, text) is
  E'Enables and forces RLS on a tenant table with the standard policies and grants.';

/*
 * Jobs are enqueued only through this wrapper so API-role transactions (triggers) can add jobs
 * without any right on the graphile_worker schema.
 */
create function app.enqueue(task text, payload jsonb, run_at timestamptz default null, job_key text default null, max_attempts int default null)
  returns void
  language plpgsql volatile security definer
  set search_path to pg_catalog, public, pg_temp
as $$
begin
  perform graphile_worker.add_job(
    identifier := task, payload := payload::json, run_at := run_at,
    job_key := job_key, max_attempts := max_attempts);
end
$$;
comment on function app.enqueue(text, jsonb, timestamptz, text, int) is
  E'SECURITY DEFINER because the API role has no rights on graphile_worker; only adds a job.';
revoke execute on function app.enqueue(text, jsonb, timestamptz, text, int) from public;
grant execute on function app.enqueue(text, jsonb, timestamptz, text, int) to switchboard_api, switchboard_staff, switchboard_system;

--! Previous: sha1:db669573273eb80bcda5a28c16c337e593a798f0
--! Hash: sha1:16096feef6c2d992d3cb443b012eeacc09334e4a
--! Message: locations members api keys

-- Locations (the tenant, a reference table when distributed), members, API keys (token look-up by
-- hash), the token check every REST call starts with (app.authorize) and the CLI's functions.

create table app.locations (
  id uuid default gen_random_uuid() not null,
  slug text not null,
  name text not null,
  legal_name text,
  license_number text,
  industry text default 'hvac'::text not null,
  website_url text,
  timezone text default 'America/New_York'::text not null,
  owner_cell app.e164,
  service_areas text[] default '{}'::text[] not null,
  zip_codes text[] default '{}'::text[] not null,
  travel_radius_miles numeric,
  service_phone app.e164,
  created_at timestamp with time zone default now() not null,
  updated_at timestamp with time zone default now() not null,
  constraint locations_pkey primary key (id),
  constraint locations_slug_key unique (slug),
  constraint locations_service_phone_key unique (service_phone),
  constraint locations_slug_check check (((slug ~ '^[a-z0-9][a-z0-9-]{1,62}$'::text) AND (slug !~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'::text))),
  constraint locations_name_check check (((length(name) >= 1) AND (length(name) <= 200))),
  constraint locations_legal_name_check check ((length(legal_name) <= 200)),
  constraint locations_license_number_check check ((length(license_number) <= 100)),
  constraint locations_industry_check check ((industry = ANY (ARRAY['hvac'::text, 'plumbing'::text, 'electrical'::text, 'roofing'::text, 'appliance_repair'::text, 'garage_door'::text, 'pest_control'::text, 'landscaping'::text, 'cleaning'::text, 'general_contractor'::text, 'other'::text]))),
  constraint locations_website_url_check check (((website_url ~ '^https?://'::text) AND (length(website_url) <= 2048))),
  constraint locations_timezone_check check (app.is_valid_timezone(timezone)),
  constraint locations_zip_codes_check check ((array_to_string(zip_codes, ','::text) ~ '^([0-9A-Za-z -]{3,10}(,|$))*$'::text)),
  constraint locations_travel_radius_miles_check check (((travel_radius_miles >= (0)::numeric) AND (travel_radius_miles <= (1000)::numeric)))
);
comment on table app.locations is E'A business location: the tenant. Every other tenant row carries its id.';
comment on column app.locations.slug is E'URL handle; usable instead of the id in API paths. Never shaped like a UUID.';
comment on column app.locations.industry is E'Trade of the business (the spec leaves the list open; see docs/decisions.md).';
comment on column app.locations.timezone is E'IANA zone; business hours, insights and dates are in this zone.';
comment on column app.locations.owner_cell is E'Owner''s mobile (E.164): default SMS recipient of emergencies.';
comment on column app.locations.service_areas is E'Towns or areas served, read to callers.';
comment on column app.locations.zip_codes is E'Postal codes served.';
comment on column app.locations.travel_radius_miles is E'How far technicians travel.';
comment on column app.locations.service_phone is E'The number the voice agent answers for this location; routes pre-call webhooks here.';
select app.secure_tenant_table('app.locations', 'select, update', 'id');

create table app.members (
  id uuid default gen_random_uuid() not null,
  location_id uuid not null,
  email text not null,
  name text,
  role text default 'member'::text not null,
  invited_at timestamp with time zone default now() not null,
  joined_at timestamp with time zone,
  created_at timestamp with time zone default now() not null,
  constraint members_pkey primary key (id, location_id),
  constraint members_email_check check (((email ~ '^[^@\s]+@[^@\s]+\.[^@\s]+$'::text) AND (length(email) <= 320))),
  constraint members_name_check check ((length(name) <= 200)),
  constraint members_role_check check ((role = ANY (ARRAY['owner'::text, 'admin'::text, 'member'::text]))),
  constraint members_location_id_fkey foreign key (location_id) references app.locations (id) on delete cascade
);
comment on table app.members is E'People of a location (dashboard users). Owners and admins get e-mail notifications by default.';
comment on column app.members.role is E'owner | admin | member.';
comment on column app.members.joined_at is E'Null until the invitation is accepted.';
select app.secure_tenant_table('app.members', 'select');
create unique index members_location_email_key on app.members (location_id, lower(email));
create index members_location_created_idx on app.members (location_id, created_at DESC, id DESC);

create table app.api_keys (
  id uuid default gen_random_uuid() not null,
  location_id uuid not null,
  label text not null,
  key_prefix text not null,
  token_hash text not null,
  scopes text[] default '{}'::text[] not null,
  created_at timestamp with time zone default now() not null,
  last_used_at timestamp with time zone,
  revoked_at timestamp with time zone,
  constraint api_keys_pkey primary key (id),
  constraint api_keys_token_hash_key unique (token_hash),
  constraint api_keys_label_check check (((length(label) >= 1) AND (length(label) <= 200))),
  constraint api_keys_key_prefix_check check ((length(key_prefix) = 8)),
  constraint api_keys_token_hash_check check ((token_hash ~ '^[0-9a-f]{64}$'::text)),
  constraint api_keys_scopes_check check ((scopes <@ app.known_scopes())),
  constraint api_keys_location_id_fkey foreign key (location_id) references app.locations (id) on delete cascade
);
comment on table app.api_keys is E'Location-scoped API tokens. Only the SHA-256 of a token is kept; the token itself is shown once.';
comment on column app.api_keys.key_prefix is E'First 8 characters of the token, to recognise it.';
comment on column app.api_keys.token_hash is E'Lowercase hex SHA-256 of the token. Never returned by any API.';
comment on column app.api_keys.scopes is E'What the token may do (see app.known_scopes()).';
comment on column app.api_keys.last_used_at is E'Refreshed at most once a minute.';
comment on column app.api_keys.revoked_at is E'Set when revoked; the token is refused from then on.';
select app.secure_tenant_table('app.api_keys', 'select');
create index api_keys_location_created_idx on app.api_keys (location_id, created_at DESC, id DESC);

create type app.location_shape as (
  id uuid,
  slug text,
  name text,
  legal_name text,
  license_number text,
  industry text,
  website_url text,
  timezone text,
  owner_cell text,
  service_areas text[],
  zip_codes text[],
  travel_radius_miles numeric,
  service_phone text,
  created_at text,
  updated_at text
);
comment on type app.location_shape is E'The fields of the API''s location record, in order.';

create function app.location_js(l app.locations)
 RETURNS json
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$
  select to_json(row(
    l.id, l.slug, l.name, l.legal_name, l.license_number, l.industry, l.website_url, l.timezone,
    l.owner_cell, l.service_areas, l.zip_codes, l.travel_radius_miles, l.service_phone,
    app.iso(l.created_at), app.iso(l.updated_at))::app.location_shape)
$function$;
comment on function app.location_js(app.locations) is E'Location as the API shows it, as json text.';

create function app.location_json(l app.locations)
 RETURNS jsonb
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$ select app.location_js(l)::jsonb $function$;
comment on function app.location_json(app.locations) is E'Location as the API shows it.';

create type app.api_key_shape as (
  id uuid,
  location_id uuid,
  label text,
  key_prefix text,
  scopes text[],
  created_at text,
  last_used_at text,
  revoked_at text
);
comment on type app.api_key_shape is E'The fields of the API''s api key record, in order.';

create function app.api_key_js(k app.api_keys)
 RETURNS json
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$
  select to_json(row(
    k.id, k.location_id, k.label, k.key_prefix, k.scopes, app.iso(k.created_at),
    app.iso(k.last_used_at), app.iso(k.revoked_at))::app.api_key_shape)
$function$;
comment on function app.api_key_js(app.api_keys) is E'API key listing record as json text: never the token or its hash.';

create function app.api_key_json(k app.api_keys)
 RETURNS jsonb
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$ select app.api_key_js(k)::jsonb $function$;
comment on function app.api_key_json(app.api_keys) is E'API key listing record: never the token or its hash.';

create type app.member_shape as (
  id uuid,
  location_id uuid,
  email text,
  name text,
  role text,
  invited_at text,
  joined_at text
);
comment on type app.member_shape is E'The fields of the API''s member record, in order.';

create function app.member_js(m app.members)
 RETURNS json
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$
  select to_json(row(
    m.id, m.location_id, m.email, m.name, m.role, app.iso(m.invited_at), app.iso(m.joined_at))::app.member_shape)
$function$;
comment on function app.member_js(app.members) is E'Member as the API shows it, as json text.';

create function app.member_json(m app.members)
 RETURNS jsonb
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$ select app.member_js(m)::jsonb $function$;
comment on function app.member_json(app.members) is E'Member as the API shows it.';

create function app.tg_locations__defaults()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
begin
  insert into app.call_forwarding (location_id) values (new.id);
  insert into app.agent_settings (location_id) values (new.id);
  insert into app.notification_settings (location_id) values (new.id);
  return null;
end
$function$;
comment on function app.tg_locations__defaults() is E'Creates the call forwarding, agent and notification settings rows of a new location.';

create type app.auth as (
  key_id uuid,
  location_id uuid,
  scopes text[]
);
comment on type app.auth is E'What a valid token grants: its key, its one location, its scopes.';

create function app.authorize(token_hash text, location_ref text, scope text)
 RETURNS app.auth
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
declare
  k app.api_keys;
  ignored text;
begin
  select * into k from app.api_keys
   where api_keys.token_hash = authorize.token_hash and revoked_at is null;
  if not found then
    perform app.raise('SB401', 'Missing, malformed, unknown or revoked bearer token');
  end if;
  if location_ref is not null then
    if not exists (
      select 1 from app.locations l
       where l.id = k.location_id and (l.id::text = lower(location_ref) or l.slug = location_ref)) then
      perform app.raise('SB404', 'Location not found');
    end if;
  end if;
  if scope is not null and not scope = any (k.scopes) then
    perform app.raise('SB403', format('This token lacks the required scope %s', scope),
                      jsonb_build_object('required_scope', scope));
  end if;
  if k.last_used_at is null or k.last_used_at < now() - interval '60 seconds' then
    update app.api_keys set last_used_at = now() where id = k.id;
  end if;
  ignored := set_config('app.location_id', k.location_id::text, true);
  return row(k.id, k.location_id, k.scopes)::app.auth;
end
$function$;
alter function app.authorize(text,text,text) owner to switchboard_system;
comment on function app.authorize(text,text,text) is E'Authenticates a token hash, checks location and scope, and sets app.location_id for the transaction.';

create function admin.resolve_location(ref text)
 RETURNS uuid
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
declare
  loc uuid;
begin
  select id into loc from app.locations where id::text = lower(ref) or slug = ref;
  if loc is null then perform app.raise('SB404', format('Location %s not found', ref)); end if;
  return loc;
end
$function$;
alter function admin.resolve_location(text) owner to switchboard_system;
comment on function admin.resolve_location(text) is E'A location by id or slug, or SB404.';

create function admin.location_create(attrs jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
declare
  l app.locations;
begin
  insert into app.locations (name, slug, timezone, service_phone, owner_cell, industry)
  values (attrs ->> 'name', attrs ->> 'slug', coalesce(attrs ->> 'timezone', 'America/New_York'),
          attrs ->> 'service_phone', attrs ->> 'owner_cell', coalesce(attrs ->> 'industry', 'hvac'))
  returning * into l;
  return app.location_json(l);
end
$function$;
alter function admin.location_create(jsonb) owner to switchboard_system;
comment on function admin.location_create(jsonb) is E'CLI: location create.';

create function admin.location_list()
 RETURNS jsonb
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
  select coalesce(jsonb_agg(app.location_json(l) order by l.created_at, l.id), '[]') from app.locations l
$function$;
alter function admin.location_list() owner to switchboard_system;
comment on function admin.location_list() is E'CLI: location list.';

create function admin.key_create(location_ref text, label text, scopes text[], token_hash text, key_prefix text)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
declare
  k app.api_keys;
  unknown text[] := array(select s from unnest(scopes) s where not s = any (app.known_scopes()));
begin
  if cardinality(unknown) > 0 then
    perform app.raise('SB400', format('Unknown scope(s): %s', array_to_string(unknown, ', ')),
      jsonb_build_object('issues', jsonb_build_array(jsonb_build_object('path', 'scopes', 'message', 'Unknown scope(s): ' || array_to_string(unknown, ', ')))));
  end if;
  insert into app.api_keys (location_id, label, scopes, token_hash, key_prefix)
  values (admin.resolve_location(location_ref), label, array(select distinct s from unnest(scopes) s order by 1), token_hash, key_prefix)
  returning * into k;
  return app.api_key_json(k);
end
$function$;
alter function admin.key_create(text,text,text[],text,text) owner to switchboard_system;
comment on function admin.key_create(text,text,text[],text,text) is E'CLI: key create (the CLI makes the token and passes only its hash and prefix).';

create function admin.key_list(location_ref text)
 RETURNS jsonb
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
  select coalesce(jsonb_agg(app.api_key_json(k) order by k.created_at desc, k.id desc), '[]')
    from app.api_keys k where k.location_id = admin.resolve_location(location_ref)
$function$;
alter function admin.key_list(text) owner to switchboard_system;
comment on function admin.key_list(text) is E'CLI: key list.';

create function admin.key_revoke(location_ref text, key_id uuid)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
declare
  k app.api_keys;
begin
  update app.api_keys set revoked_at = coalesce(revoked_at, now())
   where id = key_id and location_id = admin.resolve_location(location_ref)
  returning * into k;
  if k.id is null then perform app.raise('SB404', 'API key not found'); end if;
  return app.api_key_json(k);
end
$function$;
alter function admin.key_revoke(text,uuid) owner to switchboard_system;
comment on function admin.key_revoke(text,uuid) is E'CLI: key revoke (idempotent; keeps the first revocation time).';

create function admin.member_invite(location_ref text, email text, role text, name text)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
declare
  m app.members;
begin
  insert into app.members (location_id, email, role, name)
  values (admin.resolve_location(location_ref), email, coalesce(role, 'member'), name)
  returning * into m;
  return app.member_json(m);
end
$function$;
alter function admin.member_invite(text,text,text,text) owner to switchboard_system;
comment on function admin.member_invite(text,text,text,text) is E'CLI: member invite.';

create function app_private.tg__auth_cache_notify()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
declare
  -- tg_argv[0]: the column holding the location id (id on locations, location_id on keys).
  before text := to_jsonb(old) ->> tg_argv[0];
  after text := case when tg_op = 'UPDATE' then to_jsonb(new) ->> tg_argv[0] end;
begin
  perform pg_notify('switchboard_auth', before);
  if tg_op = 'UPDATE' and after is distinct from before then
    perform pg_notify('switchboard_auth', after);
  end if;
  return null;
end
$function$;
comment on function app_private.tg__auth_cache_notify() is E'NOTIFY switchboard_auth with the location id of a changed or deleted API key or location (both ids when a key moves): API processes drop their cached GET /me answers of that location (docs/performance.md "GET /me"). The argument names the location id column.';

-- Triggers (name prefix = firing order; see migrations/CONVENTIONS.md)
create trigger _100_set_updated_at BEFORE UPDATE ON app.locations FOR EACH ROW
  execute function app.tg__set_updated_at();
create trigger _300_defaults AFTER INSERT ON app.locations FOR EACH ROW
  execute function app.tg_locations__defaults();
create trigger _900_auth_cache AFTER DELETE OR UPDATE ON app.locations FOR EACH ROW
  execute function app_private.tg__auth_cache_notify('id');
comment on trigger _900_auth_cache on app.locations is E'A location''s edit or deletion reaches cached GET /me answers at once.';
create trigger _900_auth_cache AFTER UPDATE ON app.api_keys FOR EACH ROW WHEN (((to_jsonb(old.*) - 'last_used_at'::text) IS DISTINCT FROM (to_jsonb(new.*) - 'last_used_at'::text)))
  execute function app_private.tg__auth_cache_notify('location_id');
comment on trigger _900_auth_cache on app.api_keys is E'A key''s change other than last_used_at (revocation, scopes, label) reaches cached GET /me answers at once.';
create trigger _900_auth_cache_delete AFTER DELETE ON app.api_keys FOR EACH ROW
  execute function app_private.tg__auth_cache_notify('location_id');
comment on trigger _900_auth_cache_delete on app.api_keys is E'A deleted key reaches cached GET /me answers at once.';

-- Grants: the one place for this concern's privileges (tenant tables get theirs from
-- app.secure_tenant_table above; only departures from it are here).
revoke execute on function admin.resolve_location(text) from public;
revoke execute on function admin.location_create(jsonb) from public;
revoke execute on function admin.location_list() from public;
revoke execute on function admin.key_create(text,text,text[],text,text) from public;
revoke execute on function admin.key_list(text) from public;
revoke execute on function admin.key_revoke(text,uuid) from public;
revoke execute on function admin.member_invite(text,text,text,text) from public;

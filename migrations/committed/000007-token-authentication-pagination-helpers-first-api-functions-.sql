--! Previous: sha1:606d2ae54cbd2d448751eaaa5a82a93392086146
--! Hash: sha1:c2c05df5a418d4d85e1d5e016974034f38da65c8
--! Message: token authentication, pagination helpers, first API functions, CLI functions

create function app.location_json(l app.locations) returns jsonb
  language sql stable parallel safe
as $$
  select jsonb_build_object(
    'id', l.id, 'slug', l.slug, 'name', l.name, 'legal_name', l.legal_name,
    'license_number', l.license_number, 'industry', l.industry, 'website_url', l.website_url,
    'timezone', l.timezone, 'owner_cell', l.owner_cell, 'service_areas', to_jsonb(l.service_areas),
    'zip_codes', to_jsonb(l.zip_codes), 'travel_radius_miles', l.travel_radius_miles,
    'service_phone', l.service_phone, 'created_at', app.iso(l.created_at), 'updated_at', app.iso(l.updated_at))
$$;
comment on function app.location_json(app.locations) is E'Location as the API shows it.';

create function app.api_key_json(k app.api_keys) returns jsonb
  language sql stable parallel safe
as $$
  select jsonb_build_object(
    'id', k.id, 'location_id', k.location_id, 'label', k.label, 'key_prefix', k.key_prefix,
    'scopes', to_jsonb(k.scopes), 'created_at', app.iso(k.created_at),
    'last_used_at', app.iso(k.last_used_at), 'revoked_at', app.iso(k.revoked_at))
$$;
comment on function app.api_key_json(app.api_keys) is E'API key listing record: never the token or its hash.';

create function app.member_json(m app.members) returns jsonb
  language sql stable parallel safe
as $$
  select jsonb_build_object(
    'id', m.id, 'location_id', m.location_id, 'email', m.email, 'name', m.name, 'role', m.role,
    'invited_at', app.iso(m.invited_at), 'joined_at', app.iso(m.joined_at))
$$;
comment on function app.member_json(app.members) is E'Member as the API shows it.';

-- Every location starts with its singleton settings rows, so GET/PATCH never meet a missing row.
create function app.tg_locations__defaults() returns trigger
  language plpgsql
as $$
begin
  insert into app.call_forwarding (location_id) values (new.id);
  insert into app.agent_settings (location_id) values (new.id);
  insert into app.notification_settings (location_id) values (new.id);
  return null;
end
$$;
comment on function app.tg_locations__defaults() is E'Creates the call forwarding, agent and notification settings rows of a new location.';
create trigger _300_defaults after insert on app.locations
  for each row execute function app.tg_locations__defaults();

create type app.auth as (key_id uuid, location_id uuid, scopes text[]);
comment on type app.auth is E'What a valid token grants: its key, its one location, its scopes.';

/*
 * The single entry of every token request. SECURITY DEFINER (owned by switchboard_system)
 * because the token's key must be found before any tenant is known; it then pins the tenant
 * for the rest of the transaction, so the calling function runs under RLS as that location.
 * Order of checks: token (401), location (404, the same for missing and foreign), scope (403).
 */
create function app.authorize(token_hash text, location_ref text, scope text) returns app.auth
  language plpgsql volatile security definer
  set search_path to pg_catalog, public, pg_temp
as $$
declare
  k app.api_keys;
begin
  select * into k from app.api_keys
   where api_keys.token_hash = authorize.token_hash and revoked_at is null;
  if not found then
    perform app.raise('SB401', 'Missing, malformed, unknown or revoked bearer token');
  end if;
  if location_ref is not null and not exists (
    select 1 from app.locations l
     where l.id = k.location_id and (l.id::text = lower(location_ref) or l.slug = location_ref)) then
    perform app.raise('SB404', 'Location not found');
  end if;
  if scope is not null and not scope = any (k.scopes) then
    perform app.raise('SB403', format('This token lacks the required scope %s', scope),
                      jsonb_build_object('required_scope', scope));
  end if;
  if k.last_used_at is null or k.last_used_at < now() - interval '60 seconds' then
    update app.api_keys set last_used_at = now() where id = k.id;
  end if;
  perform set_config('app.location_id', k.location_id::text, true);
  return row(k.id, k.location_id, k.scopes)::app.auth;
end
$$;
alter function app.authorize(text, text, text) owner to switchboard_system;
comment on function app.authorize(text, text, text) is
  E'Authenticates a token hash, checks location and scope, and sets app.location_id for the transaction.';

-- Lists: newest first, keyset pagination on (created_at, id) with an opaque cursor.
create type app.page_cursor as (created_at timestamptz, id uuid);
comment on type app.page_cursor is E'Sort key of the last row of a list page.';

create function app.cursor_encode(created_at timestamptz, id uuid) returns text
  language sql immutable parallel safe
as $$
  select translate(encode(convert_to(
    to_char(created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') || '|' || id, 'UTF8'), 'base64'),
    '+/=', '-_')
$$;
comment on function app.cursor_encode(timestamptz, uuid) is E'Opaque list cursor: base64url of the last row''s sort key.';

create function app.page_limit(page jsonb) returns int
  language sql immutable parallel safe
as $$ select least(greatest(coalesce((page ->> 'limit')::int, 50), 1), 200) $$;
comment on function app.page_limit(jsonb) is E'Page size from { limit }: 1–200, default 50.';

create function app.page_after(page jsonb) returns app.page_cursor
  language plpgsql immutable
as $$
declare
  raw text := page ->> 'cursor';
  parts text[];
begin
  if raw is null or raw = '' then return null; end if;
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
$$;
comment on function app.page_after(jsonb) is E'Decodes { cursor }; a malformed one is a 400.';

create function app.page_result(items jsonb[], lim int) returns jsonb
  language sql immutable parallel safe
as $$
  select jsonb_build_object(
    'data', coalesce((select jsonb_agg(x -> 'j' order by o) from unnest(items[1:lim]) with ordinality as u(x, o)), '[]'::jsonb),
    'next_cursor', case when cardinality(items) > lim then items[lim] ->> 'c' end)
$$;
comment on function app.page_result(jsonb[], int) is
  E'Builds { data, next_cursor } from up to limit+1 items shaped { c: cursor, j: json }.';

create function app.page_item(created_at timestamptz, id uuid, j jsonb) returns jsonb
  language sql immutable parallel safe
as $$ select jsonb_build_object('c', app.cursor_encode(created_at, id), 'j', j) $$;
comment on function app.page_item(timestamptz, uuid, jsonb) is E'One list element with its cursor.';

create function app.before_cursor(created_at timestamptz, id uuid, after app.page_cursor) returns boolean
  language sql immutable parallel safe
as $$ select after is null or (created_at, id) < (after.created_at, after.id) $$;
comment on function app.before_cursor(timestamptz, uuid, app.page_cursor) is E'Keyset predicate: the row sorts after the cursor (newest first).';

-- API functions. Each is SECURITY INVOKER: after app.authorize() it runs as the API role under RLS.
create function api.me(token_hash text) returns jsonb
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, null, null);
begin
  return (select jsonb_build_object(
            'api_key', app.api_key_json(k),
            'location', app.location_json(l),
            'scopes', to_jsonb(a.scopes))
            from app.api_keys k join app.locations l on l.id = k.location_id
           where k.id = a.key_id);
end
$$;
comment on function api.me(text) is E'GET /me: the calling key, its location and scopes. No scope needed.';

create function api.locations_list(token_hash text, page jsonb) returns jsonb
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, null, 'locations:read');
  lim int := app.page_limit(page);
  after app.page_cursor := app.page_after(page);
begin
  return app.page_result(array(
    select app.page_item(l.created_at, l.id, app.location_json(l)) from app.locations l
     where app.before_cursor(l.created_at, l.id, after)
     order by l.created_at desc, l.id desc limit lim + 1), lim);
end
$$;
comment on function api.locations_list(text, jsonb) is E'GET /locations: the locations the token can reach (its own; RLS shows no other).';

create function api.location_get(token_hash text, location_ref text) returns jsonb
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'locations:read');
begin
  return (select app.location_json(l) from app.locations l where l.id = a.location_id);
end
$$;
comment on function api.location_get(text, text) is E'GET /locations/{id}.';

create function api.location_patch(token_hash text, location_ref text, patch jsonb) returns jsonb
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'locations:write');
  l app.locations;
begin
  update app.locations t
     set (slug, name, legal_name, license_number, industry, website_url, timezone, owner_cell,
          service_areas, zip_codes, travel_radius_miles, service_phone)
       = (select p.slug, p.name, p.legal_name, p.license_number, p.industry, p.website_url,
                 p.timezone, p.owner_cell, p.service_areas, p.zip_codes, p.travel_radius_miles,
                 p.service_phone
            from jsonb_populate_record(t, patch) p)
   where t.id = a.location_id
  returning * into l;
  return app.location_json(l);
end
$$;
comment on function api.location_patch(text, text, jsonb) is
  E'PATCH /locations/{id}: fields present in the body replace the stored ones (validated by the API first).';

create function api.api_keys_list(token_hash text, location_ref text, page jsonb) returns jsonb
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'api_keys:read');
  lim int := app.page_limit(page);
  after app.page_cursor := app.page_after(page);
begin
  return app.page_result(array(
    select app.page_item(k.created_at, k.id, app.api_key_json(k)) from app.api_keys k
     where app.before_cursor(k.created_at, k.id, after)
     order by k.created_at desc, k.id desc limit lim + 1), lim);
end
$$;
comment on function api.api_keys_list(text, text, jsonb) is E'GET /locations/{id}/api-keys: listing records only.';

create function api.ready() returns boolean
  language sql stable
as $$ select true $$;
comment on function api.ready() is E'Readiness probe: exists only once migrations are applied.';

grant execute on all functions in schema api to switchboard_api;

-- CLI (session-only) operations. SECURITY DEFINER as switchboard_system: they look across locations.
create function admin.resolve_location(ref text) returns uuid
  language plpgsql stable security definer
  set search_path to pg_catalog, public, pg_temp
as $$
declare
  loc uuid;
begin
  select id into loc from app.locations where id::text = lower(ref) or slug = ref;
  if loc is null then perform app.raise('SB404', format('Location %s not found', ref)); end if;
  return loc;
end
$$;
alter function admin.resolve_location(text) owner to switchboard_system;
comment on function admin.resolve_location(text) is E'A location by id or slug, or SB404.';

create function admin.location_create(attrs jsonb) returns jsonb
  language plpgsql volatile security definer
  set search_path to pg_catalog, public, pg_temp
as $$
declare
  l app.locations;
begin
  insert into app.locations (name, slug, timezone, service_phone, owner_cell, industry)
  values (attrs ->> 'name', attrs ->> 'slug', coalesce(attrs ->> 'timezone', 'America/New_York'),
          attrs ->> 'service_phone', attrs ->> 'owner_cell', coalesce(attrs ->> 'industry', 'hvac'))
  returning * into l;
  return app.location_json(l);
end
$$;
alter function admin.location_create(jsonb) owner to switchboard_system;
comment on function admin.location_create(jsonb) is E'CLI: location create.';

create function admin.location_list() returns jsonb
  language sql stable security definer
  set search_path to pg_catalog, public, pg_temp
as $$
  select coalesce(jsonb_agg(app.location_json(l) order by l.created_at, l.id), '[]') from app.locations l
$$;
alter function admin.location_list() owner to switchboard_system;
comment on function admin.location_list() is E'CLI: location list.';

create function admin.key_create(location_ref text, label text, scopes text[], token_hash text, key_prefix text) returns jsonb
  language plpgsql volatile security definer
  set search_path to pg_catalog, public, pg_temp
as $$
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
$$;
alter function admin.key_create(text, text, text[], text, text) owner to switchboard_system;
comment on function admin.key_create(text, text, text[], text, text) is E'CLI: key create (the CLI makes the token and passes only its hash and prefix).';

create function admin.key_list(location_ref text) returns jsonb
  language sql stable security definer
  set search_path to pg_catalog, public, pg_temp
as $$
  select coalesce(jsonb_agg(app.api_key_json(k) order by k.created_at desc, k.id desc), '[]')
    from app.api_keys k where k.location_id = admin.resolve_location(location_ref)
$$;
alter function admin.key_list(text) owner to switchboard_system;
comment on function admin.key_list(text) is E'CLI: key list.';

create function admin.key_revoke(location_ref text, key_id uuid) returns jsonb
  language plpgsql volatile security definer
  set search_path to pg_catalog, public, pg_temp
as $$
declare
  k app.api_keys;
begin
  update app.api_keys set revoked_at = coalesce(revoked_at, now())
   where id = key_id and location_id = admin.resolve_location(location_ref)
  returning * into k;
  if k.id is null then perform app.raise('SB404', 'API key not found'); end if;
  return app.api_key_json(k);
end
$$;
alter function admin.key_revoke(text, uuid) owner to switchboard_system;
comment on function admin.key_revoke(text, uuid) is E'CLI: key revoke (idempotent; keeps the first revocation time).';

create function admin.member_invite(location_ref text, email text, role text, name text) returns jsonb
  language plpgsql volatile security definer
  set search_path to pg_catalog, public, pg_temp
as $$
declare
  m app.members;
begin
  insert into app.members (location_id, email, role, name)
  values (admin.resolve_location(location_ref), email, coalesce(role, 'member'), name)
  returning * into m;
  return app.member_json(m);
end
$$;
alter function admin.member_invite(text, text, text, text) owner to switchboard_system;
comment on function admin.member_invite(text, text, text, text) is E'CLI: member invite.';

revoke execute on all functions in schema admin from public;

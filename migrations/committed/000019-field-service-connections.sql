--! Previous: sha1:dd5f62073f80786ca7d2751cdd9735dad519add9
--! Hash: sha1:6b018cd965913ff4bb21f95495ed5a5130994406
--! Message: field service connections

-- ==== Field-service connections (Jobber, Housecall Pro, ServiceTitan) ====
-- docs/integrations.md: OAuth connect, encrypted tokens, the sync log.

-- current.sql is re-applied on every change (graphile-migrate watch): start from a clean slate.
drop table if exists app.integration_syncs;
drop table if exists app.integration_oauth_states;
drop function if exists api.integration_authorize(text,text,text,boolean,text,bytea,text);
drop function if exists app.integration_oauth_consume(text);
drop function if exists app.integration_oauth_connect(uuid,text,text,timestamp with time zone,bytea);
drop function if exists api.integration_credentials_put(text,text,text,text,timestamp with time zone,bytea);
drop function if exists api.integration_disconnect(text,text,text);
alter table app.integrations drop column if exists secrets_ciphertext;

-- Tokens and client secrets, encrypted by the application (AES-256-GCM, INTEGRATION_ENCRYPTION_KEY)
-- as one JSON document; the database never holds them in clear. The old clear-text columns stay
-- unused (always null).
alter table app.integrations add column secrets_ciphertext bytea;
comment on column app.integrations.secrets_ciphertext is E'@behavior -select -filterBy -orderBy\nAES-256-GCM ciphertext (12-byte IV, 16-byte tag, then the sealed JSON of access_token, refresh_token, client_id, client_secret); never returned by any API, never shown to staff.';
select app.staff_hide_columns('app.integrations', array['secrets_ciphertext']);

create table app.integration_oauth_states (
  id uuid default gen_random_uuid() not null,
  location_id uuid not null,
  provider text not null,
  state_sha256 text not null,
  code_verifier_ciphertext bytea not null,
  expires_at timestamp with time zone default (now() + interval '10 minutes') not null,
  used_at timestamp with time zone,
  created_at timestamp with time zone default now() not null,
  constraint integration_oauth_states_pkey primary key (id, location_id),
  constraint integration_oauth_states_provider_check check (provider = any (array['jobber', 'housecall_pro'])),
  constraint integration_oauth_states_state_sha256_check check (state_sha256 ~ '^[0-9a-f]{64}$'),
  constraint integration_oauth_states_location_id_fkey foreign key (location_id) references app.locations (id) on delete cascade
);
comment on table app.integration_oauth_states is E'Pending OAuth authorizations: the state handed to the provider (single use, 10 minutes, bound to one location) and its PKCE verifier (docs/integrations.md).';
comment on column app.integration_oauth_states.state_sha256 is E'SHA-256 hex of the state parameter; the state itself is only in the authorize URL.';
comment on column app.integration_oauth_states.code_verifier_ciphertext is E'@behavior -select -filterBy -orderBy\nPKCE code verifier, AES-256-GCM ciphertext.';
comment on column app.integration_oauth_states.used_at is E'Set by the callback that consumed the state; a second callback with it is refused.';
select app.secure_tenant_table('app.integration_oauth_states', 'select, insert, delete');
select app.staff_hide_table('app.integration_oauth_states');
create unique index integration_oauth_states_state_key on app.integration_oauth_states (state_sha256, location_id);
create index integration_oauth_states_location_expires_idx on app.integration_oauth_states (location_id, expires_at);

create table app.integration_syncs (
  id uuid default gen_random_uuid() not null,
  location_id uuid not null,
  integration_id uuid not null,
  provider text not null,
  record_type text not null,
  record_id uuid not null,
  action text not null,
  status text default 'pending' not null,
  attempts integer default 0 not null,
  external_id text,
  remote jsonb default '{}'::jsonb not null,
  last_error text,
  next_attempt_at timestamp with time zone default now() not null,
  created_at timestamp with time zone default now() not null,
  updated_at timestamp with time zone default now() not null,
  constraint integration_syncs_pkey primary key (id, location_id),
  constraint integration_syncs_record_type_check check (record_type = any (array['lead', 'booking'])),
  constraint integration_syncs_action_check check (action = any (array['create', 'update'])),
  constraint integration_syncs_status_check check (status = any (array['pending', 'synced', 'failed'])),
  constraint integration_syncs_attempts_check check (attempts >= 0),
  constraint integration_syncs_last_error_check check (length(last_error) <= 2000),
  constraint integration_syncs_location_id_fkey foreign key (location_id) references app.locations (id) on delete cascade,
  constraint integration_syncs_integration_fkey foreign key (location_id, integration_id) references app.integrations (location_id, id) on delete cascade
);
comment on table app.integration_syncs is E'Sync log: one row per record written (or updated) in a field-service system (docs/integrations.md "Sync log").';
comment on column app.integration_syncs.remote is E'Remote ids created so far (client, customer, address, request, lead, job, booking): a retry after a crash reuses them instead of creating twice.';
comment on column app.integration_syncs.external_id is E'Id of the remote record (Jobber request, Housecall Pro lead or job, ServiceTitan booking).';
comment on column app.integration_syncs.next_attempt_at is E'Earliest time of the next attempt of a pending sync (backoff, Retry-After).';
select app.secure_tenant_table('app.integration_syncs', 'select, update');
create trigger _100_set_updated_at before update on app.integration_syncs for each row execute function app.tg__set_updated_at();
create index integration_syncs_integration_idx on app.integration_syncs (location_id, integration_id);
create index integration_syncs_location_created_idx on app.integration_syncs (location_id, provider, created_at desc, id desc);
create unique index integration_syncs_record_key on app.integration_syncs (location_id, integration_id, record_type, record_id, action) where action = 'create';

-- The authorize step: one pending state per call, bound to the token's location.
create function api.integration_authorize(token_hash text, location_ref text, provider text, configured boolean,
                                          state_sha256 text, code_verifier_ciphertext bytea, authorize_url text)
 returns jsonb
 language plpgsql
as $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'integrations:write');
  s app.integration_oauth_states;
begin
  if provider is distinct from 'jobber' and provider is distinct from 'housecall_pro' then
    perform app.raise('SB400', format('%s has no authorization flow here (servicetitan connects with PUT …/integrations/servicetitan/credentials)', provider),
                      jsonb_build_object('provider', provider));
  end if;
  if not configured then
    perform app.raise('SB503', format('%s is not configured on this server', provider), jsonb_build_object('provider', provider));
  end if;
  if exists (select 1 from app.integrations x where x.provider = integration_authorize.provider and x.status = 'connected') then
    perform app.raise('SB409', format('A %s integration is already connected; disconnect it first', provider), jsonb_build_object('provider', provider));
  end if;
  delete from app.integration_oauth_states o where o.location_id = a.location_id and o.expires_at < now() - interval '1 day';
  insert into app.integration_oauth_states (location_id, provider, state_sha256, code_verifier_ciphertext)
  values (a.location_id, provider, state_sha256, code_verifier_ciphertext)
  returning * into s;
  return jsonb_build_object('authorize_url', authorize_url, 'expires_at', app.iso(s.expires_at));
end
$function$;
comment on function api.integration_authorize(text,text,text,boolean,text,bytea,text) is E'POST integrations/{provider}/authorize: records a single-use state (10 minutes, this location) with its PKCE verifier and answers the authorize URL the route built; SB503 when the provider is not configured, SB409 when one is connected.';
revoke execute on function api.integration_authorize(text,text,text,boolean,text,bytea,text) from public;
grant execute on function api.integration_authorize(text,text,text,boolean,text,bytea,text) to switchboard_api;

-- The public callback: consume the state (whatever happens next) and say what it was.
create function app.integration_oauth_consume(state_sha256 text)
 returns jsonb
 language plpgsql
 security definer
 set search_path to pg_catalog, public, pg_temp
as $function$
declare
  s app.integration_oauth_states;
  loc_name text;
begin
  update app.integration_oauth_states o set used_at = now()
   where o.state_sha256 = integration_oauth_consume.state_sha256 and o.used_at is null
  returning * into s;
  if s.id is null then
    if exists (select 1 from app.integration_oauth_states o where o.state_sha256 = integration_oauth_consume.state_sha256) then
      return jsonb_build_object('outcome', 'used');
    end if;
    return jsonb_build_object('outcome', 'unknown');
  end if;
  select l.name into loc_name from app.locations l where l.id = s.location_id;
  return jsonb_build_object(
    'outcome', case when s.expires_at < now() then 'expired' else 'ok' end,
    'location_id', s.location_id, 'location_name', loc_name, 'provider', s.provider,
    'code_verifier_ciphertext', encode(s.code_verifier_ciphertext, 'base64'));
end
$function$;
alter function app.integration_oauth_consume(text) owner to switchboard_system;
comment on function app.integration_oauth_consume(text) is E'OAuth callback, step 1: marks the state used (single use) and returns its location, provider and PKCE verifier, or outcome unknown/used/expired. Definer: the callback is public (no token, so no app.location_id) and must find the state across locations.';
revoke execute on function app.integration_oauth_consume(text) from public;

-- The public callback, after the code exchange: the connected integration.
create function app.integration_oauth_connect(location_id uuid, provider text, external_id text, expires_at timestamp with time zone,
                                              secrets_ciphertext bytea)
 returns jsonb
 language plpgsql
 security definer
 set search_path to pg_catalog, public, pg_temp
as $function$
declare
  i app.integrations;
begin
  if exists (select 1 from app.integrations x where x.location_id = integration_oauth_connect.location_id
               and x.provider = integration_oauth_connect.provider and x.status = 'connected') then
    perform app.raise('SB409', format('A %s integration is already connected', provider), jsonb_build_object('provider', provider));
  end if;
  -- Re-authorising an expired (or errored) connection keeps its row, so its waiting syncs resume.
  update app.integrations x
     set status = 'connected', external_id = integration_oauth_connect.external_id, expires_at = integration_oauth_connect.expires_at,
         secrets_ciphertext = integration_oauth_connect.secrets_ciphertext, connected_at = now(), disconnected_at = null,
         last_error = null, access_token = null, refresh_token = null
   where x.id = (select y.id from app.integrations y
                  where y.location_id = integration_oauth_connect.location_id and y.provider = integration_oauth_connect.provider
                    and y.status in ('expired', 'error')
                  order by y.created_at desc limit 1)
     and x.location_id = integration_oauth_connect.location_id
  returning * into i;
  if i.id is null then
    insert into app.integrations (location_id, provider, status, external_id, expires_at, secrets_ciphertext, connected_at)
    values (location_id, provider, 'connected', external_id, expires_at, secrets_ciphertext, now())
    returning * into i;
  end if;
  return app.integration_json(i);
end
$function$;
alter function app.integration_oauth_connect(uuid,text,text,timestamp with time zone,bytea) owner to switchboard_system;
comment on function app.integration_oauth_connect(uuid,text,text,timestamp with time zone,bytea) is E'OAuth callback, step 2: stores the encrypted tokens and marks the integration connected (re-using an expired row so its waiting syncs resume). Definer: the callback is public and writes one row of the state''s location.';
revoke execute on function app.integration_oauth_connect(uuid,text,text,timestamp with time zone,bytea) from public;

-- ServiceTitan: client credentials checked by the route (a token minted) before this runs.
create function api.integration_credentials_put(token_hash text, location_ref text, provider text, external_id text,
                                                expires_at timestamp with time zone, secrets_ciphertext bytea)
 returns jsonb
 language plpgsql
as $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'integrations:write');
  i app.integrations;
begin
  if provider is distinct from 'servicetitan' then
    perform app.raise('SB400', format('%s does not connect with credentials', provider), jsonb_build_object('provider', provider));
  end if;
  update app.integrations x
     set status = 'connected', external_id = integration_credentials_put.external_id, expires_at = integration_credentials_put.expires_at,
         secrets_ciphertext = integration_credentials_put.secrets_ciphertext,
         connected_at = case when x.status = 'connected' then x.connected_at else now() end,
         disconnected_at = null, last_error = null
   where x.id = (select y.id from app.integrations y
                  where y.provider = 'servicetitan' and y.status in ('connected', 'expired', 'error')
                  order by (y.status = 'connected') desc, y.created_at desc limit 1)
     and x.location_id = a.location_id
  returning * into i;
  if i.id is null then
    insert into app.integrations (location_id, provider, status, external_id, expires_at, secrets_ciphertext, connected_at)
    values (a.location_id, 'servicetitan', 'connected', external_id, expires_at, secrets_ciphertext, now())
    returning * into i;
  end if;
  return app.integration_json(i);
end
$function$;
comment on function api.integration_credentials_put(text,text,text,text,timestamp with time zone,bytea) is E'PUT integrations/servicetitan/credentials: stores the encrypted client credentials (and the token minted with them) and marks the integration connected, replacing earlier credentials.';
revoke execute on function api.integration_credentials_put(text,text,text,text,timestamp with time zone,bytea) from public;
grant execute on function api.integration_credentials_put(text,text,text,text,timestamp with time zone,bytea) to switchboard_api;

-- DELETE: disconnect, erase the secrets, and hand the route the old ciphertext once so it can revoke.
create function api.integration_disconnect(token_hash text, location_ref text, provider text)
 returns jsonb
 language plpgsql
as $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'integrations:write');
  old_secrets bytea;
  i app.integrations;
begin
  select x.secrets_ciphertext into old_secrets from app.integrations x
   where x.location_id = a.location_id and x.provider = integration_disconnect.provider
     and (x.status = 'connected' or (x.status in ('expired', 'error') and x.secrets_ciphertext is not null))
   order by (x.status = 'connected') desc, x.created_at desc limit 1 for update;
  update app.integrations t
     set status = 'disconnected', disconnected_at = now(), access_token = null, refresh_token = null, secrets_ciphertext = null
   where t.id = (select y.id from app.integrations y
                  where y.location_id = a.location_id and y.provider = integration_disconnect.provider
                    and (y.status = 'connected' or (y.status in ('expired', 'error') and y.secrets_ciphertext is not null))
                  order by (y.status = 'connected') desc, y.created_at desc limit 1)
     and t.location_id = a.location_id
  returning * into i;
  if i.id is null then return null; end if;
  return jsonb_build_object('integration', app.integration_json(i), 'secrets_ciphertext', encode(old_secrets, 'base64'));
end
$function$;
comment on function api.integration_disconnect(text,text,text) is E'DELETE integrations/{provider}: marks the connected one (or an expired one still holding secrets) disconnected and erases its secrets; returns the record and, for the route only, the erased ciphertext so it can revoke at the provider. 404 when none.';
revoke execute on function api.integration_disconnect(text,text,text) from public;
grant execute on function api.integration_disconnect(text,text,text) to switchboard_api;

-- The disconnect above replaces it (it also hands over the ciphertext to revoke with).
drop function if exists api.integration_delete(text,text,text);

-- Token lifecycle (docs/integrations.md "Tokens"): the worker reads, refreshes and stores tokens
-- through these; a refresh runs under a per-connection advisory lock so two processes never use
-- the same (rotating) refresh token.
drop function if exists app.integration_token_state(uuid,boolean);
drop function if exists app.integration_token_store(uuid,bytea,timestamp with time zone);
drop function if exists app.integration_token_refused(uuid,text);

create function app.integration_token_state(integration_id uuid, lock boolean)
 returns jsonb
 language plpgsql
 security definer
 set search_path to pg_catalog, public, pg_temp
as $function$
declare
  i app.integrations;
begin
  if lock then
    -- Held to the end of the caller's transaction: the refresh and its store happen inside it.
    perform pg_advisory_xact_lock(hashtextextended('integration-token:' || integration_id::text, 0));
  end if;
  select * into i from app.integrations x where x.id = integration_token_state.integration_id;
  if i.id is null then return null; end if;
  return jsonb_build_object('id', i.id, 'location_id', i.location_id, 'provider', i.provider, 'status', i.status,
    'external_id', i.external_id, 'expires_at', app.iso(i.expires_at),
    'secrets_ciphertext', encode(i.secrets_ciphertext, 'base64'));
end
$function$;
alter function app.integration_token_state(uuid,boolean) owner to switchboard_system;
comment on function app.integration_token_state(uuid,boolean) is E'Worker: one integration''s status, expiry and encrypted secrets; lock=true first takes the connection''s transaction advisory lock (one refresh at a time across processes). Definer: the worker reads any location''s connection by id.';
revoke execute on function app.integration_token_state(uuid,boolean) from public;

create function app.integration_token_store(integration_id uuid, secrets_ciphertext bytea, expires_at timestamp with time zone)
 returns void
 language sql
 security definer
 set search_path to pg_catalog, public, pg_temp
as $function$
  update app.integrations x
     set secrets_ciphertext = integration_token_store.secrets_ciphertext, expires_at = integration_token_store.expires_at
   where x.id = integration_token_store.integration_id and x.status = 'connected'
$function$;
alter function app.integration_token_store(uuid,bytea,timestamp with time zone) owner to switchboard_system;
comment on function app.integration_token_store(uuid,bytea,timestamp with time zone) is E'Worker: stores refreshed tokens (the rotated refresh token before anything uses it). Definer: worker-side write of one connection.';
revoke execute on function app.integration_token_store(uuid,bytea,timestamp with time zone) from public;

create function app.integration_token_refused(integration_id uuid, reason text)
 returns void
 language plpgsql
 security definer
 set search_path to pg_catalog, public, pg_temp
as $function$
declare
  i app.integrations;
begin
  update app.integrations x
     set status = 'expired', last_error = left(reason, 2000)
   where x.id = integration_token_refused.integration_id and x.status = 'connected'
  returning * into i;
  if i.id is null then return; end if;
  perform app.notification_fanout(i.location_id, null, 'integration.expired', jsonb_build_object(
    'integration_id', i.id, 'provider', i.provider, 'external_id', i.external_id, 'last_error', i.last_error,
    'pending_syncs', (select count(*) from app.integration_syncs s where s.location_id = i.location_id and s.integration_id = i.id and s.status = 'pending')));
end
$function$;
alter function app.integration_token_refused(uuid,text) owner to switchboard_system;
comment on function app.integration_token_refused(uuid,text) is E'Worker: the provider refused the refresh (revoked, downgraded): the integration becomes expired with last_error and the location is notified (integration.expired); its syncs wait for re-authorisation. Definer: worker-side write and fan-out.';
revoke execute on function app.integration_token_refused(uuid,text) from public;

-- integration.expired: an operational notification (not an event), routed like the endpoint alerts.
create or replace function app.operational_notification_types()
 returns text[]
 language sql
 immutable parallel safe
as $function$ select array['webhook_endpoint.failing', 'webhook_endpoint.disabled', 'integration.expired'] $function$;
comment on function app.operational_notification_types() is E'Notification types that are not events (never sent as webhooks): a failing webhook endpoint, a disabled one, a field-service connection that needs re-authorisation.';

create or replace function app.notification_routes_default()
 returns jsonb
 language sql
 immutable parallel safe
as $function$
  select '{
    "call.emergency": ["sms", "email", "chat"],
    "lead.created": ["email", "chat"],
    "lead.updated": [],
    "booking.created": ["email", "chat"],
    "booking.updated": ["email", "chat"],
    "call.ended": [],
    "spam.blocked": [],
    "customer.erased": [],
    "webhook_endpoint.failing": ["email", "chat"],
    "webhook_endpoint.disabled": ["email", "chat"],
    "integration.expired": ["email", "chat"]
  }'::jsonb
$function$;
comment on function app.notification_routes_default() is E'Defaults: emergencies → sms + email + chat; leads and bookings → email + chat; webhook endpoint failing/disabled and an expired field-service connection → email + chat; spam, customer.erased and the rest → none.';

-- Locations that exist already get the new type's default route.
update app.notification_settings s set routes = s.routes || jsonb_build_object('integration.expired', app.notification_routes_default() -> 'integration.expired')
 where not s.routes ? 'integration.expired';

-- Write-back (docs/integrations.md "What is written where"): every lead.created, booking.created
-- and booking.updated of a location with a field-service connection becomes a sync row and a job.
alter table app.integration_syncs add column if not exists lease_until timestamp with time zone;
comment on column app.integration_syncs.lease_until is E'A worker holds this sync until then (claimed); a lapsed lease is picked up again by the sweep.';
create index if not exists integration_syncs_due_idx on app.integration_syncs (next_attempt_at) where status = 'pending';

drop trigger if exists _550_integration_sync on app.events;
drop function if exists app.tg_events__integration_sync();
drop function if exists app.integration_sync_claim(uuid,integer);
drop function if exists app.integration_sync_progress(uuid,jsonb);
drop function if exists app.integration_sync_finish(uuid,text,text,text,integer);
drop function if exists app.integration_sync_sweep(integer);
drop function if exists app.integration_sync_resume(uuid);

create function app.tg_events__integration_sync()
 returns trigger
 language plpgsql
 security definer
 set search_path to pg_catalog, public, pg_temp
as $function$
declare
  rtype text := split_part(new.type, '.', 1);
  act text := case when new.type like '%.created' then 'create' else 'update' end;
  rid uuid := app.uuid_or_null(new.data ->> 'id');
  s record;
begin
  if current_setting('app.seeding', true) = 'on' or rid is null then return null; end if;
  for s in
    insert into app.integration_syncs (location_id, integration_id, provider, record_type, record_id, action)
    select new.location_id, i.id, i.provider, rtype, rid, act
      from app.integrations i
     where i.location_id = new.location_id and i.provider in ('jobber', 'housecall_pro', 'servicetitan')
       and i.status in ('connected', 'expired')
       -- Jobber requests are not updated after creation (docs/integrations.md).
       and (act = 'create' or i.provider <> 'jobber')
    on conflict (location_id, integration_id, record_type, record_id, action) where action = 'create' do nothing
    returning id, location_id, integration_id
  loop
    -- An expired connection's syncs wait (pending) and are queued again when it is re-authorised.
    if exists (select 1 from app.integrations i where i.id = s.integration_id and i.location_id = s.location_id and i.status = 'connected') then
      perform app.enqueue('integration_sync', jsonb_build_object('sync_id', s.id, 'integration_id', s.integration_id), null, 'integration_sync:' || s.id);
    end if;
  end loop;
  return null;
end
$function$;
alter function app.tg_events__integration_sync() owner to switchboard_system;
comment on function app.tg_events__integration_sync() is E'After a lead.created, booking.created or booking.updated event: one pending sync per field-service connection of the location (expired ones wait), and a job for each connected one. Definer: the API role has no rights on the sync log''s inserts or the queue.';
revoke execute on function app.tg_events__integration_sync() from public;
create trigger _550_integration_sync after insert on app.events for each row
  when (new.type in ('lead.created', 'booking.created', 'booking.updated'))
  execute function app.tg_events__integration_sync();

create function app.integration_sync_claim(sync_id uuid, lease_seconds integer)
 returns jsonb
 language plpgsql
 security definer
 set search_path to pg_catalog, public, pg_temp
as $function$
declare
  s app.integration_syncs;
  rec jsonb;
  loc app.locations;
begin
  update app.integration_syncs x
     set lease_until = now() + make_interval(secs => lease_seconds), attempts = x.attempts + 1
   where x.id = integration_sync_claim.sync_id and x.status = 'pending'
     and (x.lease_until is null or x.lease_until < now()) and x.next_attempt_at <= now() + interval '1 second'
     and exists (select 1 from app.integrations i where i.id = x.integration_id and i.location_id = x.location_id and i.status = 'connected')
  returning * into s;
  if s.id is null then return null; end if;
  select * into loc from app.locations l where l.id = s.location_id;
  if s.record_type = 'lead' then
    select app.lead_json(l) into rec from app.leads l where l.id = s.record_id and l.location_id = s.location_id;
  else
    select app.booking_json(b) || to_jsonb(b) - array['location_id'] || jsonb_build_object('customer', (
             select jsonb_build_object('name', coalesce(c.name, ld.name), 'phone', coalesce(c.phone::text, ld.phone::text),
                                       'email', coalesce(c.email, ld.email), 'address', coalesce(b.address, c.address, ld.address))
               from (select 1) one
               left join app.customers c on c.id = b.customer_id and c.location_id = b.location_id
               left join app.leads ld on ld.id = b.lead_id and ld.location_id = b.location_id))
      into rec from app.bookings b where b.id = s.record_id and b.location_id = s.location_id;
  end if;
  return jsonb_build_object('id', s.id, 'location_id', s.location_id, 'integration_id', s.integration_id, 'provider', s.provider,
    'record_type', s.record_type, 'record_id', s.record_id, 'action', s.action, 'attempts', s.attempts, 'remote', s.remote,
    'external_id', s.external_id, 'record', rec, 'timezone', loc.timezone, 'business', loc.name,
    'create_remote', (select c.remote from app.integration_syncs c
                       where c.location_id = s.location_id and c.integration_id = s.integration_id and c.record_type = s.record_type
                         and c.record_id = s.record_id and c.action = 'create'));
end
$function$;
alter function app.integration_sync_claim(uuid,integer) owner to switchboard_system;
comment on function app.integration_sync_claim(uuid,integer) is E'Worker: claims a due pending sync of a connected integration for lease_seconds (counting the attempt) and returns it with the record to write (booking with its customer), the location''s time zone, and for an update the remote ids of the record''s create. Null when not due, leased elsewhere, finished or its connection is not connected. Definer: worker-side read across locations.';
revoke execute on function app.integration_sync_claim(uuid,integer) from public;

create function app.integration_sync_progress(sync_id uuid, remote jsonb)
 returns void
 language sql
 security definer
 set search_path to pg_catalog, public, pg_temp
as $function$
  update app.integration_syncs x set remote = x.remote || integration_sync_progress.remote
   where x.id = integration_sync_progress.sync_id
$function$;
alter function app.integration_sync_progress(uuid,jsonb) owner to switchboard_system;
comment on function app.integration_sync_progress(uuid,jsonb) is E'Worker: records a remote id as soon as the provider created it, so a retry after a crash reuses it. Definer: worker-side write.';
revoke execute on function app.integration_sync_progress(uuid,jsonb) from public;

create function app.integration_sync_finish(sync_id uuid, outcome text, external_id text, error text, retry_in_seconds integer)
 returns jsonb
 language plpgsql
 security definer
 set search_path to pg_catalog, public, pg_temp
as $function$
declare
  s app.integration_syncs;
begin
  if outcome not in ('synced', 'failed', 'retry', 'wait') then
    perform app.raise('SB400', format('Unknown sync outcome %s', outcome));
  end if;
  update app.integration_syncs x
     set status = case outcome when 'synced' then 'synced' when 'failed' then 'failed' else 'pending' end,
         external_id = coalesce(integration_sync_finish.external_id, x.external_id),
         last_error = case when outcome = 'synced' then null else left(error, 2000) end,
         next_attempt_at = case when outcome = 'retry' then now() + make_interval(secs => retry_in_seconds) else x.next_attempt_at end,
         -- 'wait': the connection cannot be used (expired); the attempt does not count.
         attempts = case when outcome = 'wait' then greatest(x.attempts - 1, 0) else x.attempts end,
         lease_until = null
   where x.id = integration_sync_finish.sync_id
  returning * into s;
  if s.id is null then return null; end if;
  update app.integrations i
     set last_synced_at = case when outcome = 'synced' then now() else i.last_synced_at end,
         last_error = case when outcome = 'synced' then null when outcome = 'wait' then i.last_error else s.last_error end
   where i.id = s.integration_id and i.location_id = s.location_id;
  if outcome = 'retry' then
    perform app.enqueue('integration_sync', jsonb_build_object('sync_id', s.id, 'integration_id', s.integration_id), s.next_attempt_at, 'integration_sync:' || s.id);
  end if;
  return jsonb_build_object('status', s.status, 'attempts', s.attempts, 'next_attempt_at', app.iso(s.next_attempt_at));
end
$function$;
alter function app.integration_sync_finish(uuid,text,text,text,integer) owner to switchboard_system;
comment on function app.integration_sync_finish(uuid,text,text,text,integer) is E'Worker: records an attempt''s outcome: synced (remote id), failed (the provider''s validation message, not retried), retry (queued again after retry_in_seconds) or wait (connection expired; stays pending until re-authorised). The integration''s last_synced_at and last_error follow. Definer: worker-side write.';
revoke execute on function app.integration_sync_finish(uuid,text,text,text,integer) from public;

create function app.integration_sync_sweep(batch integer)
 returns integer
 language plpgsql
 security definer
 set search_path to pg_catalog, public, pg_temp
as $function$
declare
  n integer := 0;
  s record;
begin
  for s in
    select x.id, x.integration_id from app.integration_syncs x
      join app.integrations i on i.id = x.integration_id and i.location_id = x.location_id and i.status = 'connected'
     where x.status = 'pending' and x.next_attempt_at < now() - interval '30 seconds'
       and (x.lease_until is null or x.lease_until < now())
       and not exists (select 1 from graphile_worker.jobs j where j.key = 'integration_sync:' || x.id and j.locked_at is null)
     order by x.next_attempt_at limit batch
  loop
    perform app.enqueue('integration_sync', jsonb_build_object('sync_id', s.id, 'integration_id', s.integration_id), null, 'integration_sync:' || s.id);
    n := n + 1;
  end loop;
  return n;
end
$function$;
comment on function app.integration_sync_sweep(integer) is E'Worker (cron): queues again pending syncs of connected integrations that are overdue and have no waiting job: a worker died holding one (its lease lapsed), or the connection was re-authorised. Definer, owned by the migrating role: it reads graphile-worker''s jobs.';
revoke execute on function app.integration_sync_sweep(integer) from public;

-- Sync log routes (docs/integrations.md "Sync log").
drop function if exists app.integration_sync_requeue(uuid,uuid);
create function app.integration_sync_requeue(sync_id uuid, integration_id uuid)
 returns void
 language sql
 security definer
 set search_path to pg_catalog, public, pg_temp
as $function$
  select app.enqueue('integration_sync', jsonb_build_object('sync_id', sync_id, 'integration_id', integration_id), null, 'integration_sync:' || sync_id)
$function$;
alter function app.integration_sync_requeue(uuid,uuid) owner to switchboard_system;
comment on function app.integration_sync_requeue(uuid,uuid) is E'Queues a sync''s job (the retry route). Definer: the API role has no right on the queue; only adds a job.';
revoke execute on function app.integration_sync_requeue(uuid,uuid) from public;
grant execute on function app.integration_sync_requeue(uuid,uuid) to switchboard_api;

drop function if exists api.integration_syncs_list(text,text,text,jsonb,jsonb);
drop function if exists api.integration_sync_retry(text,text,text,uuid);
drop function if exists app.integration_sync_json(app.integration_syncs);

create function app.integration_sync_json(s app.integration_syncs)
 returns jsonb
 language sql
 stable parallel safe
as $function$
  select jsonb_build_object('id', s.id, 'record_type', s.record_type, 'record_id', s.record_id, 'action', s.action,
    'status', s.status, 'attempts', s.attempts, 'external_id', s.external_id, 'last_error', s.last_error,
    'next_attempt_at', case when s.status = 'pending' then app.iso(s.next_attempt_at) end,
    'created_at', app.iso(s.created_at), 'updated_at', app.iso(s.updated_at))
$function$;
comment on function app.integration_sync_json(app.integration_syncs) is E'A sync as the API shows it (no remote ids beyond external_id, no lease).';

create function api.integration_syncs_list(token_hash text, location_ref text, provider text, filters jsonb, page jsonb)
 returns jsonb
 language plpgsql
as $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'integrations:read');
  lim int := app.page_limit(page);
  after app.page_cursor := app.page_after(page);
  f_status text := filters ->> 'status';
begin
  return app.page_result(array(
    select app.page_item(s.created_at, s.id, app.integration_sync_json(s)) from app.integration_syncs s
     where s.provider = integration_syncs_list.provider
       and app.before_cursor(s.created_at, s.id, after)
       and (f_status is null or s.status = f_status)
     order by s.created_at desc, s.id desc limit lim + 1), lim);
end
$function$;
comment on function api.integration_syncs_list(text,text,text,jsonb,jsonb) is E'GET integrations/{provider}/syncs: the sync log of the location''s connection to the provider, newest first; filter status.';
revoke execute on function api.integration_syncs_list(text,text,text,jsonb,jsonb) from public;
grant execute on function api.integration_syncs_list(text,text,text,jsonb,jsonb) to switchboard_api;

create function api.integration_sync_retry(token_hash text, location_ref text, provider text, sync_id uuid)
 returns jsonb
 language plpgsql
as $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'integrations:write');
  s app.integration_syncs;
begin
  select * into s from app.integration_syncs x where x.id = sync_id and x.provider = integration_sync_retry.provider;
  if s.id is null then return null; end if;
  if s.status <> 'failed' then
    perform app.raise('SB409', format('Only a failed sync can be retried; this one is %s', s.status), jsonb_build_object('status', s.status));
  end if;
  update app.integration_syncs x
     set status = 'pending', attempts = 0, next_attempt_at = now(), lease_until = null
   where x.id = s.id and x.location_id = s.location_id
  returning * into s;
  perform app.integration_sync_requeue(s.id, s.integration_id);
  return app.integration_sync_json(s);
end
$function$;
comment on function api.integration_sync_retry(text,text,text,uuid) is E'POST integrations/{provider}/syncs/{id}/retry: a failed sync becomes pending again with a fresh retry schedule (SB409 otherwise); it runs when its connection is connected.';
revoke execute on function api.integration_sync_retry(text,text,text,uuid) from public;
grant execute on function api.integration_sync_retry(text,text,text,uuid) to switchboard_api;

--! Previous: sha1:f34673a97bbcd2dc60a6f48dd160600259b05e8d
--! Hash: sha1:941993c1f56df431968749ac2547fb97ca24f6c4
--! Message: A pending OAuth authorization dies with the API key that started it

-- A pending OAuth authorization dies with the API key that started it (docs/integrations.md,
-- "Connect"): a key revoked within the state's 10 minutes (leaked, or its holder gone) could
-- otherwise still finish a connection it began, to a provider account of its holder's choosing,
-- through which the location's leads and bookings would then flow.
alter table app.integration_oauth_states add column api_key_id uuid;
comment on column app.integration_oauth_states.api_key_id is E'The API key that started the authorization: the callback refuses the state once that key is revoked (null for states older than this column).';

CREATE OR REPLACE FUNCTION api.integration_authorize(token_hash text, location_ref text, provider text, configured boolean, state_sha256 text, code_verifier_ciphertext bytea, authorize_url text)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
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
  insert into app.integration_oauth_states (location_id, provider, state_sha256, code_verifier_ciphertext, api_key_id)
  values (a.location_id, provider, state_sha256, code_verifier_ciphertext, a.key_id)
  returning * into s;
  return jsonb_build_object('authorize_url', authorize_url, 'expires_at', app.iso(s.expires_at));
end
$function$;
comment on function api.integration_authorize(text,text,text,boolean,text,bytea,text) is E'POST integrations/{provider}/authorize: records a single-use state (10 minutes, this location, the key that asked) with its PKCE verifier and answers the authorize URL the route built; SB503 when the provider is not configured, SB409 when one is connected.';

CREATE OR REPLACE FUNCTION app.integration_oauth_consume(state_sha256 text)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
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
    'outcome', case when s.expires_at < now() then 'expired'
                    when s.api_key_id is not null and not exists (
                      select 1 from app.api_keys k where k.id = s.api_key_id and k.revoked_at is null) then 'revoked'
                    else 'ok' end,
    'location_id', s.location_id, 'location_name', loc_name, 'provider', s.provider,
    'code_verifier_ciphertext', encode(s.code_verifier_ciphertext, 'base64'));
end
$function$;
comment on function app.integration_oauth_consume(text) is E'OAuth callback, step 1: marks the state used (single use) and returns its location, provider and PKCE verifier, or outcome unknown/used/expired/revoked (the key that started it was revoked since). Definer: the callback is public (no token, so no app.location_id) and must find the state across locations.';

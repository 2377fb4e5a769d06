-- Enter migration here

-- ==== GET /me: the owner's phone only to a key that may read the location ====
-- /me needs no scope; the location profile needs locations:read (docs/api-contract.md §5, "Tokens
-- and scopes"). Its owner_cell is the owner's own phone, so /me shows it as null to a key without
-- that scope, as call detail shows a transcript as null without transcripts:read.
CREATE OR REPLACE FUNCTION api.me(token_hash text)
 RETURNS json
 LANGUAGE plpgsql
AS $function$
declare
  a app.auth := app.authorize(token_hash, null, null);
  k app.api_keys;
  l app.locations;
begin
  select * into k from app.api_keys where id = a.key_id;
  select * into l from app.locations where id = a.location_id;
  if k.id is null or l.id is null then return null; end if;
  if not ('locations:read' = any (a.scopes)) then l.owner_cell := null; end if;
  return json_build_object('api_key', app.api_key_js(k), 'location', app.location_js(l), 'scopes', to_json(a.scopes));
end
$function$;
comment on function api.me(text) is E'GET /me: the calling key, its location and scopes. No scope needed; the location''s owner_cell (the owner''s own phone) is null without locations:read.';
grant execute on function api.me(text) to switchboard_api;

--! Previous: sha1:0298c978cf34fc222c99900fd07b677ceb43d4d0
--! Hash: sha1:dab90ec1eb0d601c1b6e04e9ec3e0bea0f1b7a1b
--! Message: internal helpers out of the staff GraphQL schema

/*
 * app_private holds SQL helpers whose types PostGraphile cannot represent (it introspects every
 * function in the exposed schemas app and billing, and warned at each start about the
 * int4multirange of open_minutes). Nothing here is an API.
 */
create schema app_private;
comment on schema app_private is E'Internal SQL helpers, not exposed to the staff GraphQL.';
grant usage on schema app_private to switchboard_api, switchboard_staff, switchboard_system;

alter function app.open_minutes(uuid) set schema app_private;

-- api.insights (000012) calls the helper by its old name; plpgsql resolves names at run time, so
-- its body is re-created with the new one.
do $$
declare
  def text := pg_get_functiondef('api.insights(text, text, int)'::regprocedure);
begin
  if position('app.open_minutes(' in def) = 0 then
    raise exception 'api.insights no longer calls app.open_minutes';
  end if;
  execute replace(def, 'app.open_minutes(', 'app_private.open_minutes(');
end
$$;

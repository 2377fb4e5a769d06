-- auth cache invalidation
--
-- `GET /me` is answered from a per-process cache of what `api.me` returned (src/auth/cache.ts,
-- docs/performance.md "`GET /me`"): entries live at most one second, and these triggers tell
-- every API process at once when a key or location changes, so an edit shows on the next request
-- in practice. The payload is the location id; a process drops that location's entries. Only
-- app.api_keys and app.locations feed `api.me`. The update `app.authorize` makes of
-- `last_used_at` (once a minute per key) does not notify, so steady traffic does not churn caches.
-- Plain SECURITY INVOKER: pg_notify needs no privilege, whoever makes the change.

create or replace function app_private.tg__auth_cache_notify() returns trigger
  language plpgsql
as $$
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
$$;
comment on function app_private.tg__auth_cache_notify() is
  E'NOTIFY switchboard_auth with the location id of a changed or deleted API key or location (both ids when a key moves): API processes drop their cached GET /me answers of that location (docs/performance.md "GET /me"). The argument names the location id column.';

-- `_900_`: after every other trigger of the row, a message to other processes.
drop trigger if exists _900_auth_cache on app.api_keys;
create trigger _900_auth_cache after update on app.api_keys for each row
  when ((to_jsonb(old) - 'last_used_at') is distinct from (to_jsonb(new) - 'last_used_at'))
  execute function app_private.tg__auth_cache_notify('location_id');
comment on trigger _900_auth_cache on app.api_keys is
  E'A key''s change other than last_used_at (revocation, scopes, label) reaches cached GET /me answers at once.';

drop trigger if exists _900_auth_cache_delete on app.api_keys;
create trigger _900_auth_cache_delete after delete on app.api_keys for each row
  execute function app_private.tg__auth_cache_notify('location_id');
comment on trigger _900_auth_cache_delete on app.api_keys is
  E'A deleted key reaches cached GET /me answers at once.';

drop trigger if exists _900_auth_cache on app.locations;
create trigger _900_auth_cache after update or delete on app.locations for each row
  execute function app_private.tg__auth_cache_notify('id');
comment on trigger _900_auth_cache on app.locations is
  E'A location''s edit or deletion reaches cached GET /me answers at once.';

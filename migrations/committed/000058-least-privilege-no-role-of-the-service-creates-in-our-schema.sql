--! Previous: sha1:61dc1081f3a514fa136d540a8f9293523c220cc9
--! Hash: sha1:8583f7bea0135f646f0e48a2d17ad365bfb46cdb
--! Message: Least privilege: no role of the service creates in our schemas; api functions, app.authorize and the caller-data match only for the API role; withheld staff columns not writable

-- Least privilege, from this round's review of SECURITY DEFINER functions and grants
-- (docs/decisions.md, "Foundation"; test/db/catalog.test.ts):
--
-- 1. switchboard_system no longer creates in app, api, admin and billing. A role that may create
--    in a schema can shadow a function there with a text overload, which the owner pool's untyped
--    parameters then call as the owner pool's role. Ownership transfers in migrations are made by
--    a superuser, which needs no CREATE of the new owner (src/db/migrate.ts requires one). The
--    definer functions the migrating role owns (the graphile-worker doors, CONVENTIONS.md) call
--    only functions of app, where no role of the service may now create.
revoke create on schema app, api, admin, billing from switchboard_system;

-- 2. No api.* function, app.authorize or app.privacy_match_ids is executable by PUBLIC, only by
--    the API role: run by a staff role, an api.* function read and wrote under the staff policy,
--    across locations, with any tenant's token; app.privacy_match_ids (definer since 000057)
--    looked an e-mail up for a viewer denied the column.
do $$
declare
  f regprocedure;
begin
  for f in select p.oid::regprocedure from pg_catalog.pg_proc p join pg_catalog.pg_namespace n on n.oid = p.pronamespace
            where n.nspname = 'api'
               or p.oid in ('app.authorize(text,text,text)'::regprocedure, 'app.privacy_match_ids(uuid,text,text,uuid,boolean)'::regprocedure)
  loop
    execute format('revoke execute on function %s from public', f);
    execute format('grant execute on function %s to switchboard_api', f);
  end loop;
end
$$;

-- 3. A column withheld from a staff role is not writable by it either.
create or replace function app.staff_hide_columns(tbl regclass, cols text[], roles text[] DEFAULT ARRAY['viewer'::text, 'operator'::text, 'admin'::text])
 RETURNS void
 LANGUAGE plpgsql
AS $function$
declare
  r text;
  priv text;
  keep text;
begin
  if exists (select 1 from unnest(roles) x where x not in ('viewer', 'operator', 'admin')) then
    perform app.raise('SB400', 'roles are viewer, operator or admin');
  end if;
  if exists (select 1 from unnest(cols) x
              where not exists (select 1 from pg_catalog.pg_attribute a
                                 where a.attrelid = tbl and a.attname = x and a.attnum > 0 and not a.attisdropped)) then
    perform app.raise('SB400', format('%s lacks one of the columns %s', tbl, cols));
  end if;
  select string_agg(quote_ident(a.attname), ', ' order by a.attnum) into keep
    from pg_catalog.pg_attribute a
   where a.attrelid = tbl and a.attnum > 0 and not a.attisdropped and a.attname <> all (cols);
  foreach r in array roles loop
    -- Each of SELECT, INSERT and UPDATE the role holds on the table becomes a grant of the other
    -- columns; a column-level grant of a withheld column is revoked. A withheld column is neither
    -- read nor written: an admin could otherwise plant an API key's hash or a webhook secret.
    foreach priv in array array['select', 'insert', 'update'] loop
      if has_table_privilege('switchboard_staff_' || r, tbl, priv) then
        execute format('revoke %s on %s from %I', priv, tbl, 'switchboard_staff_' || r);
        execute format('grant %s (%s) on %s to %I', priv, keep, tbl, 'switchboard_staff_' || r);
      else
        execute format('revoke %s (%s) on %s from %I', priv, (select string_agg(quote_ident(c), ', ') from unnest(cols) c), tbl, 'switchboard_staff_' || r);
      end if;
    end loop;
  end loop;
end
$function$;
comment on function app.staff_hide_columns(regclass,text[],text[]) is E'Withholds columns of a table from staff roles (viewer, operator, admin): the role keeps SELECT, INSERT and UPDATE (those it held) on every other column (column grants), so a column added to the table later stays hidden from it until granted. docs/staff.md "Adding a table".';
select app.staff_hide_columns('app.api_keys', array['token_hash']);
select app.staff_hide_columns('app.webhook_endpoints', array['secret', 'previous_secret']);
select app.staff_hide_columns('app.integrations', array['access_token', 'refresh_token', 'secrets_ciphertext']);

--! Previous: sha1:73df32773560ae522fba00572cf878b419697106
--! Hash: sha1:d11e58d0cf0989376621852e905e4af8004eb641
--! Message: One mechanism withholds staff privileges column by column

-- One mechanism withholds staff privileges column by column: app.staff_hide_columns takes the
-- privileges to withhold (SELECT, INSERT and UPDATE unless told), and app.staff_fix_tenant_column
-- (000060), which repeated its table-grant-to-column-grants conversion for UPDATE alone, calls it.
-- Grants are unchanged (test/db/catalog.test.ts).
drop function app.staff_hide_columns(regclass, text[], text[]);
create function app.staff_hide_columns(tbl regclass, cols text[], roles text[] DEFAULT ARRAY['viewer'::text, 'operator'::text, 'admin'::text],
                                       privs text[] DEFAULT ARRAY['select'::text, 'insert'::text, 'update'::text])
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
  if exists (select 1 from unnest(privs) x where x not in ('select', 'insert', 'update')) then
    perform app.raise('SB400', 'privileges are select, insert or update');
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
    -- Each privilege the role holds on the whole table becomes a grant of the other columns; a
    -- column-level grant of a withheld column is revoked. A column withheld from reading is
    -- withheld from writing too (the default privs): an admin could otherwise plant an API key's
    -- hash or a webhook secret.
    foreach priv in array privs loop
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
comment on function app.staff_hide_columns(regclass,text[],text[],text[]) is E'Withholds columns of a table from staff roles (viewer, operator, admin): of the privileges named (SELECT, INSERT and UPDATE unless told), the role keeps those it held on every other column (column grants), so a column added to the table later stays withheld from it until granted. docs/staff.md "Adding a table".';
revoke execute on function app.staff_hide_columns(regclass,text[],text[],text[]) from public;

create or replace function app.staff_fix_tenant_column(tbl regclass, col text)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
begin
  perform app.staff_hide_columns(tbl, array[col], array['admin'], array['update']);
end
$function$;

--! Previous: sha1:dc587117ab507c383c5bda3701c71e566e1f2d7c
--! Hash: sha1:6be83918904f4dfeaefd6a3ab8b96892f07e952e
--! Message: No staff role moves a row to another location

-- No staff role moves a row to another location. An admin could set an API key's location_id
-- through the staff GraphQL (updateApiKeyByRowIdAndLocationId, patch { locationId }) and the
-- tenant's token then read and wrote the other location; a webhook endpoint or an integration
-- moved the same way received the other location's events and notifications. Admins keep
-- UPDATE on every other column they read; the tenant column (location_id, or id of
-- app.locations) is set once, at insert (docs/staff.md, "Roles and what each sees").

create function app.staff_fix_tenant_column(tbl regclass, col text)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
declare
  keep text;
begin
  if not exists (select 1 from pg_catalog.pg_attribute a
                  where a.attrelid = tbl and a.attname = col and a.attnum > 0 and not a.attisdropped) then
    perform app.raise('SB400', format('%s has no column %s', tbl, col));
  end if;
  if has_table_privilege('switchboard_staff_admin', tbl, 'update') then
    -- The table-wide grant becomes a grant of the other columns the role reads.
    select string_agg(quote_ident(a.attname), ', ' order by a.attnum) into keep
      from pg_catalog.pg_attribute a
     where a.attrelid = tbl and a.attnum > 0 and not a.attisdropped and a.attname <> col
       and has_column_privilege('switchboard_staff_admin', tbl, a.attnum, 'select');
    execute format('revoke update on %s from switchboard_staff_admin', tbl);
    if keep is not null then
      execute format('grant update (%s) on %s to switchboard_staff_admin', keep, tbl);
    end if;
  else
    execute format('revoke update (%I) on %s from switchboard_staff_admin', col, tbl);
  end if;
end
$function$;
comment on function app.staff_fix_tenant_column(regclass,text) is E'Withholds UPDATE of a tenant table''s location column from staff admins: a row is never moved to another location through the staff GraphQL. Admins keep UPDATE of every other column they read, as column grants, so a column added to the table later is writable by admins only once granted (docs/staff.md "Adding a table"). Called by app.secure_tenant_table.';
revoke execute on function app.staff_fix_tenant_column(regclass,text) from public;

create or replace function app.secure_tenant_table(tbl regclass, api_privileges text DEFAULT 'select, insert, update, delete'::text, col text DEFAULT 'location_id'::text)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
begin
  execute format('alter table %s enable row level security', tbl);
  execute format('alter table %s force row level security', tbl);
  execute format(
    'create policy tenant_isolation on %s using (%I = (select app.current_location_id())) with check (%I = (select app.current_location_id()))',
    tbl, col, col);
  execute format('create policy staff_read on %s for select to switchboard_staff using (true)', tbl);
  execute format('create policy staff_write on %s to switchboard_staff_admin using (true) with check (true)', tbl);
  execute format('create policy system_all on %s to switchboard_system using (true) with check (true)', tbl);
  execute format('grant select on %s to switchboard_staff_viewer, switchboard_staff_operator', tbl);
  execute format('grant select, insert, update, delete on %s to switchboard_staff_admin, switchboard_system', tbl);
  perform app.staff_fix_tenant_column(tbl, col);
  if api_privileges <> '' then
    execute format('grant %s on %s to switchboard_api', api_privileges, tbl);
  end if;
end
$function$;
comment on function app.secure_tenant_table(regclass,text,text) is E'Enables and forces RLS on a tenant table with the standard policies and grants: the API role per api_privileges under the tenant policy; staff viewers and operators read every row, staff admins read and write it, except its location column, which no staff role changes (app.staff_fix_tenant_column; docs/staff.md). Columns staff must not see are withheld afterwards with app.staff_hide_columns.';

-- The tables secured so far: each table with the tenant policy, by the column that policy names.
do $$
declare
  t record;
begin
  for t in
    select p.polrelid::regclass as tbl, case when p.polrelid = 'app.locations'::regclass then 'id' else 'location_id' end as col
      from pg_catalog.pg_policy p
     where p.polname = 'tenant_isolation'
       and exists (select 1 from pg_catalog.pg_policy w where w.polrelid = p.polrelid and w.polname = 'staff_write')
     order by 1
  loop
    perform app.staff_fix_tenant_column(t.tbl, t.col);
  end loop;
end
$$;

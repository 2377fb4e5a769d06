--! Previous: sha1:98e071796769ddec496c67ebf41e77c2056eed44
--! Hash: sha1:c2bf34c6321c236acf391072ef9c80e99f6151e7
--! Message: staff access

-- Staff access (docs/staff.md): authenticated, least-privilege, audited staff GraphQL.
-- One PostgreSQL role per staff role; the GraphQL server switches into one per request (pgSettings
-- `role`). switchboard_staff stays as their group: usage on the schemas and the target of the
-- read policy, and no table privilege of its own, so a column withheld from one role is not
-- granted back through the group.
do $$
begin
  if not exists (select from pg_roles where rolname = 'switchboard_staff_viewer') then
    create role switchboard_staff_viewer nologin;
  end if;
  if not exists (select from pg_roles where rolname = 'switchboard_staff_operator') then
    create role switchboard_staff_operator nologin;
  end if;
  if not exists (select from pg_roles where rolname = 'switchboard_staff_admin') then
    create role switchboard_staff_admin nologin;
  end if;
end
$$;
comment on role switchboard_staff is E'Group of the three staff roles (viewer, operator, admin): schema usage and the staff read policy; no table privileges of its own.';
comment on role switchboard_staff_viewer is E'Staff GraphQL, viewer: reads every location without caller content (transcripts, recordings, log URLs, caller e-mail and street address, event payloads).';
comment on role switchboard_staff_operator is E'Staff GraphQL, operator: reads every location, caller content included; writes nothing.';
comment on role switchboard_staff_admin is E'Staff GraphQL, admin: reads and writes every location; never secrets or credentials.';
grant switchboard_staff to switchboard_staff_viewer, switchboard_staff_operator, switchboard_staff_admin;
grant switchboard_staff_viewer, switchboard_staff_operator, switchboard_staff_admin to current_user;

create or replace function app.secure_tenant_table(tbl regclass, api_privileges text DEFAULT 'select, insert, update, delete'::text, col text DEFAULT 'location_id'::text)
 returns void
 language plpgsql
as $function$
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
  if api_privileges <> '' then
    execute format('grant %s on %s to switchboard_api', api_privileges, tbl);
  end if;
end
$function$;
comment on function app.secure_tenant_table(regclass,text,text) is E'Enables and forces RLS on a tenant table with the standard policies and grants: the API role per api_privileges under the tenant policy; staff viewers and operators read every row, staff admins read and write (docs/staff.md). Columns staff must not see are withheld afterwards with app.staff_hide_columns.';

create function app.staff_hide_columns(tbl regclass, cols text[], roles text[] DEFAULT ARRAY['viewer'::text, 'operator'::text, 'admin'::text])
 returns void
 language plpgsql
as $function$
declare
  r text;
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
    if has_table_privilege('switchboard_staff_' || r, tbl, 'select') then
      execute format('revoke select on %s from %I', tbl, 'switchboard_staff_' || r);
      execute format('grant select (%s) on %s to %I', keep, tbl, 'switchboard_staff_' || r);
    else
      execute format('revoke select (%s) on %s from %I', (select string_agg(quote_ident(c), ', ') from unnest(cols) c), tbl, 'switchboard_staff_' || r);
    end if;
  end loop;
end
$function$;
comment on function app.staff_hide_columns(regclass,text[],text[]) is E'Withholds columns of a table from staff roles (viewer, operator, admin): the role keeps SELECT on every other column (column grants), so a column added to the table later stays hidden from it until granted. Insert/update/delete rights are untouched. docs/staff.md "Adding a table".';

create function app.staff_hide_table(tbl regclass)
 returns void
 language plpgsql
as $function$
begin
  execute format('revoke all on %s from switchboard_staff_viewer, switchboard_staff_operator, switchboard_staff_admin, switchboard_staff', tbl);
end
$function$;
comment on function app.staff_hide_table(regclass) is E'Takes every privilege on a table from the staff roles (the table leaves the staff GraphQL): for tables staff have no business reading, such as stored responses. docs/staff.md "Adding a table".';

-- Existing tables: what switchboard_staff held goes to the admin role (keeping the departures,
-- e.g. the read-only rollup), viewers and operators get SELECT, the group keeps nothing; the
-- one policy for all staff becomes a read policy for the group and a write policy for admins.
do $$
declare
  t record;
begin
  for t in
    select c.oid::regclass as tbl,
           string_agg(a.privilege_type, ', ') filter (where a.privilege_type in ('SELECT', 'INSERT', 'UPDATE', 'DELETE')) as privs,
           bool_or(a.privilege_type = 'SELECT') as can_read
      from pg_catalog.pg_class c
      join pg_catalog.pg_namespace n on n.oid = c.relnamespace
      cross join lateral aclexplode(c.relacl) a
     where a.grantee = 'switchboard_staff'::regrole and n.nspname in ('app', 'billing') and c.relkind in ('r', 'p')
     group by c.oid
  loop
    if t.privs is not null then
      execute format('grant %s on %s to switchboard_staff_admin', t.privs, t.tbl);
    end if;
    if t.can_read then
      execute format('grant select on %s to switchboard_staff_viewer, switchboard_staff_operator', t.tbl);
    end if;
    execute format('revoke all on %s from switchboard_staff', t.tbl);
  end loop;
  for t in select p.polrelid::regclass as tbl from pg_catalog.pg_policy p where p.polname = 'staff_all' loop
    execute format('drop policy staff_all on %s', t.tbl);
    execute format('create policy staff_read on %s for select to switchboard_staff using (true)', t.tbl);
    execute format('create policy staff_write on %s to switchboard_staff_admin using (true) with check (true)', t.tbl);
  end loop;
end
$$;

-- Secrets and credentials: no staff role reads them (they are also @behavior -select).
select app.staff_hide_columns('app.api_keys', array['token_hash']);
select app.staff_hide_columns('app.webhook_endpoints', array['secret', 'previous_secret']);
select app.staff_hide_columns('app.integrations', array['access_token', 'refresh_token']);
-- Caller content: viewers see calls, customers, leads and bookings without it. Event payloads
-- copy a call's fields, so viewers do not read them either.
select app.staff_hide_columns('app.calls', array['caller_email', 'caller_address', 'transcript', 'transcript_turns', 'recording_url', 'public_log_url'], array['viewer']);
select app.staff_hide_columns('app.customers', array['email', 'address'], array['viewer']);
select app.staff_hide_columns('app.leads', array['email', 'address'], array['viewer']);
select app.staff_hide_columns('app.bookings', array['address'], array['viewer']);
select app.staff_hide_columns('app.events', array['data', 'body'], array['viewer']);

create schema staff;
comment on schema staff is E'Staff identities and the audit of the staff GraphQL (docs/staff.md).';

create table staff.members (
  id uuid default gen_random_uuid() not null,
  email text not null,
  role text not null,
  token_hash text not null,
  created_at timestamp with time zone default now() not null,
  revoked_at timestamp with time zone,
  constraint members_pkey primary key (id),
  constraint members_token_hash_key unique (token_hash),
  constraint members_email_check check (((email ~ '^[^@\s]+@[^@\s]+\.[^@\s]+$'::text) AND (length(email) <= 320))),
  constraint members_role_check check ((role = ANY (ARRAY['viewer'::text, 'operator'::text, 'admin'::text]))),
  constraint members_token_hash_check check ((token_hash ~ '^[0-9a-f]{64}$'::text))
);
comment on table staff.members is E'@behavior -insert -update -delete\nStaff who may use the staff GraphQL: one row per token (minted and revoked with the CLI, docs/staff.md). A new token for the same person is a new row.';
comment on column staff.members.role is E'viewer | operator | admin: the PostgreSQL role switchboard_staff_<role> the request runs as.';
comment on column staff.members.token_hash is E'@behavior -select -filterBy -orderBy\nSHA-256 hex of the token, which is shown once; no staff role can read it.';
comment on column staff.members.revoked_at is E'When the token stopped working; it stops in every process within about a second.';

create table staff.audit (
  id bigint generated always as identity,
  at timestamp with time zone default now() not null,
  member_id uuid,
  role text not null,
  operation_name text,
  operation_type text,
  document_sha256 text,
  root_fields text[] default '{}'::text[] not null,
  location_ids uuid[] default '{}'::uuid[] not null,
  outcome text not null,
  http_status integer,
  error_count integer default 0 not null,
  duration_ms integer not null,
  constraint audit_pkey primary key (id),
  constraint audit_member_id_fkey foreign key (member_id) references staff.members (id),
  constraint audit_outcome_check check ((outcome = ANY (ARRAY['ok'::text, 'error'::text, 'rejected'::text]))),
  constraint audit_document_sha256_check check ((document_sha256 ~ '^[0-9a-f]{64}$'::text)),
  constraint audit_operation_name_check check ((length(operation_name) <= 200))
);
comment on table staff.audit is E'@behavior -insert -update -delete\nEvery authenticated staff GraphQL request, written when it ends whatever its outcome: who, as which role, which operation (name, SHA-256 of the document, root fields), the locations it named, outcome and duration. Never variable values or results. Append-only (a trigger refuses update and delete except the retention prune, STAFF_AUDIT_RETENTION_DAYS); admins read it.';
comment on column staff.audit.at is E'When the request arrived.';
comment on column staff.audit.role is E'The staff role the request ran as (the member''s role at that time).';
comment on column staff.audit.operation_type is E'query | mutation | subscription; null when the document could not be parsed.';
comment on column staff.audit.document_sha256 is E'SHA-256 hex of the GraphQL document text as sent; null when there was none.';
comment on column staff.audit.root_fields is E'The top-level fields of the operation executed (fragments at the top level expanded).';
comment on column staff.audit.location_ids is E'Location ids the operation named: arguments and input fields called locationId, and id on location fields, inline or from variables. Empty when it named none (a query across locations).';
comment on column staff.audit.outcome is E'ok: executed without errors; error: executed with errors (e.g. permission denied); rejected: refused before execution (unparsable, invalid, past the depth or cost bound).';
comment on column staff.audit.error_count is E'GraphQL errors in the response.';
create index audit_at_idx on staff.audit (at);
create index audit_member_at_idx on staff.audit (member_id, at);
create index audit_location_ids_idx on staff.audit using gin (location_ids);

create function staff.tg_audit__append_only()
 returns trigger
 language plpgsql
as $function$
begin
  if tg_op = 'DELETE' and current_setting('staff.audit_prune', true) = 'on' then
    return old;
  end if;
  perform app.raise('SB409', 'The staff audit is append-only');
  return null;
end
$function$;
comment on function staff.tg_audit__append_only() is E'Refuses UPDATE, DELETE and TRUNCATE of the staff audit, except the deletes of staff.audit_prune.';

create function staff.audit_prune(retention_days integer, batch_size integer)
 returns integer
 language plpgsql
 security definer
 set search_path to 'pg_catalog', 'public', 'pg_temp'
as $function$
declare
  n int;
begin
  if retention_days < 1 or batch_size < 1 then
    perform app.raise('SB400', 'retention_days and batch_size must be positive');
  end if;
  perform set_config('staff.audit_prune', 'on', true);
  delete from staff.audit a using (
    select x.id from staff.audit x
     where x.at < now() - make_interval(days => retention_days)
     order by x.at limit batch_size) s
   where a.id = s.id;
  get diagnostics n = row_count;
  perform set_config('staff.audit_prune', 'off', true);
  return n;
end
$function$;
alter function staff.audit_prune(integer,integer) owner to switchboard_system;
comment on function staff.audit_prune(integer,integer) is E'Worker (prune_deliveries): deletes one batch of staff audit rows older than STAFF_AUDIT_RETENTION_DAYS; returns the count. Definer: the only role with DELETE on the audit is switchboard_system, and the append-only trigger lets only this function through.';

create function staff.member_json(m staff.members)
 returns jsonb
 language sql
 stable parallel safe
as $function$
  select jsonb_build_object('id', m.id, 'email', m.email, 'role', m.role,
                            'created_at', app.iso(m.created_at), 'revoked_at', app.iso(m.revoked_at))
$function$;
comment on function staff.member_json(staff.members) is E'A staff member as the CLI shows it: never the token or its hash.';

create function admin.staff_create(email text, role text, token_hash text)
 returns jsonb
 language plpgsql
 security definer
 set search_path to 'pg_catalog', 'public', 'pg_temp'
as $function$
declare
  m staff.members;
begin
  insert into staff.members (email, role, token_hash) values (lower(trim(email)), role, token_hash)
  returning * into m;
  return staff.member_json(m);
end
$function$;
alter function admin.staff_create(text,text,text) owner to switchboard_system;
comment on function admin.staff_create(text,text,text) is E'CLI: staff create (the CLI mints the token and passes its hash).';

create function admin.staff_revoke(member_id uuid)
 returns jsonb
 language plpgsql
 security definer
 set search_path to 'pg_catalog', 'public', 'pg_temp'
as $function$
declare
  m staff.members;
begin
  update staff.members set revoked_at = coalesce(revoked_at, now()) where id = member_id returning * into m;
  if m.id is null then perform app.raise('SB404', 'Staff member not found'); end if;
  return staff.member_json(m);
end
$function$;
alter function admin.staff_revoke(uuid) owner to switchboard_system;
comment on function admin.staff_revoke(uuid) is E'CLI: staff revoke (idempotent; keeps the first revocation time). The _900_auth_cache trigger tells every process.';

create function admin.staff_list()
 returns jsonb
 language sql
 stable security definer
 set search_path to 'pg_catalog', 'public', 'pg_temp'
as $function$
  select coalesce(jsonb_agg(staff.member_json(m) order by m.created_at desc, m.id desc), '[]') from staff.members m
$function$;
alter function admin.staff_list() owner to switchboard_system;
comment on function admin.staff_list() is E'CLI: staff list (no tokens, no hashes).';

create function admin.staff_audit(member_id uuid, since timestamp with time zone, max_rows integer)
 returns jsonb
 language sql
 stable security definer
 set search_path to 'pg_catalog', 'public', 'pg_temp'
as $function$
  select coalesce(jsonb_agg(r order by r.at desc, r.id desc), '[]') from (
    select a.id, app.iso(a.at) as at, a.member_id, m.email, a.role, a.operation_name, a.operation_type,
           a.document_sha256, a.root_fields, a.location_ids, a.outcome, a.http_status, a.error_count, a.duration_ms
      from staff.audit a left join staff.members m on m.id = a.member_id
     where (staff_audit.member_id is null or a.member_id = staff_audit.member_id)
       and (since is null or a.at >= since)
     order by a.at desc, a.id desc limit max_rows) r
$function$;
alter function admin.staff_audit(uuid,timestamp with time zone,integer) owner to switchboard_system;
comment on function admin.staff_audit(uuid,timestamp with time zone,integer) is E'CLI: staff audit, newest first, optionally one member''s and from a time on.';

create function staff.tg_members__cache_notify()
 returns trigger
 language plpgsql
as $function$
begin
  perform pg_notify('switchboard_staff_auth', coalesce(old.id, new.id)::text);
  return null;
end
$function$;
comment on function staff.tg_members__cache_notify() is E'NOTIFY switchboard_staff_auth with the member id of a changed or deleted staff member: processes serving the staff GraphQL drop their cached token look-ups (src/staff/cache.ts).';

create function staff.member_by_token(token_hash text)
 returns jsonb
 language sql
 stable security definer
 set search_path to 'pg_catalog', 'public', 'pg_temp'
as $function$
  select jsonb_build_object('id', m.id, 'email', m.email, 'role', m.role)
    from staff.members m
   where m.token_hash = member_by_token.token_hash and m.revoked_at is null
$function$;
alter function staff.member_by_token(text) owner to switchboard_system;
comment on function staff.member_by_token(text) is E'The active staff member of a token hash, or null: the staff GraphQL''s authentication (src/staff/auth.ts). Definer: the hash column is readable by no other role.';

create trigger _900_auth_cache after update or delete on staff.members
  for each row execute function staff.tg_members__cache_notify();
create trigger _200_append_only before update or delete on staff.audit
  for each row execute function staff.tg_audit__append_only();
create trigger _200_append_only_truncate before truncate on staff.audit
  for each statement execute function staff.tg_audit__append_only();

-- Grants (staff access)
grant usage on schema staff to switchboard_staff, switchboard_system;
grant select (id, email, role, created_at, revoked_at) on staff.members to switchboard_staff_admin;
grant select, insert, update on staff.members to switchboard_system;
grant select on staff.audit to switchboard_staff_admin;
grant select, delete on staff.audit to switchboard_system;
revoke execute on function staff.audit_prune(integer,integer) from public;
revoke execute on function admin.staff_create(text,text,text) from public;
revoke execute on function admin.staff_revoke(uuid) from public;
revoke execute on function admin.staff_list() from public;
revoke execute on function admin.staff_audit(uuid,timestamp with time zone,integer) from public;
revoke execute on function staff.member_by_token(text) from public;
revoke execute on function app.staff_hide_columns(regclass,text[],text[]) from public;
revoke execute on function app.staff_hide_table(regclass) from public;

-- Token hashes are no key staff look rows up by: no `apiKeyByTokenHash`/`staffMemberByTokenHash`
-- fields (the column is unreadable to every staff role anyway).
comment on constraint api_keys_token_hash_key on app.api_keys is E'@behavior -single -update -delete\nToken look-up by hash (app.authorize); not a staff GraphQL key.';
comment on constraint members_token_hash_key on staff.members is E'@behavior -single -update -delete\nToken look-up by hash (staff.member_by_token); not a staff GraphQL key.';

-- Stored Idempotency-Key answers (whole response bodies) and rate-limit counters are no business
-- of staff: the tables leave every staff role (docs/staff.md "Adding a table").
revoke all on app_private.idempotency_keys, app_private.rate_limits from switchboard_staff;
select app.staff_hide_table('app_private.idempotency_keys');
select app.staff_hide_table('app_private.rate_limits');

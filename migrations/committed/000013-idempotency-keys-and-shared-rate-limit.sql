--! Previous: sha1:1464fa98e0d4ec140960d6e6194493f63cf5f22a
--! Hash: sha1:fb1eb3903e6acb458ab8adfa0d1f7d84e8df040a
--! Message: idempotency keys and shared rate limit

-- ─── Idempotency-Key and the shared rate limit (docs/rest-api.md "Idempotency-Key",
-- "Rate limit"). ─────────────────────────────────────────────────────────────────────────────────

-- The answers of token-API POSTs made with an Idempotency-Key, per location, for 24 hours.
create table app_private.idempotency_keys (
  location_id uuid not null,
  idempotency_key text not null,
  fingerprint text not null,
  response_status integer not null,
  response_body text not null,
  created_at timestamp with time zone default now() not null,
  constraint idempotency_keys_pkey primary key (location_id, idempotency_key),
  constraint idempotency_keys_idempotency_key_check check ((length(idempotency_key) between 1 and 255)),
  constraint idempotency_keys_location_id_fkey foreign key (location_id) references app.locations (id) on delete cascade
);
comment on table app_private.idempotency_keys is E'The stored answer of each token-API POST made with an Idempotency-Key, written in the transaction of the write (app.idempotency_begin, app.idempotency_finish); replayed for 24 hours, then pruned by the retention job (docs/rest-api.md "Idempotency-Key").';
comment on column app_private.idempotency_keys.fingerprint is E'SHA-256 of method, operation path and canonical JSON body: the same key with another fingerprint is 422.';
comment on column app_private.idempotency_keys.response_body is E'The data the operation answered (JSON text, byte for byte), replayed inside {"data": …}.';
create index idempotency_keys_location_created_idx on app_private.idempotency_keys (location_id, created_at);
select app.secure_tenant_table('app_private.idempotency_keys', 'select, insert, delete');
-- Staff have no use for replay records (they hold response bodies, webhook secrets included).
revoke all on app_private.idempotency_keys from switchboard_staff;

-- A POST with an Idempotency-Key is one statement (src/idempotency/key.ts):
--   with b as materialized (select * from app.idempotency_begin(…))
--   select …, case when b.replayed_status is not null then b.replayed_body
--                  else app.idempotency_finish(…, api.<operation>(…)::text) end from b
-- so the key, the write and the stored answer share one transaction, and the operation runs only
-- when there is nothing to replay.
create function app.idempotency_location(token_hash text)
 returns uuid
 language plpgsql
 stable
 security definer
 set search_path to 'pg_catalog', 'public', 'pg_temp'
as $function$
begin
  -- plpgsql, not sql: a SQL function that cannot be inlined (definer) is planned on every call.
  return (select k.location_id from app.api_keys k where k.token_hash = idempotency_location.token_hash and k.revoked_at is null);
end
$function$;
alter function app.idempotency_location(text) owner to switchboard_system;
comment on function app.idempotency_location(text) is E'The location of an active token hash (null if none): where app.idempotency_begin looks for a key before the operation authorizes. SECURITY DEFINER because the API role cannot read api_keys; it tells no more than app.authorize(token_hash, null, null) does.';
revoke execute on function app.idempotency_location(text) from public;
grant execute on function app.idempotency_location(text) to switchboard_api;

create function app.idempotency_begin(token_hash text, location_ref text, scope text, idempotency_key text, fingerprint text,
                                      out replayed_status integer, out replayed_body text)
 language plpgsql
as $function$
declare
  loc uuid := app.idempotency_location(token_hash);
  k app_private.idempotency_keys;
begin
  if idempotency_key is null or length(idempotency_key) not between 1 and 255 then
    perform app.raise('SB400', 'Idempotency-Key must be 1 to 255 characters');
  end if;
  -- An unknown token: the operation's own app.authorize answers 401 and nothing is stored.
  if loc is null then
    return;
  end if;
  -- The token's own location, as app.authorize pins it (RLS on the keys).
  perform set_config('app.location_id', loc::text, true);
  -- Concurrent duplicates: the first holds this lock until its transaction ends; the others answer
  -- 409 at once instead of waiting, and a retry after the commit finds the stored answer.
  if not pg_try_advisory_xact_lock(7302, hashtext(loc::text || '/' || idempotency_key)) then
    perform app.authorize(token_hash, location_ref, scope);
    perform app.raise('SBIK9', 'A request with this Idempotency-Key is still being processed; retry after it has finished');
  end if;
  select * into k from app_private.idempotency_keys i
   where i.location_id = loc and i.idempotency_key = idempotency_begin.idempotency_key;
  if found and k.created_at <= now() - interval '24 hours' then
    -- Expired (not pruned yet): the key is free again.
    delete from app_private.idempotency_keys i where i.location_id = loc and i.idempotency_key = idempotency_begin.idempotency_key;
  elsif found then
    -- A stored answer goes only to a request the operation itself would have let through.
    perform app.authorize(token_hash, location_ref, scope);
    if k.fingerprint <> idempotency_begin.fingerprint then
      perform app.raise('SBIK2', 'This Idempotency-Key was already used for a different request');
    end if;
    replayed_status := k.response_status;
    replayed_body := k.response_body;
  end if;
  -- Nothing stored: the operation runs and authorizes (401, 404, 403 roll everything back).
end
$function$;
comment on function app.idempotency_begin(text,text,text,text,text) is E'First half of a token-API POST with an Idempotency-Key: takes the key of the token''s location for the transaction (409 idempotency_key_in_use while another request holds it) and returns the stored answer of the same request (null when there is none: the operation then runs and authorizes itself), or refuses another request''s key (422 idempotency_key_reused); both after app.authorize with the operation''s scope. docs/rest-api.md "Idempotency-Key".';
revoke execute on function app.idempotency_begin(text,text,text,text,text) from public;
grant execute on function app.idempotency_begin(text,text,text,text,text) to switchboard_api;

create function app.idempotency_finish(idempotency_key text, fingerprint text, status integer, body text)
 returns text
 language plpgsql
as $function$
begin
  if body is null then
    perform app.raise('SB404', 'Resource not found');
  end if;
  -- app.idempotency_begin holds the key and removed an expired answer: a plain insert.
  insert into app_private.idempotency_keys (location_id, idempotency_key, fingerprint, response_status, response_body)
  values (app.current_location_id(), idempotency_finish.idempotency_key, idempotency_finish.fingerprint, status, body);
  return body;
end
$function$;
comment on function app.idempotency_finish(text,text,integer,text) is E'Second half of a token-API POST with an Idempotency-Key: stores the operation''s answer (status and JSON text) under the key for the location the operation authorized, in its transaction, and returns it.';
revoke execute on function app.idempotency_finish(text,text,integer,text) from public;
grant execute on function app.idempotency_finish(text,text,integer,text) to switchboard_api;

-- Per-key request budgets shared by every API process: each process leases a share of the current
-- minute's budget and spends it in memory (src/ratelimit/). Counters, not data: unlogged.
create unlogged table app_private.rate_limits (
  token_hash text not null,
  window_start bigint not null,
  used integer not null,
  granted integer not null,
  constraint rate_limits_pkey primary key (token_hash)
);
comment on table app_private.rate_limits is E'Requests leased by the API processes per token hash in the current minute (window_start: Unix minute). Unlogged: a crash resets the counters, which only refills budgets.';
grant select, insert, update, delete on app_private.rate_limits to switchboard_system;

create function app.rate_limit_take(token_hash text, window_start bigint, want integer, budget integer,
                                    out granted integer, out used integer)
 language sql
 security definer
 set search_path to 'pg_catalog', 'public', 'pg_temp'
as $function$
  insert into app_private.rate_limits as r (token_hash, window_start, used, granted)
  values (rate_limit_take.token_hash, rate_limit_take.window_start, least(greatest(want, 0), budget), least(greatest(want, 0), budget))
  on conflict on constraint rate_limits_pkey do update
    set window_start = excluded.window_start,
        granted = case when r.window_start = excluded.window_start
                       then least(greatest(want, 0), greatest(budget - r.used, 0)) else excluded.granted end,
        used = case when r.window_start = excluded.window_start
                    then r.used + least(greatest(want, 0), greatest(budget - r.used, 0)) else excluded.used end
  returning r.granted, r.used
$function$;
alter function app.rate_limit_take(text,bigint,integer,integer) owner to switchboard_system;
comment on function app.rate_limit_take(text,bigint,integer,integer) is E'Leases up to want requests of a token''s budget for the minute window_start; returns how many were granted and how many the minute has used in all. SECURITY DEFINER because the API role has no rights on the counters; it only adds to one token''s count.';
revoke execute on function app.rate_limit_take(text,bigint,integer,integer) from public;
grant execute on function app.rate_limit_take(text,bigint,integer,integer) to switchboard_api;

create function app.idempotency_prune(kind text, batch_size integer)
 returns integer
 language plpgsql
as $function$
declare
  n int;
begin
  if kind = 'idempotency_keys' then
    delete from app_private.idempotency_keys t using (
      select x.location_id, x.idempotency_key from app.locations l cross join lateral (
        select k.location_id, k.idempotency_key from app_private.idempotency_keys k
         where k.location_id = l.id and k.created_at < now() - interval '24 hours'
         order by k.created_at limit batch_size
           for update of k skip locked) x
       limit batch_size) s
     where t.location_id = s.location_id and t.idempotency_key = s.idempotency_key;
  else
    delete from app_private.rate_limits t using (
      select r.token_hash from app_private.rate_limits r
       where r.window_start < floor(extract(epoch from now()) / 60)::bigint - 1
       limit batch_size for update skip locked) s
     where t.token_hash = s.token_hash;
  end if;
  get diagnostics n = row_count;
  return n;
end
$function$;
comment on function app.idempotency_prune(text,integer) is E'Retention (app.retention_prune): deletes one batch of Idempotency-Key answers older than 24 hours (idempotency_keys) or of rate-limit counters of past minutes (rate_limits); returns the count.';
revoke execute on function app.idempotency_prune(text,integer) from public;
grant execute on function app.idempotency_prune(text,integer) to switchboard_system;

-- The retention job also prunes Idempotency-Key answers and rate-limit counters.
CREATE OR REPLACE FUNCTION app.retention_prune(kind text, retention_days integer, batch_size integer)
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
declare
  cutoff timestamptz := now() - make_interval(days => retention_days);
  n int;
begin
  if retention_days < 1 or batch_size < 1 then
    perform app.raise('SB400', 'retention_days and batch_size must be positive');
  end if;
  if kind = 'deliveries' then
    delete from app.webhook_deliveries w using (
      select x.id from app.locations l cross join lateral (
        select d.id from app.webhook_deliveries d
         where d.location_id = l.id and d.created_at < cutoff and d.status <> 'pending'
         order by d.created_at, d.id limit batch_size
           for update of d skip locked) x
       limit batch_size) s
     where w.id = s.id;
  elsif kind = 'notifications' then
    delete from app.notifications t using (
      select x.id from app.locations l cross join lateral (
        select n.id from app.notifications n
         where n.location_id = l.id and n.created_at < cutoff and n.status <> 'pending'
         order by n.created_at, n.id limit batch_size
           for update of n skip locked) x
       limit batch_size) s
     where t.id = s.id;
  elsif kind = 'events' then
    delete from app.events t using (
      select x.id from app.locations l cross join lateral (
        select e.id from app.events e
         where e.location_id = l.id and e.created_at < cutoff
           and not exists (select 1 from app.webhook_deliveries d where d.event_id = e.id)
           and not exists (select 1 from app.notifications n where n.event_id = e.id)
         order by e.created_at, e.id limit batch_size
           for update of e skip locked) x
       limit batch_size) s
     where t.id = s.id;
  -- per-location caller-data windows (app.privacy_settings; docs/privacy.md)
  elsif kind like 'privacy\_%' then
    return app.privacy_prune(substr(kind, 9), batch_size);
  -- Idempotency-Key answers after 24 h, rate-limit counters of past minutes (app.idempotency_prune)
  elsif kind in ('idempotency_keys', 'rate_limits') then
    return app.idempotency_prune(kind, batch_size);
  else
    perform app.raise('SB400', format('Unknown retention kind %s', kind));
  end if;
  get diagnostics n = row_count;
  return n;
end
$function$;
alter function app.retention_prune(text,integer,integer) owner to switchboard_system;
comment on function app.retention_prune(text,integer,integer) is E'Worker (prune_deliveries): deletes one batch of settled deliveries | notifications (with their log) | events older than the retention window; a privacy_* kind clears one batch of caller data past its location''s window instead (app.privacy_prune); idempotency_keys | rate_limits drop Idempotency-Key answers older than 24 hours and rate-limit counters of past minutes (app.idempotency_prune); returns the count.';
revoke execute on function app.retention_prune(text,integer,integer) from public;

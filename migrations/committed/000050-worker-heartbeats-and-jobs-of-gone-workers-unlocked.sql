--! Previous: sha1:766dc965ee8af59573aae6ed8259e7913b484320
--! Hash: sha1:d0f15e602ee08b79379409ae91e50372bf9fabc2
--! Message: Worker heartbeats and jobs of gone workers unlocked

-- Enter migration here

-- ==== graphile-worker jobs of workers that are gone (docs/delivery-engine.md, "The sweeper") ====
-- A job stays locked by the pool that took it until that pool completes or fails it; a worker
-- process that dies (kill -9, OOM, a host lost) leaves it locked for graphile-worker's 4-hour
-- expiry, so a finalize_call due 10 minutes after call_ended (docs/api-contract.md §6) waited
-- hours. Every runner now says it is alive; the sweep unlocks the jobs of pools no longer seen.

create table if not exists app_private.worker_heartbeats (
  worker_id text not null,
  last_seen_at timestamptz not null default now(),
  constraint worker_heartbeats_pkey primary key (worker_id)
);
comment on table app_private.worker_heartbeats is E'The graphile-worker pools (runners) alive now: each running pool writes its id (graphile_worker''s locked_by) every 15 s (src/worker/runner.ts); app.worker_unlock_gone unlocks the jobs of pools not seen for long. Not tenant data: local, beside graphile_worker.';
comment on column app_private.worker_heartbeats.worker_id is E'The pool''s id as graphile-worker writes it into locked_by (pool-…).';

create or replace function app.worker_heartbeat(alive text[], stopped text[])
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
begin
  insert into app_private.worker_heartbeats as h (worker_id, last_seen_at)
  select w, now() from unnest(alive) w
  on conflict (worker_id) do update set last_seen_at = excluded.last_seen_at;
  delete from app_private.worker_heartbeats h where h.worker_id = any (stopped);
end
$function$;
comment on function app.worker_heartbeat(text[], text[]) is E'A worker''s runners say they are alive (`alive`: their pool ids, seen now) or stopped cleanly (`stopped`: forgotten; they hold no job). SECURITY DEFINER so the worker needs no rights on app_private; a graphile-worker door like app.worker_unlock, owned by the migrating role.';
revoke execute on function app.worker_heartbeat(text[], text[]) from public;
grant execute on function app.worker_heartbeat(text[], text[]) to switchboard_system;

create or replace function app.worker_unlock_gone(gone_seconds integer)
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
declare
  cutoff timestamptz := now() - make_interval(secs => gone_seconds);
  gone text[];
  n int;
begin
  -- A pool is gone when it holds a lock taken before the cutoff and has not said it is alive
  -- since: a live pool writes every 15 s whatever its jobs' run time.
  select array_agg(distinct l.locked_by) into gone
    from (select j.locked_by, j.locked_at from graphile_worker._private_jobs j where j.locked_by is not null
          union all
          select q.locked_by, q.locked_at from graphile_worker._private_job_queues q where q.locked_by is not null) l
   where l.locked_at < cutoff
     and not exists (select 1 from app_private.worker_heartbeats h where h.worker_id = l.locked_by and h.last_seen_at >= cutoff);
  select count(*)::int into n from graphile_worker._private_jobs j where j.locked_by = any (gone);
  if gone is not null then
    perform graphile_worker.force_unlock_workers(gone);
  end if;
  delete from app_private.worker_heartbeats h where h.last_seen_at < cutoff;
  return n;
end
$function$;
comment on function app.worker_unlock_gone(integer) is E'The sweep (docs/delivery-engine.md, "The sweeper"): unlocks the graphile-worker jobs and queues of pools that locked them more than gone_seconds ago and have not written app_private.worker_heartbeats since (their process died), so they run again; forgets heartbeats that old. Returns the number of jobs unlocked. SECURITY DEFINER because switchboard_system has no rights on graphile_worker; owned by the migrating role like app.worker_unlock.';
revoke execute on function app.worker_unlock_gone(integer) from public;
grant execute on function app.worker_unlock_gone(integer) to switchboard_system;

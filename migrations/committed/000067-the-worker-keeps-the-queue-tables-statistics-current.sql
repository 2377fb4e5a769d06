--! Previous: sha1:bb44f746207a653b5054b8bb4f4e3f89f7bb95bb
--! Hash: sha1:190580eff0262a57668cf3ef42e989ad058ac017
--! Message: the worker keeps the queue tables' statistics current

-- The queues' statistics kept current by the worker (docs/performance.md, "The twenty-sixth round").
-- The claims' and records' plans are made on the statistics of their moment, and autovacuum's
-- ANALYZE reaches a table at most once per autovacuum_naptime (a minute by default). A burst that
-- grows a queue table many times over inside that minute left every worker session on plans made
-- for the table as it was: after a history whose burst was spread over ten locations, with no
-- ANALYZE since the table was empty, the claim counted live leases and looked for held attempts by
-- reading every row of app.webhook_deliveries through an index of another order, and the record
-- found its attempts with a sequential scan (auto_explain on the worker's sessions: 25,000 and
-- 1,400 buffers a call); the drain after it ran at 35-42 % of its reference instead of 109-165 %.
-- Each worker calls this every few seconds; one at a time does the work.
create or replace function app.queue_statistics_refresh() returns text[]
  language plpgsql security definer
  set search_path = pg_catalog, public, pg_temp
  set lock_timeout = '200ms'
as $$
declare
  t record;
  done text[] := '{}';
begin
  if not pg_try_advisory_xact_lock(hashtext('app.queue_statistics_refresh')) then
    return done;
  end if;
  for t in
    select s.relid::regclass::text as rel
      from pg_stat_user_tables s
      join pg_class c on c.oid = s.relid
     where s.relid in ('app.webhook_deliveries'::regclass, 'app.notifications'::regclass)
       -- Statistics that describe a table far from this one: changed by more than a fifth of the
       -- rows they counted (and a thousand rows), and not analysed in the last five seconds.
       and s.n_mod_since_analyze > 1000 + 0.2 * greatest(c.reltuples, 0)
       and coalesce(greatest(s.last_analyze, s.last_autoanalyze), '-infinity') < now() - interval '5 seconds'
     order by s.relid
  loop
    begin
      execute format('analyze %s', t.rel);
      done := done || t.rel;
    exception when lock_not_available then
      -- Autovacuum (or an operator) is at the table: it is being seen to.
      null;
    end;
  end loop;
  return done;
end
$$;
comment on function app.queue_statistics_refresh() is E'Worker: ANALYZEs app.webhook_deliveries and app.notifications when their statistics are far out of date (changed by more than a fifth of the rows they counted plus 1,000, not analysed in the last 5 s), one caller at a time (advisory lock; the others return at once), giving way to autovacuum (lock_timeout 200 ms). Returns the tables analysed. The claims'' and records'' cached plans are made again on the next call (docs/performance.md, "The twenty-sixth round").';
revoke execute on function app.queue_statistics_refresh() from public;
grant execute on function app.queue_statistics_refresh() to switchboard_system;

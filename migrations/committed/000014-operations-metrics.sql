--! Previous: sha1:fb1eb3903e6acb458ab8adfa0d1f7d84e8df040a
--! Hash: sha1:98e071796769ddec496c67ebf41e77c2056eed44
--! Message: operations metrics

-- Queue gauges for the metrics scrape (docs/operations.md): one call per scrape, on a worker or
-- owner connection, each lane read through the index its claims use.
create function app.metrics_queues()
 returns json
 language plpgsql
 stable
as $function$
declare
  t timestamptz := clock_timestamp();
  hooks json;
  notes json;
  eps json;
  jobs json := null;
begin
  -- Due now and unleased, on an active endpoint (a paused endpoint's attempts wait on purpose):
  -- webhook_deliveries_ready_idx.
  select json_build_object('depth', count(*), 'oldest_due_age_s', coalesce(extract(epoch from t - min(d.next_attempt_at)), 0),
                           'leased', (select count(*) from app.webhook_deliveries l
                                       where l.status = 'pending' and l.lease_expires_at is not null))
    into hooks
    from app.webhook_deliveries d
    join app.webhook_endpoints e on e.id = d.endpoint_id and e.location_id = d.location_id and e.active
   where d.status = 'pending' and d.lease_expires_at is null and d.next_attempt_at <= t;
  -- Per channel: notifications_due_idx; every channel appears, with 0 when nothing waits.
  select json_agg(json_build_object('channel', c.channel, 'depth', coalesce(n.depth, 0),
                                    'oldest_due_age_s', coalesce(extract(epoch from t - n.oldest), 0)) order by c.channel)
    into notes
    from unnest(app.notification_channels()) c(channel)
    left join (select n.channel, count(*) as depth, min(n.next_attempt_at) as oldest
                 from app.notifications n
                where n.status = 'pending' and n.lease_expires_at is null and n.next_attempt_at <= t
                group by n.channel) n on n.channel = c.channel;
  select json_build_object('disabled', count(*) filter (where e.disabled_at is not null),
                           'failing', count(*) filter (where e.active and e.failure_count > 0))
    into eps
    from app.webhook_endpoints e;
  -- graphile-worker's table exists once a worker has started: its jobs_main_index.
  if to_regclass('graphile_worker._private_jobs') is not null then
    execute $q$
      select json_build_object('depth', count(*), 'oldest_due_age_s', coalesce(extract(epoch from $1 - min(j.run_at)), 0))
        from graphile_worker._private_jobs j
       where j.is_available and j.run_at <= $1$q$
      into jobs using t;
  end if;
  return json_build_object('webhooks', hooks, 'notifications', notes, 'endpoints', eps, 'jobs', jobs);
end
$function$;
comment on function app.metrics_queues() is E'Queue depth (due, unleased) and age of the oldest due item per lane (webhooks, notifications per channel, graphile-worker jobs), leased webhook attempts, and endpoints disabled and failing: the gauges of one metrics scrape. Called by the owner role (its system_all policies see every location; it owns graphile_worker).';
revoke execute on function app.metrics_queues() from public;

-- Caller-data privacy settings per location (docs/privacy.md). A location without a row has the
-- defaults: redaction on, content and personal data kept until erased.
create table app.privacy_settings (
  location_id uuid not null,
  redact_sensitive_data boolean default true not null,
  content_retention_days integer,
  personal_data_retention_days integer,
  updated_at timestamp with time zone default now() not null,
  constraint privacy_settings_pkey primary key (location_id),
  constraint privacy_settings_content_retention_days_check check ((content_retention_days between 1 and 36500)),
  constraint privacy_settings_personal_data_retention_days_check check ((personal_data_retention_days between 1 and 36500)),
  constraint privacy_settings_location_id_fkey foreign key (location_id) references app.locations (id) on delete cascade
);
comment on table app.privacy_settings is E'Caller-data redaction and retention of a location; no row means the defaults.';
comment on column app.privacy_settings.redact_sensitive_data is E'Card numbers, security codes, expiry dates and SSNs are replaced at ingestion.';
comment on column app.privacy_settings.content_retention_days is E'Days after which a call''s transcript, turns, recording and log URLs are cleared; null keeps them.';
comment on column app.privacy_settings.personal_data_retention_days is E'Days after which caller personal data is anonymised; null keeps it.';
select app.secure_tenant_table('app.privacy_settings');

create or replace function app.tg_locations__defaults()
 returns trigger
 language plpgsql
as $function$
begin
  insert into app.call_forwarding (location_id) values (new.id);
  insert into app.agent_settings (location_id) values (new.id);
  insert into app.notification_settings (location_id) values (new.id);
  insert into app.privacy_settings (location_id) values (new.id);
  return null;
end
$function$;
comment on function app.tg_locations__defaults() is E'Creates the call forwarding, agent, notification and privacy settings rows of a new location.';

insert into app.privacy_settings (location_id) select id from app.locations on conflict do nothing;

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

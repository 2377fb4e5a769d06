-- Ingestion without NOTIFY (performance): a voice post-call transaction may defer its wake-ups.
-- PostgreSQL holds the notification queue's lock from a NOTIFYing transaction's commit until its
-- WAL is flushed, so transactions that NOTIFY commit one at a time. With defer_wakeups, the jobs a
-- post-call transaction queues wait in app_private.deferred_jobs and the webhook engine is not
-- notified; the API calls app.flush_deferred_jobs() after the commit (coalesced: one flush in
-- flight per process), which adds the jobs in one batch and wakes the engine with one NOTIFY.
-- The worker's delivery_sweep flushes too, for a process that died between commit and flush.

create table if not exists app_private.deferred_jobs (
  id bigint generated always as identity primary key,
  job_key text constraint deferred_jobs_job_key unique,
  task text not null,
  payload json not null,
  run_at timestamptz,
  max_attempts int,
  priority int not null default 0
);
comment on table app_private.deferred_jobs is
  E'graphile-worker jobs queued by a transaction that deferred its wake-ups (app.defer_wakeups = on), waiting for app.flush_deferred_jobs() after its commit. Not tenant data: a local queue beside graphile_worker''s, like it.';

/*
 * Whether the current transaction defers its wake-ups (set by app.voice_post_call(payload, true)).
 */
create or replace function app.wakeups_deferred() returns boolean
  language sql stable parallel safe
as $$ select coalesce(current_setting('app.defer_wakeups', true), '') = 'on' $$;
comment on function app.wakeups_deferred() is
  E'True when the current transaction defers its job inserts and engine wake-ups to app.flush_deferred_jobs() after its commit.';

create or replace function app.enqueue(task text, payload jsonb, run_at timestamptz default null, job_key text default null, max_attempts int default null)
  returns void
  language plpgsql volatile security definer
  set search_path to pg_catalog, public, pg_temp
as $$
begin
  if app.wakeups_deferred() then
    insert into app_private.deferred_jobs (job_key, task, payload, run_at, max_attempts)
    values (enqueue.job_key, enqueue.task, enqueue.payload::json, enqueue.run_at, enqueue.max_attempts)
    on conflict on constraint deferred_jobs_job_key do update
      set task = excluded.task, payload = excluded.payload, run_at = excluded.run_at,
          max_attempts = excluded.max_attempts, priority = excluded.priority;
    return;
  end if;
  perform graphile_worker.add_job(
    identifier := task, payload := payload::json, run_at := run_at,
    job_key := job_key, max_attempts := max_attempts);
end
$$;
comment on function app.enqueue(text, jsonb, timestamptz, text, int) is
  E'Adds a graphile-worker job (or, when the transaction defers its wake-ups, parks it in app_private.deferred_jobs). SECURITY DEFINER because the calling roles have no rights on graphile_worker; only adds a job.';

create or replace function app.dequeue(job_key text) returns void
  language plpgsql volatile security definer
  set search_path to pg_catalog, public, pg_temp
as $$
begin
  delete from app_private.deferred_jobs d where d.job_key = dequeue.job_key;
  perform graphile_worker.remove_job(dequeue.job_key);
end
$$;
comment on function app.dequeue(text) is
  E'SECURITY DEFINER because the voice functions'' owner has no rights on graphile_worker; only removes the job with this job_key, queued or deferred (no-op when there is none).';

create or replace function app.notification_enqueue(notification_id uuid, location_id uuid, priority int, run_at timestamptz default null)
  returns void
  language plpgsql volatile security definer
  set search_path to pg_catalog, public, pg_temp
as $$
declare
  payload json := json_build_object('notification_id', notification_id, 'location_id', location_id);
  key text := 'notification:' || notification_id;
begin
  if app.wakeups_deferred() then
    insert into app_private.deferred_jobs (job_key, task, payload, run_at, max_attempts, priority)
    values (key, 'send_notification', payload, notification_enqueue.run_at, 4, notification_enqueue.priority)
    on conflict on constraint deferred_jobs_job_key do update
      set payload = excluded.payload, run_at = excluded.run_at, priority = excluded.priority;
    return;
  end if;
  perform graphile_worker.add_job(
    identifier := 'send_notification', payload := payload,
    run_at := run_at, max_attempts := 4, job_key := key, priority := priority);
end
$$;
comment on function app.notification_enqueue(uuid, uuid, int, timestamptz) is
  E'Queues send_notification for one notification (job_key notification:<id>, 4 attempts, graphile-worker priority: lower runs first), parked in app_private.deferred_jobs when the transaction defers its wake-ups. SECURITY DEFINER because switchboard_system has no rights on graphile_worker.';

create or replace function app.webhook_enqueue(delivery_id uuid, location_id uuid, due timestamptz) returns void
  language plpgsql volatile security definer
  set search_path to pg_catalog, public, pg_temp
as $$
declare
  cur timestamptz;
begin
  select w.next_attempt_at into cur from app.webhook_deliveries w
   where w.id = webhook_enqueue.delivery_id and w.location_id = webhook_enqueue.location_id
     and w.status = 'pending'
     and w.location_id = coalesce(app.current_location_id(), w.location_id);
  if not found then return; end if;
  if due is not null and cur is distinct from due then
    update app.webhook_deliveries w set next_attempt_at = due where w.id = webhook_enqueue.delivery_id;
  end if;
  if coalesce(due, cur, now()) <= now() and not app.wakeups_deferred() then
    -- One notification per transaction (identical ones are merged at commit).
    perform pg_notify('switchboard_webhooks', '');
  end if;
end
$$;
comment on function app.webhook_enqueue(uuid, uuid, timestamptz) is
  E'Schedules one pending attempt of the caller''s tenant at `due` (now or later) and wakes the delivery engines when it is due (unless the transaction defers its wake-ups to app.flush_deferred_jobs()); no-op for any other row. SECURITY DEFINER (switchboard_system) so API transactions (resume, retry) can schedule without rights on the worker''s wake-up channel or other tenants'' rows.';

/*
 * Moves every deferred job into graphile-worker (add_jobs: one batch, one NOTIFY per 1,000) and
 * wakes the webhook engines once. Run by the API after a deferring transaction commits and by the
 * worker's delivery_sweep. Rows another flush holds are skipped (it adds them). SECURITY DEFINER
 * (migrating role, like app.enqueue) because the callers have no rights on graphile_worker.
 */
create or replace function app.flush_deferred_jobs() returns int
  language plpgsql volatile security definer
  set search_path to pg_catalog, public, pg_temp
as $$
declare
  specs graphile_worker.job_spec[];
  total int := 0;
begin
  loop
    with taken as (
      delete from app_private.deferred_jobs d
       where d.id in (select q.id from app_private.deferred_jobs q order by q.id limit 1000 for update skip locked)
      returning d.*
    )
    select array_agg(row(t.task, t.payload, null, t.run_at, t.max_attempts, t.job_key, t.priority, null)::graphile_worker.job_spec
                     order by t.id)
      into specs from taken t;
    exit when specs is null;
    perform graphile_worker.add_jobs(specs);
    total := total + cardinality(specs);
  end loop;
  perform pg_notify('switchboard_webhooks', '');
  return total;
end
$$;
revoke execute on function app.flush_deferred_jobs() from public;
grant execute on function app.flush_deferred_jobs() to switchboard_system;
comment on function app.flush_deferred_jobs() is
  E'Adds the jobs deferring transactions parked in app_private.deferred_jobs (batches of 1,000) and wakes the webhook engines; returns how many jobs it added. SECURITY DEFINER because the callers have no rights on graphile_worker.';

drop function if exists app.voice_post_call(jsonb);
create or replace function app.voice_post_call(payload jsonb, defer_wakeups boolean default false) returns jsonb
  language plpgsql volatile security definer
  set search_path to pg_catalog, public, pg_temp
as $$
declare
  ev text := payload ->> 'event';
  pc jsonb := payload -> 'call';
  meta jsonb := case when jsonb_typeof(pc -> 'metadata') = 'object' then pc -> 'metadata' end;
  analysis jsonb := case when jsonb_typeof(pc -> 'call_analysis') = 'object' and pc -> 'call_analysis' <> '{}' then pc -> 'call_analysis' end;
  dir text := coalesce(pc ->> 'direction', 'inbound');
  caller app.e164 := app.voice_e164(case when dir = 'outbound' then pc ->> 'to_number' else pc ->> 'from_number' end);
  ours text := case when dir = 'outbound' then pc ->> 'from_number' else pc ->> 'to_number' end;
  uuid_re constant text := '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$';
  phone_loc uuid;
  loc uuid;
  row_id uuid;
  c app.calls;
  nc app.calls;
  prev_status text;
  new_status text := case ev when 'call_ended' then 'ended' when 'call_analyzed' then 'analyzed' else 'started' end;
begin
  if ev not in ('call_started', 'call_ended', 'call_analyzed', 'transfer_started') then
    return jsonb_build_object('status', 'ignored');
  end if;
  if defer_wakeups then
    -- The caller wakes the workers once this transaction has committed (app.flush_deferred_jobs).
    perform set_config('app.defer_wakeups', 'on', true);
  end if;

  if ours is not null then
    select id into phone_loc from app.locations where service_phone = ours;
  end if;
  if meta ->> 'call_row_id' ~ uuid_re then
    select id, location_id into row_id, loc from app.calls where id = (meta ->> 'call_row_id')::uuid;
    if phone_loc is not null and loc is distinct from phone_loc then
      row_id := null;
    end if;
  end if;
  loc := coalesce(phone_loc, loc);
  if loc is null and meta ->> 'location_id' ~ uuid_re then
    select id into loc from app.locations where id = (meta ->> 'location_id')::uuid;
  end if;
  if loc is null then
    perform app.raise('SB404', 'No location matches this call', jsonb_build_object('call_id', pc ->> 'call_id'));
  end if;
  perform set_config('app.location_id', loc::text, true);

  loop
    if row_id is not null then
      select * into c from app.calls where id = row_id for update;
    else
      select * into c from app.calls where location_id = loc and platform_call_id = pc ->> 'call_id' for update;
    end if;
    prev_status := c.platform_status;

    -- Platform facts: newer values win, absent ones keep what we have. Nothing is written when a
    -- replay brings nothing new, so replays change nothing (not even updated_at). For a call not
    -- seen before, c is all nulls and nc is the new row.
    nc := c;
    if nc.platform_call_id like 'rejected:%' then nc.platform_call_id := pc ->> 'call_id'; end if;
    nc.direction := dir;
    nc.caller_phone := coalesce(caller, c.caller_phone);
    nc.to_phone := coalesce(pc ->> 'to_number', c.to_phone);
    nc.agent_id := coalesce(pc ->> 'agent_id', c.agent_id);
    nc.started_at := coalesce(app.voice_ms(pc -> 'start_timestamp'), c.started_at);
    nc.ended_at := coalesce(app.voice_ms(pc -> 'end_timestamp'), c.ended_at);
    nc.duration_sec := coalesce(
      case when nc.started_at is not null and nc.ended_at is not null
           then greatest(round(extract(epoch from nc.ended_at - nc.started_at)), 0)::int end,
      case when jsonb_typeof(pc -> 'duration_ms') = 'number' then round((pc ->> 'duration_ms')::numeric / 1000)::int end,
      c.duration_sec);
    nc.disconnection_reason := coalesce(pc ->> 'disconnection_reason', c.disconnection_reason);
    nc.transcript := coalesce(pc ->> 'transcript', c.transcript);
    nc.transcript_turns := coalesce(case when jsonb_typeof(pc -> 'transcript_object') = 'array' then pc -> 'transcript_object' end, c.transcript_turns);
    nc.recording_url := coalesce(pc ->> 'recording_url', c.recording_url);
    nc.public_log_url := coalesce(pc ->> 'public_log_url', c.public_log_url);
    nc.metadata := coalesce(meta, c.metadata);
    nc.call_summary := coalesce(analysis ->> 'call_summary', c.call_summary);
    nc.user_sentiment := coalesce(analysis ->> 'user_sentiment', c.user_sentiment);
    nc.in_voicemail := coalesce((analysis ->> 'in_voicemail')::boolean, c.in_voicemail);
    if app.voice_status_rank(new_status) > app.voice_status_rank(c.platform_status) then
      nc.platform_status := new_status;
    end if;

    if c.id is not null then
      if nc is distinct from c then
        update app.calls t set
          platform_call_id = nc.platform_call_id, direction = nc.direction, caller_phone = nc.caller_phone,
          to_phone = nc.to_phone, agent_id = nc.agent_id, started_at = nc.started_at, ended_at = nc.ended_at,
          duration_sec = nc.duration_sec, disconnection_reason = nc.disconnection_reason,
          transcript = nc.transcript, transcript_turns = nc.transcript_turns, recording_url = nc.recording_url,
          public_log_url = nc.public_log_url, metadata = nc.metadata, call_summary = nc.call_summary,
          user_sentiment = nc.user_sentiment, in_voicemail = nc.in_voicemail, platform_status = nc.platform_status
        where t.id = c.id
        returning * into c;
      end if;
      exit;
    end if;

    insert into app.calls (location_id, platform_call_id, direction, caller_phone, to_phone, agent_id,
                           started_at, ended_at, duration_sec, disconnection_reason, transcript,
                           transcript_turns, recording_url, public_log_url, metadata, call_summary,
                           user_sentiment, in_voicemail, platform_status)
    values (loc, pc ->> 'call_id', nc.direction, nc.caller_phone, nc.to_phone, nc.agent_id,
            nc.started_at, nc.ended_at, nc.duration_sec, nc.disconnection_reason, nc.transcript,
            nc.transcript_turns, nc.recording_url, nc.public_log_url, coalesce(nc.metadata, '{}'), nc.call_summary,
            nc.user_sentiment, nc.in_voicemail, nc.platform_status)
    on conflict (location_id, platform_call_id) do nothing
    returning * into c;
    exit when c.id is not null;
    -- Another delivery of this call inserted it first: carry on as an update of that row.
    row_id := null;
  end loop;

  if c.finalized_at is null then
    if ev = 'transfer_started' and c.emergency_fired_at is null then
      update app.calls set is_emergency = true, emergency_fired_at = now() where id = c.id returning * into c;
      perform app.emit(loc, 'call.emergency', app.call_summary_json(c)
        || jsonb_build_object('reason', 'warm_transfer', 'lead_id', null));
    elsif ev = 'call_analyzed' or (ev = 'call_ended' and analysis is not null) then
      -- Settled now: a fallback finalize_call job exists only if call_ended without analysis came
      -- first (the call was at 'ended'); it has nothing left to do, so it is taken off the queue.
      if prev_status = 'ended' then
        perform app.dequeue('finalize_call:' || c.id);
      end if;
      c := app.voice_finalize(c, coalesce(analysis, '{}'));
    elsif ev = 'call_ended' and app.voice_status_rank(prev_status) < app.voice_status_rank('ended') then
      -- If call_analyzed never comes, settle the call from its disconnection reason later.
      perform app.enqueue('finalize_call', jsonb_build_object('call_id', c.id),
                          now() + interval '10 minutes', 'finalize_call:' || c.id, 5);
    end if;
  end if;

  return jsonb_build_object('call_id', c.id, 'platform_call_id', c.platform_call_id,
    'platform_status', c.platform_status, 'outcome', c.outcome, 'finalized', c.finalized_at is not null);
end
$$;
comment on function app.voice_post_call(jsonb, boolean) is
  E'Post-call webhook (call_started | call_ended | call_analyzed | transfer_started): routes by the dialled number first (then metadata call_row_id / location_id), inserts a new call with its facts or updates a known one idempotently on the platform call_id, fires call.emergency on a warm transfer, finalises on analysis (removing a queued finalize_call job) or schedules finalize_call 10 minutes after call_ended. With defer_wakeups the transaction sends no NOTIFY: its jobs wait in app_private.deferred_jobs until the caller runs app.flush_deferred_jobs() after the commit.';
alter function app.voice_post_call(jsonb, boolean) owner to switchboard_system;
revoke execute on function app.voice_post_call(jsonb, boolean) from public;

-- The notification lane's claim built each send from app.notification_for_send, which found the
-- event's call, lead and customer by `id::text = data ->> '…'`: no index can serve that, so every
-- claim read all of the location's calls (25 ms per notification at 50,000 calls). The ids are
-- compared as uuids now (event data holds our own uuids; anything else matches nothing).
create or replace function app.uuid_or_null(v text) returns uuid
  language sql immutable parallel safe
as $$ select case when v ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' then v::uuid end $$;
comment on function app.uuid_or_null(text) is
  E'The text as a uuid, or null when it is not one: lets a uuid column''s index serve a match on an id read from JSON.';

create or replace function app.notification_for_send(notification_id uuid) returns jsonb
  language sql stable security definer
  set search_path to pg_catalog, public, pg_temp
as $$
  select jsonb_build_object(
    'id', n.id, 'location_id', n.location_id, 'channel', n.channel, 'provider', n.provider,
    'recipient', n.recipient, 'status', n.status, 'attempts', n.attempts,
    'target_url', case when i.status = 'connected' then i.webhook_url end,
    'integration_status', i.status,
    'location', jsonb_build_object('name', l.name, 'timezone', l.timezone, 'service_phone', l.service_phone),
    'event', case when e.id is null
                  then jsonb_build_object('event', n.event, 'location_id', n.location_id,
                                          'created_at', app.iso(n.created_at), 'data', coalesce(n.data, '{}'::jsonb))
                  else jsonb_build_object('event', e.type, 'location_id', e.location_id,
                                          'created_at', app.iso(e.created_at), 'data', e.data) end,
    -- The event data masks caller phones; people being told to call back need the real number.
    'callback_phone', coalesce(
      case when e.type like 'call.%' then (select c.caller_phone from app.calls c
                                            where c.id = app.uuid_or_null(e.data ->> 'id') and c.location_id = n.location_id) end,
      case when e.type like 'lead.%' then e.data ->> 'phone' end,
      case when e.type like 'booking.%' then (
        select coalesce(ld.phone, cu.phone) from (select 1) one
          left join app.leads ld on ld.id = app.uuid_or_null(e.data ->> 'lead_id') and ld.location_id = n.location_id
          left join app.customers cu on cu.id = app.uuid_or_null(e.data ->> 'customer_id') and cu.location_id = n.location_id) end,
      case when e.type = 'spam.blocked' then null end))
    from app.notifications n
    join app.locations l on l.id = n.location_id
    left join app.events e on e.id = n.event_id
    left join app.integrations i on i.id = n.integration_id
   where n.id = notification_for_send.notification_id
$$;

-- The delivery engine's claim scanned the due queue in order and skipped, row by row, every attempt
-- of an endpoint already at its in-flight cap: with a backlog behind a few busy endpoints, each
-- claim read thousands of rows (30 ms a claim in the ingestion bench). Candidates now come per
-- endpoint from a skip scan over this index. Same rules (cap, fairness, degraded share).
create index if not exists webhook_deliveries_ready_endpoint_idx on app.webhook_deliveries (endpoint_id, next_attempt_at, id)
  where status = 'pending' and lease_expires_at is null;
comment on index app.webhook_deliveries_ready_endpoint_idx is
  E'Unleased pending attempts per endpoint in due order: the engine''s claim (skip scan over endpoints, then each endpoint''s first due attempts).';

create or replace function app.webhook_claim_batch(owner text, max_claims int, max_degraded int, per_endpoint int, lease_ms int)
  returns jsonb
  language plpgsql volatile security definer
  set search_path to pg_catalog, public, pg_temp
  -- Re-planning these statements on every call cost more than running them; the generic plans
  -- (index scans in due order) are the right ones whatever the arguments.
  set plan_cache_mode to force_generic_plan
as $$
declare
  t timestamptz;
  excl uuid[];
  busy jsonb;
  c_ids uuid[];
  c_eps uuid[];
  c_locs uuid[];
  c_dues timestamptz[];
  c_degs boolean[];
  c_rns int[];
  picked uuid[];
  picked_eps uuid[];
  eps uuid[];
  claims jsonb;
  next_due timestamptz;
begin
  perform pg_advisory_xact_lock(hashtext('app.webhook_claim_batch'));
  t := clock_timestamp();
  if max_claims > 0 then
    -- Live leases per endpoint (a few dozen rows per worker): endpoints at the cap are left out.
    select coalesce(array_agg(x.endpoint_id) filter (where x.n >= per_endpoint), '{}'),
           coalesce(jsonb_object_agg(x.endpoint_id, x.n), '{}')
      into excl, busy
      from (select d.endpoint_id, count(*)::int as n
              from app.webhook_deliveries d
             where d.status = 'pending' and d.lease_expires_at > t and d.endpoint_id is not null
             group by d.endpoint_id) x;
    -- Candidates: each endpoint's first (per_endpoint - busy) due attempts. The endpoints that
    -- hold unleased attempts are found by a skip scan of webhook_deliveries_ready_endpoint_idx (one
    -- probe per endpoint), so the cost follows how many endpoints have work, not how many attempts
    -- wait behind endpoints already at their cap.
    with recursive eps as (
      (select d.endpoint_id from app.webhook_deliveries d
        where d.status = 'pending' and d.lease_expires_at is null and d.endpoint_id is not null
        order by d.endpoint_id limit 1)
      union all
      select (select d.endpoint_id from app.webhook_deliveries d
               where d.status = 'pending' and d.lease_expires_at is null and d.endpoint_id > eps.endpoint_id
               order by d.endpoint_id limit 1)
        from eps where eps.endpoint_id is not null
    ), per_ep as (
      select x.id, e.id as endpoint_id, x.location_id, x.next_attempt_at, e.failure_count > 0 as degraded,
             row_number() over (partition by e.id order by x.next_attempt_at, x.id)::int as rn
        from eps
        join app.webhook_endpoints e on e.id = eps.endpoint_id and e.active and not (e.id = any (excl))
        cross join lateral (
          select d.id, d.location_id, d.next_attempt_at from app.webhook_deliveries d
           where d.endpoint_id = e.id and d.status = 'pending' and d.lease_expires_at is null
             and d.next_attempt_at <= t
           order by d.next_attempt_at, d.id
           limit greatest(per_endpoint - coalesce((busy ->> e.id::text)::int, 0), 0)) x
    )
    select coalesce(array_agg(p.id), '{}'), coalesce(array_agg(p.endpoint_id), '{}'),
           coalesce(array_agg(p.location_id), '{}'), coalesce(array_agg(p.next_attempt_at), '{}'),
           coalesce(array_agg(p.degraded), '{}'), coalesce(array_agg(p.rn), '{}')
      into c_ids, c_eps, c_locs, c_dues, c_degs, c_rns
      from per_ep p;

    with cand as (
      select * from unnest(c_ids, c_eps, c_locs, c_dues, c_degs, c_rns) as x(id, endpoint_id, location_id, next_attempt_at, degraded, rn)
    ), turns as (
      select c.*, row_number() over (partition by c.location_id, c.rn order by c.next_attempt_at, c.id) as turn
        from cand c
    ), ordered as (
      select u.*, row_number() over (partition by u.degraded order by u.rn, u.turn, u.next_attempt_at, u.id) as k
        from turns u
    ), chosen as (
      select o.* from ordered o
       where not o.degraded or o.k <= max_degraded
       order by o.degraded, o.rn, o.turn, o.next_attempt_at, o.id
       limit max_claims
    )
    select array_agg(c.id order by c.degraded, c.rn, c.turn, c.next_attempt_at, c.id),
           array_agg(distinct c.endpoint_id)
      into picked, picked_eps
      from chosen c;
  end if;

  if picked is not null then
    select array_agg(x.id) into eps
      from (select e.id from app.webhook_endpoints e
             where e.id = any (picked_eps) and e.active
             order by e.id
               for share) x;
    with upd as (
      update app.webhook_deliveries d
         set lease_expires_at = t + make_interval(secs => lease_ms / 1000.0),
             lease_owner = owner,
             attempted_at = t,
             url = e.url
        from app.webhook_endpoints e
       where d.id = any (picked) and e.id = d.endpoint_id and e.id = any (eps)
         and d.status = 'pending' and d.lease_expires_at is null
      returning d.id, d.event_id, d.event, d.attempt, d.endpoint_id, d.location_id, e.url, e.failure_count,
                e.secret, e.previous_secret, e.previous_secret_expires_at
    )
    select jsonb_agg(jsonb_build_object(
             'delivery_id', u.id, 'event_id', u.event_id, 'event', u.event, 'attempt', u.attempt,
             'endpoint_id', u.endpoint_id, 'location_id', u.location_id, 'url', u.url, 'body', ev.body,
             'degraded', u.failure_count > 0, 'test', ev.type = 'webhook.test',
             'secrets', to_jsonb(array_remove(array[u.secret,
                case when u.previous_secret_expires_at > t then u.previous_secret end], null)))
           order by array_position(picked, u.id))
      into claims
      from upd u join app.events ev on ev.id = u.event_id;
  end if;

  select min(d.next_attempt_at) into next_due
    from app.webhook_deliveries d
   where d.status = 'pending' and d.lease_expires_at is null and d.next_attempt_at > t;
  return jsonb_build_object('claims', coalesce(claims, '[]'::jsonb), 'next_due_at', app.iso(next_due));
end
$$;

-- =============================================================================================
-- Allowed-value lists (issue 13 item 5): the notification provider is a list like the others,
-- defined here and mirrored by src/allowed-values.ts (notificationProviders), which
-- test/db/allowed-values.test.ts compares with this CHECK. The values are the ones
-- app.notification_fanout writes: twilio (sms), smtp (email), the connected integration's
-- provider (chat: slack; automation: zapier, make, n8n, calcom), and `automation` for an
-- automation notification skipped because no such integration is connected.
-- =============================================================================================
alter table app.notifications drop constraint if exists notifications_provider_check;
alter table app.notifications add constraint notifications_provider_check
  check (provider in ('twilio', 'smtp', 'slack', 'zapier', 'make', 'n8n', 'calcom', 'automation'));
comment on column app.notifications.provider is
  E'twilio (sms) | smtp (email) | slack (chat) | zapier | make | n8n | calcom (automation) | automation (an automation notification skipped: no such integration connected).';

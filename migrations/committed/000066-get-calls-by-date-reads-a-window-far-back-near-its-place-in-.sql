--! Previous: sha1:41c1d2e05b170d52336cc32005a7ee4f863700c8
--! Hash: sha1:bb44f746207a653b5054b8bb4f4e3f89f7bb95bb
--! Message: GET calls by date reads a window far back near its place in the page order

-- GET calls by date, a window far back: its calls were found by walking the page order from the
-- newest call (a month 60 to 30 days back in a 1 M-call location read 650,000 newer calls, 235 ms).
-- A call's record is made within hours of its start, so the window's calls are those made near
-- the window, a bounded stretch of the page order, and the few made far from their start (late
-- imports, recovery), which get a small index of their own (docs/performance.md, "Calls by date:
-- a window far back").
create index if not exists calls_location_off_time_idx on app.calls (location_id, started_at)
  include (created_at, id, outcome, is_emergency)
  where started_at is not null
    and (created_at - started_at > interval '6 hours' or started_at - created_at > interval '6 hours');
comment on index app.calls_location_off_time_idx is 'Calls whose record was made more than six hours from their start (late imports, recovery): GET calls by date reads them here, and the rest of a window from the page order near it (api.calls_list).';

CREATE OR REPLACE FUNCTION api.calls_list(token_hash text, location_ref text, filters jsonb, page jsonb, OUT data json, OUT next_cursor text)
 RETURNS record
 LANGUAGE plpgsql
AS $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'calls:read');
  lim int := app.page_limit(page);
  after app.page_cursor := app.page_after(page);
  f_outcome text := filters ->> 'outcome';
  f_from timestamptz := (filters ->> 'from')::timestamptz;
  f_to timestamptz := (filters ->> 'to')::timestamptz;
  f_emergency boolean := (filters ->> 'is_emergency')::boolean;
  since timestamptz := coalesce(f_from, '-infinity');
  upper app.page_cursor;
  scanned int;
  ids uuid[];
  inside int;
  plan_mode text := current_setting('plan_cache_mode');
begin
  if f_outcome is null and f_from is null and f_to is null and f_emergency is null then
    -- Unfiltered pages, the hot read: every value sits behind a sub-select, so the cached generic
    -- plan is chosen and the page is not planned again on each request.
    select coalesce(json_agg(p.j order by p.n) filter (where p.n <= lim), '[]'),
           case when max(p.n) > lim then min(app.cursor_encode(p.created_at, p.id)) filter (where p.n = lim) end
      into data, next_cursor
      from (select app.call_summary_js(c) as j, c.created_at, c.id,
                   row_number() over (order by c.created_at desc, c.id desc) as n
              from app.calls c
             where c.location_id = (select a.location_id)
               and (c.created_at, c.id) < (select after.created_at, after.id)
             order by c.created_at desc, c.id desc limit (select lim + 1)) p;
    return;
  end if;
  if f_to is not null then
    -- 1. A bounded walk of the page order: the window's newest calls are usually among the newest.
    select count(*), (array_agg(w.id order by w.created_at desc, w.id desc)
                        filter (where w.started_at >= since and w.started_at < f_to
                                  and (f_outcome is null or w.outcome = f_outcome)
                                  and (f_emergency is null or w.is_emergency = f_emergency)))[1:lim + 1]
      into scanned, ids
      from (select c.id, c.created_at, c.started_at, c.outcome, c.is_emergency
              from app.calls c
             where c.location_id = (select a.location_id)
               and (c.created_at, c.id) < (select after.created_at, after.id)
             order by c.created_at desc, c.id desc limit 2000) w;
    if cardinality(ids) > lim or scanned < 2000 then
      select coalesce(json_agg(app.call_summary_js(c) order by x.n) filter (where x.n <= lim), '[]'),
             case when max(x.n) > lim then min(app.cursor_encode(c.created_at, c.id)) filter (where x.n = lim) end
        into data, next_cursor
        from unnest(coalesce(ids, '{}')) with ordinality x(id, n)
        join app.calls c on c.location_id = a.location_id and c.id = x.id;
      return;
    end if;
    -- 2. The window's size, bounded (the cursor left out, so the bound bounds the scan): a small
    -- window is read whole from the started_at index; a larger one by 3., which reads it near its
    -- place in the page order.
    select count(*) into inside from (select from app.calls k
      where k.location_id = a.location_id and k.started_at >= since and k.started_at < f_to limit 2000) x;
    if inside < 2000 then
      select coalesce(json_agg(p.j order by p.n) filter (where p.n <= lim), '[]'),
             case when max(p.n) > lim then min(app.cursor_encode(p.created_at, p.id)) filter (where p.n = lim) end
        into data, next_cursor
        from (select app.call_summary_js(c) as j, c.created_at, c.id,
                     row_number() over (order by c.created_at desc, c.id desc) as n
                -- The window's page from the index (the fence keeps the planner off the page-order
                -- walk), then its calls by key.
                from (select w.id, w.created_at
                        from (select k.id, k.created_at from app.calls k
                               where k.location_id = a.location_id
                                 and k.started_at >= since and k.started_at < f_to
                                 and app.before_cursor(k.created_at, k.id, after)
                                 and (f_outcome is null or k.outcome = f_outcome)
                                 and (f_emergency is null or k.is_emergency = f_emergency)
                              offset 0) w
                       order by w.created_at desc, w.id desc limit lim + 1) w
                join app.calls c on c.location_id = a.location_id and c.id = w.id) p;
      return;
    end if;
  end if;
  -- 3. Filtered pages, planned for each request's values: plpgsql would otherwise keep a generic
  -- plan after five calls, and in it `f is null or column = f` can use no index. The page's keys
  -- come from an index that holds every filtered column (outcome, emergencies, started_at), so a
  -- rare combination is counted in the index, not by fetching each call; then its calls by key.
  -- A call's record is made within hours of its start, so with a date filter the window's calls
  -- are (a) those made from six hours before the window to six hours after it, a bounded stretch
  -- of the page order, and (b) the few made later or earlier than that (imports, recovery), read
  -- from their own small index: a window far back no longer walks every newer call.
  -- (a) starts at the cursor or at six hours after the window, whichever is older: one row
  -- comparison, which positions the index scan (beside a second bound on created_at the scan
  -- began at the cursor and stepped over every newer entry).
  upper := case when (f_to + interval '6 hours', '00000000-0000-0000-0000-000000000000'::uuid) < (after.created_at, after.id)
                then row(f_to + interval '6 hours', '00000000-0000-0000-0000-000000000000'::uuid)::app.page_cursor
                else after end;
  perform set_config('plan_cache_mode', 'force_custom_plan', true);
  select coalesce(json_agg(p.j order by p.n) filter (where p.n <= lim), '[]'),
         case when max(p.n) > lim then min(app.cursor_encode(p.created_at, p.id)) filter (where p.n = lim) end
    into data, next_cursor
    from (select app.call_summary_js(c) as j, c.created_at, c.id,
                 row_number() over (order by c.created_at desc, c.id desc) as n
            from (select u.id, u.created_at from (
                   (select k.id, k.created_at from app.calls k
                     where k.location_id = a.location_id
                       and app.before_cursor(k.created_at, k.id, upper)
                       and (f_outcome is null or k.outcome = f_outcome)
                       and (f_from is null or k.started_at >= f_from)
                       and (f_to is null or k.started_at < f_to)
                       and (f_emergency is null or k.is_emergency = f_emergency)
                       and (f_from is null or k.created_at >= f_from - interval '6 hours')
                     order by k.created_at desc, k.id desc limit lim + 1)
                   union
                   -- The planner cannot count calls made far from their start, and took them
                   -- for many: without the fence it walked the page order to find none.
                   (select b.id, b.created_at
                      from (select k.id, k.created_at from app.calls k
                             where (f_from is not null or f_to is not null)
                               and k.location_id = a.location_id
                               and k.started_at is not null
                               and (k.created_at - k.started_at > interval '6 hours' or k.started_at - k.created_at > interval '6 hours')
                               and app.before_cursor(k.created_at, k.id, after)
                               and (f_outcome is null or k.outcome = f_outcome)
                               and (f_from is null or k.started_at >= f_from)
                               and (f_to is null or k.started_at < f_to)
                               and (f_emergency is null or k.is_emergency = f_emergency)
                            offset 0) b
                     order by b.created_at desc, b.id desc limit lim + 1)) u
                   order by u.created_at desc, u.id desc limit lim + 1) w
            join app.calls c on c.location_id = a.location_id and c.id = w.id) p;
  perform set_config('plan_cache_mode', plan_mode, true);
end
$function$;
comment on function api.calls_list(text,text,jsonb,jsonb) is E'GET calls: summaries, newest first; filters { outcome, from, to (started_at, to exclusive), is_emergency }. Returns the page (data) and the next cursor.';
revoke execute on function api.calls_list(text,text,jsonb,jsonb) from public;
grant execute on function api.calls_list(text,text,jsonb,jsonb) to switchboard_api;

--! Previous: sha1:d11e58d0cf0989376621852e905e4af8004eb641
--! Hash: sha1:bb66f84c28e57254b0ea893ec9046d4e1630deed
--! Message: GET calls by outcome and emergency together reads indexes that hold both, planned for each request

-- GET calls filtered by outcome and is_emergency together (docs/performance.md, "Filters in
-- combination"). Each filter alone had its index, but a combination that matches few calls (spam
-- among emergencies: none in a million-call location) fetched every call of the outcome to test
-- is_emergency: 99,632 calls, 0.3-1 s. And emergencies alone, in a location where they are rare,
-- walked every newer call. Now:
--   * the outcome index carries is_emergency and started_at, and the page order's id, so the
--     cursor is an index condition and the other filters are tested in the index;
--   * emergencies have a partial index of their own in the page order, with outcome and
--     started_at;
--   * the filtered page reads its keys first (only indexed columns, so an index-only scan can
--     answer it) and then its calls by key.
-- Both indexes are built here: about 2 s at a million calls, while writes to app.calls wait.

drop index if exists app.calls_location_outcome_idx;
drop index if exists app.calls_location_emergency_idx;
create index calls_location_outcome_idx on app.calls (location_id, outcome, created_at desc, id desc)
  include (is_emergency, started_at);
create index calls_location_emergency_idx on app.calls (location_id, created_at desc, id desc)
  include (outcome, started_at) where is_emergency;

create or replace function api.calls_list(token_hash text, location_ref text, filters jsonb, page jsonb, OUT data json, OUT next_cursor text)
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
    -- 2. The window's size, bounded (the cursor left out, so the bound bounds the scan).
    select count(*) into inside from (select from app.calls k
      where k.location_id = a.location_id and k.started_at >= since and k.started_at < f_to limit 20000) x;
    if inside < 20000 then
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
  perform set_config('plan_cache_mode', 'force_custom_plan', true);
  select coalesce(json_agg(p.j order by p.n) filter (where p.n <= lim), '[]'),
         case when max(p.n) > lim then min(app.cursor_encode(p.created_at, p.id)) filter (where p.n = lim) end
    into data, next_cursor
    from (select app.call_summary_js(c) as j, c.created_at, c.id,
                 row_number() over (order by c.created_at desc, c.id desc) as n
            from (select k.id, k.created_at from app.calls k
                   where k.location_id = a.location_id
                     and app.before_cursor(k.created_at, k.id, after)
                     and (f_outcome is null or k.outcome = f_outcome)
                     and (f_from is null or k.started_at >= f_from)
                     and (f_to is null or k.started_at < f_to)
                     and (f_emergency is null or k.is_emergency = f_emergency)
                   order by k.created_at desc, k.id desc limit lim + 1) w
            join app.calls c on c.location_id = a.location_id and c.id = w.id) p;
  perform set_config('plan_cache_mode', plan_mode, true);
end
$function$;

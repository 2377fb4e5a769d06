--! Previous: sha1:6be83918904f4dfeaefd6a3ab8b96892f07e952e
--! Hash: sha1:73df32773560ae522fba00572cf878b419697106
--! Message: GET calls by date walks the newest calls first and reads the window only when it is small

-- GET calls?from=&to= (000059) reads the window only when the page-order walk would be long and
-- the window is known to be small; otherwise it does what it did before 000059 (this round's
-- audit of 000059, docs/performance.md "Calls by date: the smaller of two reads").
--
-- 000059 decided from the calls *started* after the window, taking the started_at order for the
-- page order. Calls ingested late (created now, started in an old window) sit at the top of the
-- page order, where the walk finds them at once, and 000059 read and sorted the whole window
-- instead (3 ms -> 130 ms); its counts were also pure cost when it walked anyway, and on cursor
-- pages the cursor was a filter of the count's scan, so the bound did not bound it. Now:
--   1. the newest 2,000 calls after the cursor, in the page order: a page found among them (or
--      the location's end reached) is the page;
--   2. otherwise the window's calls are counted from the started_at index, up to 20,000, without
--      the cursor (so the bound bounds the scan): fewer, and the window is read from that index;
--   3. otherwise the page-order walk, as before 000059.
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
  -- 3. Filtered pages: planned per request, so the outcome and started_at indexes serve them.
  select coalesce(json_agg(p.j order by p.n) filter (where p.n <= lim), '[]'),
         case when max(p.n) > lim then min(app.cursor_encode(p.created_at, p.id)) filter (where p.n = lim) end
    into data, next_cursor
    from (select app.call_summary_js(c) as j, c.created_at, c.id,
                 row_number() over (order by c.created_at desc, c.id desc) as n
            from app.calls c
           where c.location_id = a.location_id
             and app.before_cursor(c.created_at, c.id, after)
             and (f_outcome is null or c.outcome = f_outcome)
             and (f_from is null or c.started_at >= f_from)
             and (f_to is null or c.started_at < f_to)
             and (f_emergency is null or c.is_emergency = f_emergency)
           order by c.created_at desc, c.id desc limit lim + 1) p;
end
$function$;

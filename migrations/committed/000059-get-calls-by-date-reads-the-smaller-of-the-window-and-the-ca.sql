--! Previous: sha1:8583f7bea0135f646f0e48a2d17ad365bfb46cdb
--! Hash: sha1:dc587117ab507c383c5bda3701c71e566e1f2d7c
--! Message: GET calls by date reads the smaller of the window and the calls newer than it

-- GET calls?from=&to= in a large location reads the smaller of two things: the calls newer than
-- the window (walking the page order, created_at, as before) or the window itself (through the
-- started_at index, now carrying the page order), instead of always the first (docs/performance.md,
-- "Calls by date: the smaller of two reads").
--
-- The filter is on started_at and the page order on created_at. The planner took the two for
-- independent and walked the newest calls first, expecting the window's rows among them: a window
-- a month back in a 1 M-call location walked 650,000 newer calls (335 ms-1.2 s). The page order
-- and its cursor are part of the published list and stay as they are.

-- The started_at index carries the page order (created_at, id), so a window is read and sorted
-- from the index alone, without a heap fetch per call of the window.
drop index app.calls_location_started_idx;
create index calls_location_started_idx on app.calls (location_id, started_at)
  include (outcome, estimated_value, is_emergency, service_type, created_at, id);

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
  newer int := 0;
  inside int := 0;
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
  -- A window that ends before the newest calls: the page-order walk reads every call started
  -- after it (about `newer`), a read of the window every call in it (`inside`); each is counted
  -- from the started_at index, only as far as deciding needs. Fewer inside: the window is read.
  -- Both past 20,000: the window is read unless the newer calls stop short of 160,000 (the walk
  -- fetches a heap row per call, the window read does not).
  if f_to is not null then
    select count(*) into newer from (select from app.calls k
      where k.location_id = a.location_id and k.started_at >= f_to and app.before_cursor(k.created_at, k.id, after)
      limit 20000) x;
    if newer > 0 then
      select count(*) into inside from (select from app.calls k
        where k.location_id = a.location_id and k.started_at >= since and k.started_at < f_to
          and app.before_cursor(k.created_at, k.id, after)
        limit newer) x;
    end if;
    if newer = 20000 and inside = 20000 then
      select count(*) into newer from (select from app.calls k
        where k.location_id = a.location_id and k.started_at >= f_to and app.before_cursor(k.created_at, k.id, after)
        limit 160000) x;
      if newer < 160000 then inside := newer; end if;
    end if;
  end if;
  if inside < newer then
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
  -- Filtered pages: planned per request, so the outcome and started_at indexes serve them.
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

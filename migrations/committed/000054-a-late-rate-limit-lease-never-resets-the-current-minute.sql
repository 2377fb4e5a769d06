--! Previous: sha1:24a82016bff6834cbe5e4f0b2c2c20206477a64f
--! Hash: sha1:c497294a80c724340423dcf4207f71624207041d
--! Message: a late rate-limit lease never resets the current minute

-- The shared rate limit: a late lease of a past minute never resets the current one (docs/decisions.md).
CREATE OR REPLACE FUNCTION app.rate_limit_take(token_hash text, window_start bigint, want integer, budget integer, OUT granted integer, OUT used integer)
 RETURNS record
 LANGUAGE sql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog', 'public', 'pg_temp'
AS $function$
  insert into app_private.rate_limits as r (token_hash, window_start, used, granted)
  select rate_limit_take.token_hash, rate_limit_take.window_start, least(greatest(want, 0), budget), least(greatest(want, 0), budget)
   where exists (select 1 from app.api_keys k where k.token_hash = rate_limit_take.token_hash and k.revoked_at is null)
  on conflict on constraint rate_limits_pkey do update
    -- A lease of a past minute that arrives late (a held connection) gets nothing and moves
    -- nothing back: resetting the row to its minute would forget what the current one granted.
    set window_start = greatest(r.window_start, excluded.window_start),
        granted = case when r.window_start = excluded.window_start
                       then least(greatest(want, 0), greatest(budget - r.used, 0))
                       when r.window_start > excluded.window_start then 0
                       else excluded.granted end,
        used = case when r.window_start = excluded.window_start
                    then r.used + least(greatest(want, 0), greatest(budget - r.used, 0))
                    when r.window_start > excluded.window_start then r.used
                    else excluded.used end
  returning r.granted, r.used
$function$;
alter function app.rate_limit_take(text,bigint,integer,integer) owner to switchboard_system;
comment on function app.rate_limit_take(text,bigint,integer,integer) is E'Leases up to want requests of a token''s budget for the minute window_start; returns how many were granted and how many the minute has used in all (a lease of a minute older than the row''s is granted 0 and changes nothing), or nulls (and writes nothing) when the token is no active API key. SECURITY DEFINER because the API role has no rights on the counters or the keys; it only adds to one known token''s count.';
revoke execute on function app.rate_limit_take(text,bigint,integer,integer) from public;
grant execute on function app.rate_limit_take(text,bigint,integer,integer) to switchboard_api;

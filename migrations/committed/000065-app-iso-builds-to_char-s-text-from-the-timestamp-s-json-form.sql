--! Previous: sha1:b864ee4fb3fac31c334cd3fd21e1afc5868dd7af
--! Hash: sha1:41c1d2e05b170d52336cc32005a7ee4f863700c8
--! Message: app.iso builds to_char's text from the timestamp's JSON form

-- app.iso, the API's timestamp text, at about two thirds of its cost: every list page, event body
-- and record the API shows formats its timestamps here (a calls page, 150 of them), and to_char
-- re-reads its picture for each (docs/performance.md, "The twenty-third round").
--
-- A timestamp without time zone (UTC) converts to JSON as ISO 8601 whatever the session's
-- DateStyle, with its fraction trimmed of trailing zeros; truncated to the millisecond and one
-- microsecond added, the fraction always has six digits, of which the first three are to_char's
-- `MS`. Years 1 to 9999 only, where that text has the same width; anything else (infinity, BC,
-- a year past 9999) keeps to_char, so the text is to_char's for every timestamp.
create or replace function app.iso(ts timestamp with time zone)
 RETURNS text
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$
  select case when ts >= '0001-01-01 00:00:00+00' and ts < '10000-01-01 00:00:00+00'
              then substr(to_json(date_trunc('milliseconds', ts at time zone 'UTC') + interval '1 microsecond')::text, 2, 23) || 'Z'
              else to_char(ts at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') end
$function$;
comment on function app.iso(timestamp with time zone) is E'ISO 8601 UTC with milliseconds, the API''s timestamp format: to_char''s text (YYYY-MM-DD"T"HH24:MI:SS.MS"Z"), built from the JSON form of the timestamp for years 1 to 9999 (cheaper), by to_char itself otherwise.';

--! Previous: sha1:c4580288caf84469cca078db81fadb78a033fe5f
--! Hash: sha1:329ee72e710d41b781c4bbcabd2976c6ceafdc9d
--! Message: the booked call's window lookup keeps one plan per session

-- The booked call's window lookup (app.scheduling_windows, inlined into voice_finalize_effects'
-- query) was planned again at every execution: plpgsql's plan cache kept choosing custom plans,
-- 3.2 ms of planning per booked call (0.6 ms per ingested call of the bench's mix) against
-- 0.6 ms to run it. A generic plan is made once per session; the function's other statements
-- already ran generic plans (pg_stat_statements.track_planning: no other statement of the
-- ingestion path is planned again). docs/performance.md, "the third round".
alter function app.voice_finalize_effects(app.calls, boolean) set plan_cache_mode = force_generic_plan;

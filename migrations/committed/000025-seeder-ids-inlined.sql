--! Previous: sha1:8a86059ddbbe1dce1fdbe132a05c04ec6923c243
--! Hash: sha1:3a2f8ef3ae57e6d2e513c4319801a8dfdc956020
--! Message: seeder ids inlined

-- ==== Performance after a realistic history: the seeder's ids inlined ====
-- app_private.uuid_v7() was a SQL function with its own `set search_path`, which PostgreSQL never
-- inlines: every row of a demo-seed batch (about 2.7 ids a call) paid a function call and the
-- save and restore of search_path around it, about a fifth of a 20,000-call batch (7.7-7.9 s
-- against 5.9-6.4 s inlined; docs/performance.md, "Seeding in batches"). Without the setting the
-- planner inlines the body into the insert. Every name in it is schema-qualified (operators and
-- casts resolve in pg_catalog first), and it is not SECURITY DEFINER, so nothing depends on the
-- caller's search_path. date_part gives the epoch as a double, cheaper than extract's numeric.
create or replace function app_private.uuid_v7() returns uuid
  language sql volatile parallel safe
as $$
  select pg_catalog.encode(
           pg_catalog.set_bit(pg_catalog.set_bit(
             overlay(pg_catalog.uuid_send(pg_catalog.gen_random_uuid())
               placing substring(pg_catalog.int8send(
                 pg_catalog.floor(pg_catalog.date_part('epoch', pg_catalog.clock_timestamp()) * 1000)::bigint) from 3)
               from 1 for 6),
             52, 1), 53, 1),
           'hex')::uuid
$$;
comment on function app_private.uuid_v7() is E'A version 7 UUID (RFC 9562): the current Unix time in milliseconds, then random bits. The demo seeder''s row ids, which then sort by creation. No SET clause, so the planner inlines it into the statement that calls it.';

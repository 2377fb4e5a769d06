--! Previous: sha1:1845fb76ece6b622fe35e0fffea65c7616b6a00f
--! Hash: sha1:11b4a67d2797a840898686dd8e8bbfac180ac6b8
--! Message: the claim reads the delivery table through its indexes whatever the statistics

-- The claim reads the delivery table only through the partial indexes written for it (the due
-- order, the due order per endpoint, the live leases, the held attempts, the primary key). Its
-- plans are generic (force_generic_plan) and made once per session, on the statistics of that
-- moment: made while the table held no pending rows, before a burst, they chose sequential
-- scans and sorts of the whole table for the walk, the live leases and the next due time, and
-- kept them until autovacuum's next ANALYZE (up to a minute later; gdb on the worker's backend
-- during a burst, docs/performance.md, "Performance after a realistic history: the third round").
-- Sequential and bitmap scans are off for the claim alone, so its access paths do not depend on
-- how fresh the statistics are. The endpoints' `active` list has no index and is still scanned.
alter function app.webhook_claim_batch(text, integer, integer, integer, integer) set enable_seqscan = off;
alter function app.webhook_claim_batch(text, integer, integer, integer, integer) set enable_bitmapscan = off;

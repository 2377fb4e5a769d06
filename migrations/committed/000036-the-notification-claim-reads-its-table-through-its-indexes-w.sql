--! Previous: sha1:4a3c5bd549f0fda8e5ffe72c12eda9cc77530f5b
--! Hash: sha1:9a8d38e75b7c824cd21cefee9391746fea0d57e2
--! Message: the notification claim reads its table through its indexes whatever the statistics

-- The notification lane reads its table only through its indexes, whatever the statistics. Both
-- statements of a claim are planned once per session (force_generic_plan), on the statistics of
-- that moment: made while the table held a few dozen rows, the pick sorted a sequential scan of
-- every notification and the send's query hash-joined one, and kept doing so through a burst's
-- thousands until the next ANALYZE: 31 ms of postgres a claim of four, 8 ms a notification,
-- half the worker's database time in the burst's tail (auto_explain and pg_stat_statements,
-- docs/performance.md, "Performance after a realistic history: the fifth round"). As for the
-- webhook claim (000034), sequential and bitmap scans are off for these two functions alone.
alter function app.notification_claim_batch(text, integer, integer) set enable_seqscan = off;
alter function app.notification_claim_batch(text, integer, integer) set enable_bitmapscan = off;
alter function app.notification_for_send(uuid[]) set enable_seqscan = off;
alter function app.notification_for_send(uuid[]) set enable_bitmapscan = off;

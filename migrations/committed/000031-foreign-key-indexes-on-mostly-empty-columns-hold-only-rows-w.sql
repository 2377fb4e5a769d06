--! Previous: sha1:25f3f5a8c3f9794bef911b390012bb867a647984
--! Hash: sha1:c4580288caf84469cca078db81fadb78a033fe5f
--! Message: foreign-key indexes on mostly empty columns hold only rows with a value

-- A lead is rarely assigned when it is created (every seeded lead, and nearly every ingested one,
-- has assigned_to null), and a notification names an integration only on the Slack channel: yet
-- both foreign-key indexes took an entry for every row. The only readers are the foreign keys'
-- ON DELETE SET NULL actions (a member or an integration deleted), whose `col = $1` implies
-- `col is not null`, so a partial index serves them as before (test/db/catalog.test.ts checks the
-- plans). A 20,000-call seed batch writes about 13,500 fewer WAL records (docs/performance.md).
drop index if exists app.leads_assigned_to_idx;
create index leads_assigned_to_idx on app.leads (assigned_to, location_id) where assigned_to is not null;
drop index if exists app.notifications_integration_idx;
create index notifications_integration_idx on app.notifications (integration_id, location_id) where integration_id is not null;

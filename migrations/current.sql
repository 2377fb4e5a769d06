-- =============================================================================================
-- Allowed-value lists (issue 13 item 5): the notification provider is a list like the others,
-- defined here and mirrored by src/allowed-values.ts (notificationProviders), which
-- test/db/allowed-values.test.ts compares with this CHECK. The values are the ones
-- app.notification_fanout writes: twilio (sms), smtp (email), the connected integration's
-- provider (chat: slack; automation: zapier, make, n8n, calcom), and `automation` for an
-- automation notification skipped because no such integration is connected.
-- =============================================================================================
alter table app.notifications drop constraint if exists notifications_provider_check;
alter table app.notifications add constraint notifications_provider_check
  check (provider in ('twilio', 'smtp', 'slack', 'zapier', 'make', 'n8n', 'calcom', 'automation'));
comment on column app.notifications.provider is
  E'twilio (sms) | smtp (email) | slack (chat) | zapier | make | n8n | calcom (automation) | automation (an automation notification skipped: no such integration connected).';

--! Previous: sha1:89a6ee2bf0ca95c649808efac740000068098a7f
--! Hash: sha1:d3a4ffc06cb2a26934d031ebb7c598cb33a55e2e
--! Message: webhook endpoints and deliveries, notifications and their log

create table app.webhook_endpoints (
  id uuid primary key default gen_random_uuid(),
  location_id uuid not null references app.locations on delete cascade,
  label text check (length(label) <= 200),
  url app.https_url not null,
  events text[] not null check (cardinality(events) > 0 and events <@ app.event_types()),
  secret text not null check (secret ~ '^whsec_[A-Za-z0-9_-]{43}$'),
  previous_secret text,
  previous_secret_expires_at timestamptz,
  active boolean not null default true,
  failure_count int not null default 0 check (failure_count >= 0),
  last_success_at timestamptz,
  last_failure_at timestamptz,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index webhook_endpoints_location_created_idx on app.webhook_endpoints (location_id, created_at desc, id desc);
comment on table app.webhook_endpoints is E'HTTPS receivers of signed events.';
comment on column app.webhook_endpoints.secret is E'@behavior -select -filterBy -orderBy\nHMAC key (whsec_ + 32 random bytes, base64url); shown once.';
comment on column app.webhook_endpoints.previous_secret is E'@behavior -select -filterBy -orderBy\nThe secret before the last rotation; still signs until previous_secret_expires_at.';
comment on column app.webhook_endpoints.failure_count is E'Consecutive failed attempts; any 2xx resets it.';
comment on column app.webhook_endpoints.active is E'false pauses: no new deliveries, pending retries held.';
create trigger _100_set_updated_at before update on app.webhook_endpoints
  for each row execute function app.tg__set_updated_at();
select app.secure_tenant_table('app.webhook_endpoints');

create table app.webhook_deliveries (
  id uuid primary key default gen_random_uuid(),
  location_id uuid not null references app.locations on delete cascade,
  event_id uuid not null references app.events on delete cascade,
  endpoint_id uuid references app.webhook_endpoints on delete set null,
  event text not null,
  attempt int not null default 1 check (attempt >= 1),
  status text not null default 'pending' check (status in ('pending', 'delivered', 'failed', 'dead')),
  url text not null,
  response_status int,
  response_body text check (octet_length(response_body) <= 16384),
  error text,
  duration_ms int,
  created_at timestamptz not null default now(),
  attempted_at timestamptz,
  next_attempt_at timestamptz
);
create index webhook_deliveries_location_created_idx on app.webhook_deliveries (location_id, created_at desc, id desc);
create index webhook_deliveries_endpoint_idx on app.webhook_deliveries (endpoint_id, status);
create index webhook_deliveries_event_idx on app.webhook_deliveries (event_id);
comment on table app.webhook_deliveries is E'One row per delivery attempt; its id is the svc-delivery-id header.';
comment on column app.webhook_deliveries.attempt is E'1 for the first try, then 2… up to the retry schedule''s length + 1.';
comment on column app.webhook_deliveries.status is E'pending | delivered | failed (a retry follows) | dead (no more attempts).';
comment on column app.webhook_deliveries.response_body is E'First 16 KiB of the receiver''s answer.';
comment on column app.webhook_deliveries.next_attempt_at is E'When the following attempt is due, if any.';
select app.secure_tenant_table('app.webhook_deliveries', 'select, insert, update, delete');

create table app.notification_settings (
  location_id uuid primary key references app.locations on delete cascade,
  routes jsonb not null default '{
    "call.emergency": ["sms", "email", "chat"],
    "lead.created": ["email", "chat"],
    "lead.updated": [],
    "booking.created": ["email", "chat"],
    "booking.updated": ["email", "chat"],
    "call.ended": [],
    "spam.blocked": []
  }' check (jsonb_typeof(routes) = 'object'),
  sms_recipients text[] not null default '{}',
  email_recipients text[] not null default '{}',
  updated_at timestamptz not null default now()
);
comment on table app.notification_settings is E'Which events notify which channels, and extra recipients. A location without a row uses the defaults.';
comment on column app.notification_settings.routes is E'{ event type: [channel…] } with channels sms | email | chat | automation.';
comment on column app.notification_settings.sms_recipients is E'E.164 numbers texted besides the owner''s cell.';
comment on column app.notification_settings.email_recipients is E'Addresses e-mailed besides owners and admins.';
create trigger _100_set_updated_at before update on app.notification_settings
  for each row execute function app.tg__set_updated_at();
select app.secure_tenant_table('app.notification_settings');

create table app.notifications (
  id uuid primary key default gen_random_uuid(),
  location_id uuid not null references app.locations on delete cascade,
  event_id uuid references app.events on delete cascade,
  event text not null,
  channel text not null check (channel in ('sms', 'email', 'chat', 'automation')),
  provider text not null,
  recipient text,
  status text not null default 'pending' check (status in ('pending', 'sent', 'failed', 'skipped')),
  attempts int not null default 0,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index notifications_location_created_idx on app.notifications (location_id, created_at desc, id desc);
create index notifications_event_idx on app.notifications (event_id);
comment on table app.notifications is E'One message to a person or room (SMS, e-mail, chat, automation) derived from an event.';
comment on column app.notifications.provider is E'twilio | smtp | slack | zapier | make | n8n | calcom.';
comment on column app.notifications.status is E'pending | sent | failed | skipped (channel not configured).';
create trigger _100_set_updated_at before update on app.notifications
  for each row execute function app.tg__set_updated_at();
select app.secure_tenant_table('app.notifications');

create table app.notification_log (
  id uuid primary key default gen_random_uuid(),
  location_id uuid not null references app.locations on delete cascade,
  notification_id uuid not null references app.notifications on delete cascade,
  at timestamptz not null default now(),
  status text not null check (status in ('pending', 'sent', 'failed', 'skipped')),
  detail text,
  response_status int
);
create index notification_log_notification_idx on app.notification_log (notification_id, at);
create index notification_log_location_idx on app.notification_log (location_id);
comment on table app.notification_log is E'Each try of a notification, with its outcome.';
select app.secure_tenant_table('app.notification_log');

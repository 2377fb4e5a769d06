--! Previous: sha1:0a8e9a3bd75806d7dd6de944fc63d54de746359f
--! Hash: sha1:89a6ee2bf0ca95c649808efac740000068098a7f
--! Message: knowledge and settings: FAQs, pricebook, forwarding, hours, agent, integrations

create table app.faqs (
  id uuid primary key default gen_random_uuid(),
  location_id uuid not null references app.locations on delete cascade,
  question text not null check (length(question) between 1 and 1000),
  answer text not null check (length(answer) between 1 and 5000),
  asked_count int not null default 0 check (asked_count >= 0),
  position int not null default 0,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index faqs_location_created_idx on app.faqs (location_id, created_at desc, id desc);
create index faqs_location_position_idx on app.faqs (location_id, position, id);
comment on table app.faqs is E'Questions and answers the agent may read to callers.';
comment on column app.faqs.asked_count is E'How often callers asked it.';
comment on column app.faqs.position is E'Ordering (ascending).';
create trigger _100_set_updated_at before update on app.faqs
  for each row execute function app.tg__set_updated_at();
select app.secure_tenant_table('app.faqs');

create table app.pricebook_items (
  id uuid primary key default gen_random_uuid(),
  location_id uuid not null references app.locations on delete cascade,
  service_name text not null check (length(service_name) between 1 and 200),
  price text not null check (length(price) between 1 and 200),
  note text check (length(note) <= 2000),
  position int not null default 0,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index pricebook_items_location_created_idx on app.pricebook_items (location_id, created_at desc, id desc);
create index pricebook_items_location_position_idx on app.pricebook_items (location_id, position, id);
comment on table app.pricebook_items is E'Services and their prices, quoted to callers.';
comment on column app.pricebook_items.price is E'Free text such as "$89-$149"; deliberately not a number.';
comment on column app.pricebook_items.position is E'Ordering (ascending).';
create trigger _100_set_updated_at before update on app.pricebook_items
  for each row execute function app.tg__set_updated_at();
select app.secure_tenant_table('app.pricebook_items');

create table app.call_forwarding (
  location_id uuid primary key references app.locations on delete cascade,
  mode text not null default 'off' check (mode in ('replace', 'no_answer', 'busy', 'after_hours', 'off')),
  existing_business_line app.e164,
  updated_at timestamptz not null default now()
);
comment on table app.call_forwarding is E'How the business line reaches the agent: replace | no_answer | busy | after_hours | off.';
comment on column app.call_forwarding.existing_business_line is E'The business''s own number that forwards to the service phone.';
create trigger _100_set_updated_at before update on app.call_forwarding
  for each row execute function app.tg__set_updated_at();
select app.secure_tenant_table('app.call_forwarding');

create table app.business_hours (
  id uuid primary key default gen_random_uuid(),
  location_id uuid not null references app.locations on delete cascade,
  day smallint not null check (day between 0 and 6),
  open app.hhmm not null,
  close app.hhmm not null,
  check (open < close),
  unique (location_id, day, open)
);
comment on table app.business_hours is E'Opening intervals per weekday (0 = Sunday) in the location''s timezone; a day without rows is closed.';
select app.secure_tenant_table('app.business_hours');

create table app.agent_settings (
  location_id uuid primary key references app.locations on delete cascade,
  greeting text check (length(greeting) <= 1000),
  transfer_number app.e164,
  emergency_keywords text[] not null default '{}',
  booking_enabled boolean not null default true,
  blocked_numbers text[] not null default '{}',
  updated_at timestamptz not null default now()
);
comment on table app.agent_settings is E'How the voice agent behaves for a location.';
comment on column app.agent_settings.transfer_number is E'Where warm transfers go.';
comment on column app.agent_settings.emergency_keywords is E'Words that make a call urgent.';
comment on column app.agent_settings.blocked_numbers is E'E.164 callers rejected before the agent answers (recorded as spam).';
create trigger _100_set_updated_at before update on app.agent_settings
  for each row execute function app.tg__set_updated_at();
select app.secure_tenant_table('app.agent_settings');

create table app.integrations (
  id uuid primary key default gen_random_uuid(),
  location_id uuid not null references app.locations on delete cascade,
  provider text not null check (provider in ('slack', 'zapier', 'make', 'n8n', 'calcom',
    'google_calendar', 'outlook', 'jobber', 'housecall_pro', 'servicetitan', 'hubspot')),
  status text not null default 'connected' check (status in ('connected', 'disconnected', 'error', 'expired')),
  label text check (length(label) <= 200),
  webhook_url app.https_url,
  external_id text,
  expires_at timestamptz,
  config jsonb not null default '{}',
  access_token text,
  refresh_token text,
  connected_at timestamptz,
  disconnected_at timestamptz,
  last_synced_at timestamptz,
  last_error text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create unique index integrations_one_connected_key on app.integrations (location_id, provider) where status = 'connected';
create index integrations_location_created_idx on app.integrations (location_id, created_at desc, id desc);
comment on table app.integrations is E'Third-party connections. Webhook-style providers (slack, zapier, make, n8n, calcom) post to webhook_url.';
comment on column app.integrations.status is E'connected | disconnected | error | expired; one connected row per provider.';
comment on column app.integrations.access_token is E'@behavior -select -filterBy -orderBy\nOAuth access token; never returned by any API.';
comment on column app.integrations.refresh_token is E'@behavior -select -filterBy -orderBy\nOAuth refresh token; never returned by any API.';
create trigger _100_set_updated_at before update on app.integrations
  for each row execute function app.tg__set_updated_at();
select app.secure_tenant_table('app.integrations');

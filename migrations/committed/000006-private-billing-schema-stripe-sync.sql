--! Previous: sha1:d3a4ffc06cb2a26934d031ebb7c598cb33a55e2e
--! Hash: sha1:606d2ae54cbd2d448751eaaa5a82a93392086146
--! Message: private billing schema (Stripe sync)

create schema billing;
comment on schema billing is E'Subscriptions and invoices synced from Stripe. No API token reaches it: the API role has no usage on this schema; staff do.';
revoke all on schema billing from public;
grant usage on schema billing to switchboard_staff, switchboard_system;

create table billing.customers (
  id text primary key,
  location_id uuid references app.locations on delete set null,
  email text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index customers_location_idx on billing.customers (location_id);
comment on table billing.customers is E'Stripe customers and the location each pays for.';

create table billing.subscriptions (
  id text primary key,
  location_id uuid references app.locations on delete set null,
  customer_id text,
  status text not null,
  price_id text,
  quantity int,
  current_period_end timestamptz,
  cancel_at_period_end boolean not null default false,
  canceled_at timestamptz,
  raw jsonb not null,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index subscriptions_location_idx on billing.subscriptions (location_id);
create index subscriptions_customer_idx on billing.subscriptions (customer_id);
comment on table billing.subscriptions is E'A location''s plan; status mirrors Stripe (active, past_due, canceled…).';
comment on column billing.subscriptions.current_period_end is E'From items.data[0].current_period_end.';

create table billing.invoices (
  id text primary key,
  location_id uuid references app.locations on delete set null,
  subscription_id text,
  customer_id text,
  status text not null,
  amount_due bigint,
  amount_paid bigint,
  currency text,
  hosted_invoice_url text,
  paid_at timestamptz,
  payment_failed_at timestamptz,
  raw jsonb not null,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index invoices_location_idx on billing.invoices (location_id);
create index invoices_subscription_idx on billing.invoices (subscription_id);
comment on table billing.invoices is E'Invoices; the subscription comes from parent.subscription_details.subscription.';

create table billing.processed_events (
  id text primary key,
  type text not null,
  received_at timestamptz not null default now()
);
comment on table billing.processed_events is E'Stripe event ids already applied; replays are ignored.';

grant select, insert, update, delete on all tables in schema billing to switchboard_staff, switchboard_system;

--! Previous: sha1:454a1f259a452425b6bd07c0509b750ec6b760b7
--! Hash: sha1:bb632ab12425bfb36b33ac3651d871cbca1e4217
--! Message: locations, members, api keys, customers

create table app.locations (
  id uuid primary key default gen_random_uuid(),
  slug text not null unique
    check (slug ~ '^[a-z0-9][a-z0-9-]{1,62}$'
           and slug !~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'),
  name text not null check (length(name) between 1 and 200),
  legal_name text check (length(legal_name) <= 200),
  license_number text check (length(license_number) <= 100),
  industry text not null default 'hvac'
    check (industry in ('hvac', 'plumbing', 'electrical', 'roofing', 'appliance_repair',
                        'garage_door', 'pest_control', 'landscaping', 'cleaning', 'general_contractor', 'other')),
  website_url text check (website_url ~ '^https?://' and length(website_url) <= 2048),
  timezone text not null default 'America/New_York' check (app.is_valid_timezone(timezone)),
  owner_cell app.e164,
  service_areas text[] not null default '{}',
  zip_codes text[] not null default '{}' check (array_to_string(zip_codes, ',') ~ '^([0-9A-Za-z -]{3,10}(,|$))*$'),
  travel_radius_miles numeric check (travel_radius_miles >= 0 and travel_radius_miles <= 1000),
  service_phone app.e164 unique,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
comment on table app.locations is E'A business location: the tenant. Every other tenant row carries its id.';
comment on column app.locations.slug is E'URL handle; usable instead of the id in API paths. Never shaped like a UUID.';
comment on column app.locations.industry is E'Trade of the business (the spec leaves the list open; see docs/decisions.md).';
comment on column app.locations.timezone is E'IANA zone; business hours, insights and dates are in this zone.';
comment on column app.locations.owner_cell is E'Owner''s mobile (E.164): default SMS recipient of emergencies.';
comment on column app.locations.service_areas is E'Towns or areas served, read to callers.';
comment on column app.locations.zip_codes is E'Postal codes served.';
comment on column app.locations.travel_radius_miles is E'How far technicians travel.';
comment on column app.locations.service_phone is E'The number the voice agent answers for this location; routes pre-call webhooks here.';
create trigger _100_set_updated_at before update on app.locations
  for each row execute function app.tg__set_updated_at();
select app.secure_tenant_table('app.locations', 'select, update', 'id');

create table app.members (
  id uuid primary key default gen_random_uuid(),
  location_id uuid not null references app.locations on delete cascade,
  email text not null check (email ~ '^[^@\s]+@[^@\s]+\.[^@\s]+$' and length(email) <= 320),
  name text check (length(name) <= 200),
  role text not null default 'member' check (role in ('owner', 'admin', 'member')),
  invited_at timestamptz not null default now(),
  joined_at timestamptz,
  created_at timestamptz not null default now()
);
create unique index members_location_email_key on app.members (location_id, lower(email));
create index members_location_created_idx on app.members (location_id, created_at desc, id desc);
comment on table app.members is E'People of a location (dashboard users). Owners and admins get e-mail notifications by default.';
comment on column app.members.role is E'owner | admin | member.';
comment on column app.members.joined_at is E'Null until the invitation is accepted.';
select app.secure_tenant_table('app.members', 'select');

create table app.api_keys (
  id uuid primary key default gen_random_uuid(),
  location_id uuid not null references app.locations on delete cascade,
  label text not null check (length(label) between 1 and 200),
  key_prefix text not null check (length(key_prefix) = 8),
  token_hash text not null unique check (token_hash ~ '^[0-9a-f]{64}$'),
  scopes text[] not null default '{}' check (scopes <@ app.known_scopes()),
  created_at timestamptz not null default now(),
  last_used_at timestamptz,
  revoked_at timestamptz
);
create index api_keys_location_created_idx on app.api_keys (location_id, created_at desc, id desc);
comment on table app.api_keys is E'Location-scoped API tokens. Only the SHA-256 of a token is kept; the token itself is shown once.';
comment on column app.api_keys.key_prefix is E'First 8 characters of the token, to recognise it.';
comment on column app.api_keys.token_hash is E'Lowercase hex SHA-256 of the token. Never returned by any API.';
comment on column app.api_keys.scopes is E'What the token may do (see app.known_scopes()).';
comment on column app.api_keys.last_used_at is E'Refreshed at most once a minute.';
comment on column app.api_keys.revoked_at is E'Set when revoked; the token is refused from then on.';
select app.secure_tenant_table('app.api_keys', 'select');

create table app.customers (
  id uuid primary key default gen_random_uuid(),
  location_id uuid not null references app.locations on delete cascade,
  phone app.e164 not null,
  name text,
  email text,
  address text,
  first_call_at timestamptz,
  last_call_at timestamptz,
  call_count int not null default 0 check (call_count >= 0),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (location_id, phone)
);
comment on table app.customers is E'A caller of a location, one per phone number; upserted by each finished call.';
comment on column app.customers.call_count is E'Calls finalised from this number.';
create trigger _100_set_updated_at before update on app.customers
  for each row execute function app.tg__set_updated_at();
select app.secure_tenant_table('app.customers');

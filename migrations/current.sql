-- =============================================================================================
-- Performance (issue 12): list reads at the ceiling.
--
-- A page used to be built as jsonb, one {c: cursor, j: row} object per row (a base64 cursor
-- encoded for all 51 rows), gathered into an array, unnested again and re-aggregated, and finally
-- printed as text: about 3 ms of server time for 50 calls against 0.3 ms for reading the rows.
-- Now each row is built once as json (text, in column order, nothing sorted or re-parsed), the
-- cursor is encoded only for the last row of the page, and the page comes back as two values,
-- `data` (the JSON array the API sends as is) and `next_cursor`. The jsonb helpers that events
-- and single-row reads use are derived from the json ones, so both show the same fields.
-- =============================================================================================

-- ---------------------------------------------------------------------------------------------
-- Row builders. Each resource's API shape is a composite type (field names, order and types, with
-- timestamps already in the API's text form); X_js(row) is that record as json, which to_json
-- writes straight from the type, and X_json (jsonb, for events and single reads) is X_js::jsonb,
-- so both always show the same fields. (json_build_object looks up the JSON category of every key
-- and value on every call; a composite's fields cost half as much, measured on a calls page.)

drop type if exists app.call_summary_shape cascade;
create type app.call_summary_shape as (
  id uuid, location_id uuid, customer_id uuid, direction text, caller_phone text, caller_name text,
  caller_address text, outcome text, urgency_level int, is_emergency boolean,
  is_returning_customer boolean, started_at text, ended_at text, duration_sec int,
  service_type text, issue_summary text, detected_intent text, estimated_value numeric,
  appointment_date date, appointment_time text, disconnection_reason text, created_at text);
comment on type app.call_summary_shape is E'The fields of the API''s call summary record, in order.';

create or replace function app.call_summary_js(c app.calls) returns json
  language sql stable parallel safe
as $$
  select to_json(row(
    c.id, c.location_id, c.customer_id, c.direction, app.mask_phone(c.caller_phone), c.caller_name,
    c.caller_address, c.outcome, c.urgency_level, c.is_emergency, c.is_returning_customer,
    app.iso(c.started_at), app.iso(c.ended_at), c.duration_sec, c.service_type, c.issue_summary,
    c.detected_intent, c.estimated_value, c.appointment_date, c.appointment_time,
    c.disconnection_reason, app.iso(c.created_at))::app.call_summary_shape)
$$;
comment on function app.call_summary_js(app.calls) is E'Call summary (spec) as json text: no transcript, recording or cost data; phone masked. Lists send it as is.';

create or replace function app.call_summary_json(c app.calls) returns jsonb
  language sql stable parallel safe
as $$ select app.call_summary_js(c)::jsonb $$;
comment on function app.call_summary_json(app.calls) is E'Call summary (spec): no transcript, recording or cost data; phone masked.';

drop type if exists app.lead_shape cascade;
create type app.lead_shape as (
  id uuid, location_id uuid, call_id uuid, customer_id uuid, name text, phone text, email text,
  address text, service_type text, urgency_level int, estimated_value numeric, status text,
  status_changed_at text, assigned_to uuid, notes text, created_at text, updated_at text);
comment on type app.lead_shape is E'The fields of the API''s lead record, in order.';

create or replace function app.lead_js(l app.leads) returns json
  language sql stable parallel safe
as $$
  select to_json(row(
    l.id, l.location_id, l.call_id, l.customer_id, l.name, l.phone, l.email, l.address,
    l.service_type, l.urgency_level, l.estimated_value, l.status, app.iso(l.status_changed_at),
    l.assigned_to, l.notes, app.iso(l.created_at), app.iso(l.updated_at))::app.lead_shape)
$$;
comment on function app.lead_js(app.leads) is E'Lead as the API shows it (phone not masked), as json text.';

create or replace function app.lead_json(l app.leads) returns jsonb
  language sql stable parallel safe
as $$ select app.lead_js(l)::jsonb $$;
comment on function app.lead_json(app.leads) is E'Lead as the API and lead.* events show it (phone not masked).';

drop type if exists app.booking_shape cascade;
create type app.booking_shape as (
  id uuid, location_id uuid, call_id uuid, lead_id uuid, customer_id uuid, status text,
  scheduled_date date, scheduled_time text, service_type text, address text, notes text,
  created_at text, updated_at text);
comment on type app.booking_shape is E'The fields of the API''s booking record, in order.';

create or replace function app.booking_js(b app.bookings) returns json
  language sql stable parallel safe
as $$
  select to_json(row(
    b.id, b.location_id, b.call_id, b.lead_id, b.customer_id, b.status, b.scheduled_date,
    b.scheduled_time, b.service_type, b.address, b.notes, app.iso(b.created_at),
    app.iso(b.updated_at))::app.booking_shape)
$$;
comment on function app.booking_js(app.bookings) is E'Booking as the API shows it, as json text.';

create or replace function app.booking_json(b app.bookings) returns jsonb
  language sql stable parallel safe
as $$ select app.booking_js(b)::jsonb $$;
comment on function app.booking_json(app.bookings) is E'Booking as the API and booking.* events show it.';

drop type if exists app.faq_shape cascade;
create type app.faq_shape as (
  id uuid, location_id uuid, question text, answer text, asked_count int, position int,
  created_at text, updated_at text);
comment on type app.faq_shape is E'The fields of the API''s faq record, in order.';

create or replace function app.faq_js(f app.faqs) returns json
  language sql stable parallel safe
as $$
  select to_json(row(
    f.id, f.location_id, f.question, f.answer, f.asked_count, f.position, app.iso(f.created_at),
    app.iso(f.updated_at))::app.faq_shape)
$$;
comment on function app.faq_js(app.faqs) is E'FAQ as the API shows it, as json text.';

create or replace function app.faq_json(f app.faqs) returns jsonb
  language sql stable parallel safe
as $$ select app.faq_js(f)::jsonb $$;
comment on function app.faq_json(app.faqs) is E'FAQ as the API shows it.';

drop type if exists app.pricebook_item_shape cascade;
create type app.pricebook_item_shape as (
  id uuid, location_id uuid, service_name text, price text, note text, position int,
  created_at text, updated_at text);
comment on type app.pricebook_item_shape is E'The fields of the API''s pricebook item record, in order.';

create or replace function app.pricebook_item_js(p app.pricebook_items) returns json
  language sql stable parallel safe
as $$
  select to_json(row(
    p.id, p.location_id, p.service_name, p.price, p.note, p.position, app.iso(p.created_at),
    app.iso(p.updated_at))::app.pricebook_item_shape)
$$;
comment on function app.pricebook_item_js(app.pricebook_items) is E'Pricebook item as the API shows it (price is free text), as json text.';

create or replace function app.pricebook_item_json(p app.pricebook_items) returns jsonb
  language sql stable parallel safe
as $$ select app.pricebook_item_js(p)::jsonb $$;
comment on function app.pricebook_item_json(app.pricebook_items) is E'Pricebook item as the API shows it (price is free text).';

drop type if exists app.integration_shape cascade;
create type app.integration_shape as (
  id uuid, location_id uuid, provider text, status text, label text, external_id text,
  expires_at text, config jsonb, connected_at text, disconnected_at text, last_synced_at text,
  last_error text, created_at text, updated_at text);
comment on type app.integration_shape is E'The fields of the API''s integration record, in order.';

create or replace function app.integration_js(i app.integrations) returns json
  language sql stable parallel safe
as $$
  select to_json(row(
    i.id, i.location_id, i.provider, i.status, i.label, i.external_id, app.iso(i.expires_at),
    i.config, app.iso(i.connected_at), app.iso(i.disconnected_at), app.iso(i.last_synced_at),
    i.last_error, app.iso(i.created_at), app.iso(i.updated_at))::app.integration_shape)
$$;
comment on function app.integration_js(app.integrations) is E'Integration as the API shows it, as json text: never access or refresh tokens, never webhook_url (a secret for Slack).';

create or replace function app.integration_json(i app.integrations) returns jsonb
  language sql stable parallel safe
as $$ select app.integration_js(i)::jsonb $$;
comment on function app.integration_json(app.integrations) is E'Integration as the API shows it: never access or refresh tokens, never webhook_url (a secret for Slack).';

drop type if exists app.member_shape cascade;
create type app.member_shape as (
  id uuid, location_id uuid, email text, name text, role text, invited_at text, joined_at text);
comment on type app.member_shape is E'The fields of the API''s member record, in order.';

create or replace function app.member_js(m app.members) returns json
  language sql stable parallel safe
as $$
  select to_json(row(
    m.id, m.location_id, m.email, m.name, m.role, app.iso(m.invited_at), app.iso(m.joined_at))::app.member_shape)
$$;
comment on function app.member_js(app.members) is E'Member as the API shows it, as json text.';

create or replace function app.member_json(m app.members) returns jsonb
  language sql stable parallel safe
as $$ select app.member_js(m)::jsonb $$;
comment on function app.member_json(app.members) is E'Member as the API shows it.';

drop type if exists app.location_shape cascade;
create type app.location_shape as (
  id uuid, slug text, name text, legal_name text, license_number text, industry text,
  website_url text, timezone text, owner_cell text, service_areas text[], zip_codes text[],
  travel_radius_miles numeric, service_phone text, created_at text, updated_at text);
comment on type app.location_shape is E'The fields of the API''s location record, in order.';

create or replace function app.location_js(l app.locations) returns json
  language sql stable parallel safe
as $$
  select to_json(row(
    l.id, l.slug, l.name, l.legal_name, l.license_number, l.industry, l.website_url, l.timezone,
    l.owner_cell, l.service_areas, l.zip_codes, l.travel_radius_miles, l.service_phone,
    app.iso(l.created_at), app.iso(l.updated_at))::app.location_shape)
$$;
comment on function app.location_js(app.locations) is E'Location as the API shows it, as json text.';

create or replace function app.location_json(l app.locations) returns jsonb
  language sql stable parallel safe
as $$ select app.location_js(l)::jsonb $$;
comment on function app.location_json(app.locations) is E'Location as the API shows it.';

drop type if exists app.api_key_shape cascade;
create type app.api_key_shape as (
  id uuid, location_id uuid, label text, key_prefix text, scopes text[], created_at text,
  last_used_at text, revoked_at text);
comment on type app.api_key_shape is E'The fields of the API''s api key record, in order.';

create or replace function app.api_key_js(k app.api_keys) returns json
  language sql stable parallel safe
as $$
  select to_json(row(
    k.id, k.location_id, k.label, k.key_prefix, k.scopes, app.iso(k.created_at),
    app.iso(k.last_used_at), app.iso(k.revoked_at))::app.api_key_shape)
$$;
comment on function app.api_key_js(app.api_keys) is E'API key listing record as json text: never the token or its hash.';

create or replace function app.api_key_json(k app.api_keys) returns jsonb
  language sql stable parallel safe
as $$ select app.api_key_js(k)::jsonb $$;
comment on function app.api_key_json(app.api_keys) is E'API key listing record: never the token or its hash.';

-- ---------------------------------------------------------------------------------------------
-- app.authorize, same checks in the same order (401, 404, 403): the location query runs only
-- when a location is named (GET /me names none), and the tenant is set by an assignment, which
-- PL/pgSQL evaluates as a simple expression (PERFORM always starts an executor).
/*
 * The single entry of every token request. SECURITY DEFINER (owned by switchboard_system)
 * because the token's key must be found before any tenant is known; it then pins the tenant
 * for the rest of the transaction, so the calling function runs under RLS as that location.
 * Order of checks: token (401), location (404, the same for missing and foreign), scope (403).
 */
create or replace function app.authorize(token_hash text, location_ref text, scope text) returns app.auth
  language plpgsql volatile security definer
  set search_path to pg_catalog, public, pg_temp
as $$
declare
  k app.api_keys;
  ignored text;
begin
  select * into k from app.api_keys
   where api_keys.token_hash = authorize.token_hash and revoked_at is null;
  if not found then
    perform app.raise('SB401', 'Missing, malformed, unknown or revoked bearer token');
  end if;
  if location_ref is not null then
    if not exists (
      select 1 from app.locations l
       where l.id = k.location_id and (l.id::text = lower(location_ref) or l.slug = location_ref)) then
      perform app.raise('SB404', 'Location not found');
    end if;
  end if;
  if scope is not null and not scope = any (k.scopes) then
    perform app.raise('SB403', format('This token lacks the required scope %s', scope),
                      jsonb_build_object('required_scope', scope));
  end if;
  if k.last_used_at is null or k.last_used_at < now() - interval '60 seconds' then
    update app.api_keys set last_used_at = now() where id = k.id;
  end if;
  ignored := set_config('app.location_id', k.location_id::text, true);
  return row(k.id, k.location_id, k.scopes)::app.auth;
end
$$;
alter function app.authorize(text, text, text) owner to switchboard_system;
comment on function app.authorize(text, text, text) is
  E'Authenticates a token hash, checks location and scope, and sets app.location_id for the transaction.';

-- ---------------------------------------------------------------------------------------------
-- GET /me answers json (nothing to re-print).
drop function if exists api.me(text);
create function api.me(token_hash text) returns json
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, null, null);
begin
  return (select json_build_object(
            'api_key', app.api_key_js(k),
            'location', app.location_js(l),
            'scopes', to_json(a.scopes))
            from app.api_keys k join app.locations l on l.id = k.location_id
           where k.id = a.key_id);
end
$$;
comment on function api.me(text) is E'GET /me: the calling key, its location and scopes. No scope needed.';
grant execute on function api.me(text) to switchboard_api;

-- ---------------------------------------------------------------------------------------------
-- Lists. Each returns (data json, next_cursor text): data is the page (at most `limit` rows,
-- newest first), next_cursor the cursor of its last row when more follow. Rows are read in index
-- order with one row more than the page; row_number() marks the page's last row, the only one
-- whose cursor is encoded.

drop function if exists api.calls_list(text, text, jsonb, jsonb);
create function api.calls_list(token_hash text, location_ref text, filters jsonb, page jsonb,
                               out data json, out next_cursor text)
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'calls:read');
  lim int := app.page_limit(page);
  after app.page_cursor := app.page_after(page);
  f_outcome text := filters ->> 'outcome';
  f_from timestamptz := (filters ->> 'from')::timestamptz;
  f_to timestamptz := (filters ->> 'to')::timestamptz;
  f_emergency boolean := (filters ->> 'is_emergency')::boolean;
begin
  select coalesce(json_agg(p.j order by p.n) filter (where p.n <= lim), '[]'),
         case when max(p.n) > lim then min(app.cursor_encode(p.created_at, p.id)) filter (where p.n = lim) end
    into data, next_cursor
    from (select app.call_summary_js(c) as j, c.created_at, c.id,
                 row_number() over (order by c.created_at desc, c.id desc) as n
            from app.calls c
           where c.location_id = a.location_id
             and app.before_cursor(c.created_at, c.id, after)
             and (f_outcome is null or c.outcome = f_outcome)
             and (f_from is null or c.started_at >= f_from)
             and (f_to is null or c.started_at < f_to)
             and (f_emergency is null or c.is_emergency = f_emergency)
           order by c.created_at desc, c.id desc limit lim + 1) p;
end
$$;
comment on function api.calls_list(text, text, jsonb, jsonb) is
  E'GET calls: summaries, newest first; filters { outcome, from, to (started_at, to exclusive), is_emergency }. Returns the page (data) and the next cursor.';
grant execute on function api.calls_list(text, text, jsonb, jsonb) to switchboard_api;

drop function if exists api.leads_list(text, text, text, jsonb);
create function api.leads_list(token_hash text, location_ref text, status text, page jsonb,
                               out data json, out next_cursor text)
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'leads:read');
  lim int := app.page_limit(page);
  after app.page_cursor := app.page_after(page);
begin
  select coalesce(json_agg(p.j order by p.n) filter (where p.n <= lim), '[]'),
         case when max(p.n) > lim then min(app.cursor_encode(p.created_at, p.id)) filter (where p.n = lim) end
    into data, next_cursor
    from (select app.lead_js(l) as j, l.created_at, l.id,
                 row_number() over (order by l.created_at desc, l.id desc) as n
            from app.leads l
           where l.location_id = a.location_id
             and (leads_list.status is null or l.status = leads_list.status)
             and app.before_cursor(l.created_at, l.id, after)
           order by l.created_at desc, l.id desc limit lim + 1) p;
end
$$;
comment on function api.leads_list(text, text, text, jsonb) is E'GET leads[?status=]: newest first. Returns the page (data) and the next cursor.';
grant execute on function api.leads_list(text, text, text, jsonb) to switchboard_api;

drop function if exists api.bookings_list(text, text, text, jsonb);
create function api.bookings_list(token_hash text, location_ref text, status text, page jsonb,
                                  out data json, out next_cursor text)
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'bookings:read');
  lim int := app.page_limit(page);
  after app.page_cursor := app.page_after(page);
begin
  select coalesce(json_agg(p.j order by p.n) filter (where p.n <= lim), '[]'),
         case when max(p.n) > lim then min(app.cursor_encode(p.created_at, p.id)) filter (where p.n = lim) end
    into data, next_cursor
    from (select app.booking_js(b) as j, b.created_at, b.id,
                 row_number() over (order by b.created_at desc, b.id desc) as n
            from app.bookings b
           where b.location_id = a.location_id
             and (bookings_list.status is null or b.status = bookings_list.status)
             and app.before_cursor(b.created_at, b.id, after)
           order by b.created_at desc, b.id desc limit lim + 1) p;
end
$$;
comment on function api.bookings_list(text, text, text, jsonb) is E'GET bookings[?status=]: newest first. Returns the page (data) and the next cursor.';
grant execute on function api.bookings_list(text, text, text, jsonb) to switchboard_api;

drop function if exists api.faqs_list(text, text, jsonb);
create function api.faqs_list(token_hash text, location_ref text, page jsonb,
                              out data json, out next_cursor text)
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'faqs:read');
  lim int := app.page_limit(page);
  after app.page_cursor := app.page_after(page);
begin
  select coalesce(json_agg(p.j order by p.n) filter (where p.n <= lim), '[]'),
         case when max(p.n) > lim then min(app.cursor_encode(p.created_at, p.id)) filter (where p.n = lim) end
    into data, next_cursor
    from (select app.faq_js(f) as j, f.created_at, f.id,
                 row_number() over (order by f.created_at desc, f.id desc) as n
            from app.faqs f
           where f.location_id = a.location_id and app.before_cursor(f.created_at, f.id, after)
           order by f.created_at desc, f.id desc limit lim + 1) p;
end
$$;
comment on function api.faqs_list(text, text, jsonb) is E'GET faqs: newest first. Returns the page (data) and the next cursor.';
grant execute on function api.faqs_list(text, text, jsonb) to switchboard_api;

drop function if exists api.pricebook_list(text, text, jsonb);
create function api.pricebook_list(token_hash text, location_ref text, page jsonb,
                                   out data json, out next_cursor text)
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'pricebook:read');
  lim int := app.page_limit(page);
  after app.page_cursor := app.page_after(page);
begin
  select coalesce(json_agg(x.j order by x.n) filter (where x.n <= lim), '[]'),
         case when max(x.n) > lim then min(app.cursor_encode(x.created_at, x.id)) filter (where x.n = lim) end
    into data, next_cursor
    from (select app.pricebook_item_js(p) as j, p.created_at, p.id,
                 row_number() over (order by p.created_at desc, p.id desc) as n
            from app.pricebook_items p
           where p.location_id = a.location_id and app.before_cursor(p.created_at, p.id, after)
           order by p.created_at desc, p.id desc limit lim + 1) x;
end
$$;
comment on function api.pricebook_list(text, text, jsonb) is E'GET pricebook: newest first. Returns the page (data) and the next cursor.';
grant execute on function api.pricebook_list(text, text, jsonb) to switchboard_api;

drop function if exists api.integrations_list(text, text, jsonb);
create function api.integrations_list(token_hash text, location_ref text, page jsonb,
                                      out data json, out next_cursor text)
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'integrations:read');
  lim int := app.page_limit(page);
  after app.page_cursor := app.page_after(page);
begin
  select coalesce(json_agg(p.j order by p.n) filter (where p.n <= lim), '[]'),
         case when max(p.n) > lim then min(app.cursor_encode(p.created_at, p.id)) filter (where p.n = lim) end
    into data, next_cursor
    from (select app.integration_js(i) as j, i.created_at, i.id,
                 row_number() over (order by i.created_at desc, i.id desc) as n
            from app.integrations i
           where i.location_id = a.location_id and app.before_cursor(i.created_at, i.id, after)
           order by i.created_at desc, i.id desc limit lim + 1) p;
end
$$;
comment on function api.integrations_list(text, text, jsonb) is
  E'GET integrations: connected and disconnected, newest first. Returns the page (data) and the next cursor.';
grant execute on function api.integrations_list(text, text, jsonb) to switchboard_api;

drop function if exists api.members_list(text, text, jsonb);
create function api.members_list(token_hash text, location_ref text, page jsonb,
                                 out data json, out next_cursor text)
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'members:read');
  lim int := app.page_limit(page);
  after app.page_cursor := app.page_after(page);
begin
  select coalesce(json_agg(p.j order by p.n) filter (where p.n <= lim), '[]'),
         case when max(p.n) > lim then min(app.cursor_encode(p.created_at, p.id)) filter (where p.n = lim) end
    into data, next_cursor
    from (select app.member_js(m) as j, m.created_at, m.id,
                 row_number() over (order by m.created_at desc, m.id desc) as n
            from app.members m
           where m.location_id = a.location_id and app.before_cursor(m.created_at, m.id, after)
           order by m.created_at desc, m.id desc limit lim + 1) p;
end
$$;
comment on function api.members_list(text, text, jsonb) is E'GET members: newest first. Returns the page (data) and the next cursor.';
grant execute on function api.members_list(text, text, jsonb) to switchboard_api;

drop function if exists api.locations_list(text, jsonb);
create function api.locations_list(token_hash text, page jsonb, out data json, out next_cursor text)
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, null, 'locations:read');
  lim int := app.page_limit(page);
  after app.page_cursor := app.page_after(page);
begin
  select coalesce(json_agg(p.j order by p.n) filter (where p.n <= lim), '[]'),
         case when max(p.n) > lim then min(app.cursor_encode(p.created_at, p.id)) filter (where p.n = lim) end
    into data, next_cursor
    from (select app.location_js(l) as j, l.created_at, l.id,
                 row_number() over (order by l.created_at desc, l.id desc) as n
            from app.locations l
           where app.before_cursor(l.created_at, l.id, after)
           order by l.created_at desc, l.id desc limit lim + 1) p;
end
$$;
comment on function api.locations_list(text, jsonb) is
  E'GET /locations: the locations the token can reach (its own; RLS shows no other). Returns the page (data) and the next cursor.';
grant execute on function api.locations_list(text, jsonb) to switchboard_api;

drop function if exists api.api_keys_list(text, text, jsonb);
create function api.api_keys_list(token_hash text, location_ref text, page jsonb, out data json, out next_cursor text)
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'api_keys:read');
  lim int := app.page_limit(page);
  after app.page_cursor := app.page_after(page);
begin
  select coalesce(json_agg(p.j order by p.n) filter (where p.n <= lim), '[]'),
         case when max(p.n) > lim then min(app.cursor_encode(p.created_at, p.id)) filter (where p.n = lim) end
    into data, next_cursor
    from (select app.api_key_js(k) as j, k.created_at, k.id,
                 row_number() over (order by k.created_at desc, k.id desc) as n
            from app.api_keys k
           where app.before_cursor(k.created_at, k.id, after)
           order by k.created_at desc, k.id desc limit lim + 1) p;
end
$$;
comment on function api.api_keys_list(text, text, jsonb) is
  E'GET /locations/{id}/api-keys: listing records only. Returns the page (data) and the next cursor.';
grant execute on function api.api_keys_list(text, text, jsonb) to switchboard_api;

-- =============================================================================================
-- Performance (issue 12): ingestion. Fewer writes per finalised call, same results.
--  * A call the service has not seen yet is inserted with its platform facts in one INSERT
--    (was: an empty row, then an UPDATE with the facts): one row version and one set of index
--    entries fewer. A concurrent delivery of the same call still meets ON CONFLICT and carries on
--    as an update of the row the other one inserted.
--  * The finalize_call job is removed only when one can exist, i.e. when the call was at
--    platform_status 'ended' before this webhook (the job is queued by call_ended without
--    analysis and nothing else): graphile_worker.remove_job is a SQL function planned afresh on
--    every call, a fixed cost per finalisation for a job that almost never exists.
--  * call.emergency's emergency_fired_at is set by the finalising UPDATE itself (was a second
--    UPDATE of the row).
-- =============================================================================================

create or replace function app.voice_finalize(c app.calls, analysis jsonb) returns app.calls
  language plpgsql volatile
as $$
declare
  cad jsonb := coalesce(analysis -> 'custom_analysis_data', '{}');
  v_outcome text := cad ->> 'outcome';
  urgency int := least(greatest(coalesce((cad ->> 'urgency_level')::int, 0), 0), 5);
  voicemail boolean := coalesce(c.in_voicemail, false) or c.disconnection_reason = 'voicemail_reached';
  captured boolean := cad ?| array['caller_name', 'caller_address', 'caller_email', 'service_type',
                                   'issue_summary', 'appointment_date'];
  alert boolean;
  emergency boolean;
  fire boolean;
  v_customer_id uuid;
  inserted boolean;
  known_name text;
  l app.leads;
begin
  if v_outcome is null or v_outcome not in ('booked', 'transferred', 'lead', 'spam', 'dropped', 'other') then
    v_outcome := case
      when c.disconnection_reason in ('call_transfer', 'transfer_bridged') then 'transferred'
      when c.disconnection_reason in ('marked_as_spam', 'scam_detected') then 'spam'
      when voicemail then 'lead'
      when c.disconnection_reason = 'user_hangup' and c.duration_sec < 10 and not captured then 'dropped'
      else 'other' end;
  end if;
  -- alert: the call.emergency event; emergency: the stored flag (the alert, or the analysis flag).
  alert := urgency = 5 or v_outcome = 'transferred';
  emergency := alert or coalesce((cad ->> 'is_emergency')::boolean, false);
  -- call.emergency fires once per call (a warm transfer may have fired it already).
  fire := alert and c.emergency_fired_at is null;

  if c.caller_phone is not null and v_outcome <> 'spam' then
    insert into app.customers as t (location_id, phone, name, email, address, first_call_at, last_call_at, call_count)
    values (c.location_id, c.caller_phone, left(cad ->> 'caller_name', 200), cad ->> 'caller_email',
            left(cad ->> 'caller_address', 500), coalesce(c.started_at, now()), coalesce(c.started_at, now()), 1)
    on conflict (location_id, phone) do update
       set name = coalesce(excluded.name, t.name),
           email = coalesce(excluded.email, t.email),
           address = coalesce(excluded.address, t.address),
           first_call_at = least(t.first_call_at, excluded.first_call_at),
           last_call_at = greatest(t.last_call_at, excluded.last_call_at),
           call_count = t.call_count + 1
    returning t.id, (t.xmax = 0), t.name into v_customer_id, inserted, known_name;
  end if;

  update app.calls set
    outcome = v_outcome,
    urgency_level = urgency,
    is_emergency = emergency or calls.emergency_fired_at is not null,
    emergency_fired_at = case when fire then now() else calls.emergency_fired_at end,
    customer_id = v_customer_id,
    is_returning_customer = coalesce(not inserted, false),
    caller_name = coalesce(left(cad ->> 'caller_name', 200), known_name),
    caller_address = left(cad ->> 'caller_address', 500),
    caller_email = cad ->> 'caller_email',
    service_type = left(cad ->> 'service_type', 200),
    issue_summary = left(cad ->> 'issue_summary', 10000),
    detected_intent = left(cad ->> 'detected_intent', 200),
    estimated_value = (cad ->> 'estimated_value')::numeric,
    appointment_date = (cad ->> 'appointment_date')::date,
    appointment_time = case when cad ->> 'appointment_time' ~ '^([01][0-9]|2[0-3]):[0-5][0-9]$' then cad ->> 'appointment_time' end,
    finalized_at = now()
  where id = c.id
  returning * into c;

  if v_outcome in ('lead', 'booked', 'transferred') or (voicemail and v_outcome <> 'spam') then
    insert into app.leads (location_id, call_id, customer_id, name, phone, email, address, service_type,
                           urgency_level, estimated_value, status, notes)
    values (c.location_id, c.id, c.customer_id, c.caller_name, c.caller_phone,
            case when c.caller_email ~ '^[^@\s]+@[^@\s]+\.[^@\s]+$' and length(c.caller_email) <= 320 then c.caller_email end,
            c.caller_address, c.service_type, c.urgency_level, c.estimated_value,
            case when v_outcome = 'booked' then 'booked' else 'new' end, c.issue_summary)
    returning * into l;
  end if;

  if v_outcome = 'booked' and c.appointment_date is not null then
    insert into app.bookings (location_id, call_id, lead_id, customer_id, status, scheduled_date,
                              scheduled_time, service_type, address, notes)
    values (c.location_id, c.id, l.id, c.customer_id, 'scheduled', c.appointment_date,
            c.appointment_time, c.service_type, c.caller_address, c.issue_summary);
  end if;

  if fire then
    perform app.emit(c.location_id, 'call.emergency', app.call_summary_json(c) || jsonb_build_object(
      'reason', case when v_outcome = 'transferred' and urgency < 5 then 'warm_transfer' else 'urgency' end,
      'lead_id', l.id));
  end if;

  perform app.emit(c.location_id, 'call.ended', app.call_summary_json(c));
  return c;
end
$$;
comment on function app.voice_finalize(app.calls, jsonb) is
  E'Settles a call once (outcome from custom_analysis_data, else from disconnection_reason), upserts the customer, creates lead/booking, fires call.emergency (once, only for urgency 5 or a transfer; the analysis is_emergency flag only marks the row) and call.ended. Caller holds the row lock (and removes a queued finalize_call job, see app.voice_post_call).';

create or replace function app.voice_post_call(payload jsonb) returns jsonb
  language plpgsql volatile security definer
  set search_path to pg_catalog, public, pg_temp
as $$
declare
  ev text := payload ->> 'event';
  pc jsonb := payload -> 'call';
  meta jsonb := case when jsonb_typeof(pc -> 'metadata') = 'object' then pc -> 'metadata' end;
  analysis jsonb := case when jsonb_typeof(pc -> 'call_analysis') = 'object' and pc -> 'call_analysis' <> '{}' then pc -> 'call_analysis' end;
  dir text := coalesce(pc ->> 'direction', 'inbound');
  caller app.e164 := app.voice_e164(case when dir = 'outbound' then pc ->> 'to_number' else pc ->> 'from_number' end);
  ours text := case when dir = 'outbound' then pc ->> 'from_number' else pc ->> 'to_number' end;
  uuid_re constant text := '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$';
  phone_loc uuid;
  loc uuid;
  row_id uuid;
  c app.calls;
  nc app.calls;
  prev_status text;
  new_status text := case ev when 'call_ended' then 'ended' when 'call_analyzed' then 'analyzed' else 'started' end;
begin
  if ev not in ('call_started', 'call_ended', 'call_analyzed', 'transfer_started') then
    return jsonb_build_object('status', 'ignored');
  end if;

  if ours is not null then
    select id into phone_loc from app.locations where service_phone = ours;
  end if;
  if meta ->> 'call_row_id' ~ uuid_re then
    select id, location_id into row_id, loc from app.calls where id = (meta ->> 'call_row_id')::uuid;
    if phone_loc is not null and loc is distinct from phone_loc then
      row_id := null;
    end if;
  end if;
  loc := coalesce(phone_loc, loc);
  if loc is null and meta ->> 'location_id' ~ uuid_re then
    select id into loc from app.locations where id = (meta ->> 'location_id')::uuid;
  end if;
  if loc is null then
    perform app.raise('SB404', 'No location matches this call', jsonb_build_object('call_id', pc ->> 'call_id'));
  end if;
  perform set_config('app.location_id', loc::text, true);

  loop
    if row_id is not null then
      select * into c from app.calls where id = row_id for update;
    else
      select * into c from app.calls where location_id = loc and platform_call_id = pc ->> 'call_id' for update;
    end if;
    prev_status := c.platform_status;

    -- Platform facts: newer values win, absent ones keep what we have. Nothing is written when a
    -- replay brings nothing new, so replays change nothing (not even updated_at). For a call not
    -- seen before, c is all nulls and nc is the new row.
    nc := c;
    if nc.platform_call_id like 'rejected:%' then nc.platform_call_id := pc ->> 'call_id'; end if;
    nc.direction := dir;
    nc.caller_phone := coalesce(caller, c.caller_phone);
    nc.to_phone := coalesce(pc ->> 'to_number', c.to_phone);
    nc.agent_id := coalesce(pc ->> 'agent_id', c.agent_id);
    nc.started_at := coalesce(app.voice_ms(pc -> 'start_timestamp'), c.started_at);
    nc.ended_at := coalesce(app.voice_ms(pc -> 'end_timestamp'), c.ended_at);
    nc.duration_sec := coalesce(
      case when nc.started_at is not null and nc.ended_at is not null
           then greatest(round(extract(epoch from nc.ended_at - nc.started_at)), 0)::int end,
      case when jsonb_typeof(pc -> 'duration_ms') = 'number' then round((pc ->> 'duration_ms')::numeric / 1000)::int end,
      c.duration_sec);
    nc.disconnection_reason := coalesce(pc ->> 'disconnection_reason', c.disconnection_reason);
    nc.transcript := coalesce(pc ->> 'transcript', c.transcript);
    nc.transcript_turns := coalesce(case when jsonb_typeof(pc -> 'transcript_object') = 'array' then pc -> 'transcript_object' end, c.transcript_turns);
    nc.recording_url := coalesce(pc ->> 'recording_url', c.recording_url);
    nc.public_log_url := coalesce(pc ->> 'public_log_url', c.public_log_url);
    nc.metadata := coalesce(meta, c.metadata);
    nc.call_summary := coalesce(analysis ->> 'call_summary', c.call_summary);
    nc.user_sentiment := coalesce(analysis ->> 'user_sentiment', c.user_sentiment);
    nc.in_voicemail := coalesce((analysis ->> 'in_voicemail')::boolean, c.in_voicemail);
    if app.voice_status_rank(new_status) > app.voice_status_rank(c.platform_status) then
      nc.platform_status := new_status;
    end if;

    if c.id is not null then
      if nc is distinct from c then
        update app.calls t set
          platform_call_id = nc.platform_call_id, direction = nc.direction, caller_phone = nc.caller_phone,
          to_phone = nc.to_phone, agent_id = nc.agent_id, started_at = nc.started_at, ended_at = nc.ended_at,
          duration_sec = nc.duration_sec, disconnection_reason = nc.disconnection_reason,
          transcript = nc.transcript, transcript_turns = nc.transcript_turns, recording_url = nc.recording_url,
          public_log_url = nc.public_log_url, metadata = nc.metadata, call_summary = nc.call_summary,
          user_sentiment = nc.user_sentiment, in_voicemail = nc.in_voicemail, platform_status = nc.platform_status
        where t.id = c.id
        returning * into c;
      end if;
      exit;
    end if;

    insert into app.calls (location_id, platform_call_id, direction, caller_phone, to_phone, agent_id,
                           started_at, ended_at, duration_sec, disconnection_reason, transcript,
                           transcript_turns, recording_url, public_log_url, metadata, call_summary,
                           user_sentiment, in_voicemail, platform_status)
    values (loc, pc ->> 'call_id', nc.direction, nc.caller_phone, nc.to_phone, nc.agent_id,
            nc.started_at, nc.ended_at, nc.duration_sec, nc.disconnection_reason, nc.transcript,
            nc.transcript_turns, nc.recording_url, nc.public_log_url, coalesce(nc.metadata, '{}'), nc.call_summary,
            nc.user_sentiment, nc.in_voicemail, nc.platform_status)
    on conflict (location_id, platform_call_id) do nothing
    returning * into c;
    exit when c.id is not null;
    -- Another delivery of this call inserted it first: carry on as an update of that row.
    row_id := null;
  end loop;

  if c.finalized_at is null then
    if ev = 'transfer_started' and c.emergency_fired_at is null then
      update app.calls set is_emergency = true, emergency_fired_at = now() where id = c.id returning * into c;
      perform app.emit(loc, 'call.emergency', app.call_summary_json(c)
        || jsonb_build_object('reason', 'warm_transfer', 'lead_id', null));
    elsif ev = 'call_analyzed' or (ev = 'call_ended' and analysis is not null) then
      -- Settled now: a fallback finalize_call job exists only if call_ended without analysis came
      -- first (the call was at 'ended'); it has nothing left to do, so it is taken off the queue.
      if prev_status = 'ended' then
        perform app.dequeue('finalize_call:' || c.id);
      end if;
      c := app.voice_finalize(c, coalesce(analysis, '{}'));
    elsif ev = 'call_ended' and app.voice_status_rank(prev_status) < app.voice_status_rank('ended') then
      -- If call_analyzed never comes, settle the call from its disconnection reason later.
      perform app.enqueue('finalize_call', jsonb_build_object('call_id', c.id),
                          now() + interval '10 minutes', 'finalize_call:' || c.id, 5);
    end if;
  end if;

  return jsonb_build_object('call_id', c.id, 'platform_call_id', c.platform_call_id,
    'platform_status', c.platform_status, 'outcome', c.outcome, 'finalized', c.finalized_at is not null);
end
$$;
comment on function app.voice_post_call(jsonb) is
  E'Post-call webhook (call_started | call_ended | call_analyzed | transfer_started): routes by the dialled number first (then metadata call_row_id / location_id), inserts a new call with its facts or updates a known one idempotently on the platform call_id, fires call.emergency on a warm transfer, finalises on analysis (removing a queued finalize_call job) or schedules finalize_call 10 minutes after call_ended.';

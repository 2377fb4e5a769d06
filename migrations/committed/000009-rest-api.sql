--! Previous: sha1:f04b6b6381c6e90bdc2ddb63f3d1ac6d40be7b9a
--! Hash: sha1:8cad7861f966db422706d2cfda564a1992f868d3
--! Message: rest api

-- The REST API (docs/rest-api.md): one function per operation. Each authenticates the token
-- (app.authorize), checks the scope, pins the tenant and answers JSON built in SQL.

create function api.location_get(token_hash text, location_ref text)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'locations:read');
begin
  return (select app.location_json(l) from app.locations l where l.id = a.location_id);
end
$function$;
comment on function api.location_get(text,text) is E'GET /locations/{id}.';

create function api.location_patch(token_hash text, location_ref text, patch jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'locations:write');
  l app.locations;
begin
  update app.locations t
     set (slug, name, legal_name, license_number, industry, website_url, timezone, owner_cell,
          service_areas, zip_codes, travel_radius_miles)
       = (select p.slug, p.name, p.legal_name, p.license_number, p.industry, p.website_url,
                 p.timezone, p.owner_cell, p.service_areas, p.zip_codes, p.travel_radius_miles
            from jsonb_populate_record(t, patch) p)
   where t.id = a.location_id
  returning * into l;
  return app.location_json(l);
end
$function$;
comment on function api.location_patch(text,text,jsonb) is E'PATCH /locations/{id}: fields present in the body replace the stored ones (validated by the API first); service_phone is operator-only and never changed here.';

create function api.call_get(token_hash text, location_ref text, call_id uuid)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'calls:read');
begin
  return (select app.call_detail_json(c, a.scopes) from app.calls c where c.id = call_id);
end
$function$;
comment on function api.call_get(text,text,uuid) is E'GET calls/{id}: detail; transcript and recording depend on the token''s scopes.';

create function api.lead_create(token_hash text, location_ref text, body jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'leads:write');
  l app.leads;
begin
  perform app.check_member((body ->> 'assigned_to')::uuid);
  insert into app.leads (location_id, name, phone, email, address, service_type, urgency_level,
                         estimated_value, notes, assigned_to, status)
  select a.location_id, p.name, p.phone, p.email, p.address, p.service_type,
         coalesce(p.urgency_level, 0), p.estimated_value, p.notes, p.assigned_to, coalesce(p.status, 'new')
    from jsonb_populate_record(null::app.leads, body) p
  returning * into l;
  return app.lead_json(l);
end
$function$;
comment on function api.lead_create(text,text,jsonb) is E'POST leads: a lead without a call (call_id null); fires lead.created.';

create function api.lead_get(token_hash text, location_ref text, lead_id uuid)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'leads:read');
begin
  return (select app.lead_json(l) from app.leads l where l.id = lead_id);
end
$function$;
comment on function api.lead_get(text,text,uuid) is E'GET leads/{id}.';

create function api.lead_patch(token_hash text, location_ref text, lead_id uuid, patch jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'leads:write');
  l app.leads;
begin
  if patch ? 'assigned_to' then perform app.check_member((patch ->> 'assigned_to')::uuid); end if;
  update app.leads t
     set (name, phone, email, address, service_type, urgency_level, estimated_value, status, assigned_to, notes)
       = (select p.name, p.phone, p.email, p.address, p.service_type, p.urgency_level,
                 p.estimated_value, p.status, p.assigned_to, p.notes
            from jsonb_populate_record(t, patch) p)
   where t.id = lead_id
  returning * into l;
  if l.id is null then return null; end if;
  return app.lead_json(l);
end
$function$;
comment on function api.lead_patch(text,text,uuid,jsonb) is E'PATCH leads/{id}: fields present replace the stored ones; a status move is checked by the status graph.';

create function api.booking_get(token_hash text, location_ref text, booking_id uuid)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'bookings:read');
begin
  return (select app.booking_json(b) from app.bookings b where b.id = booking_id);
end
$function$;
comment on function api.booking_get(text,text,uuid) is E'GET bookings/{id}.';

create function api.booking_patch(token_hash text, location_ref text, booking_id uuid, patch jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'bookings:write');
  b app.bookings;
begin
  update app.bookings t
     set (status, scheduled_date, scheduled_time, service_type, address, notes)
       = (select p.status, p.scheduled_date, p.scheduled_time, p.service_type, p.address, p.notes
            from jsonb_populate_record(t, patch) p)
   where t.id = booking_id
  returning * into b;
  if b.id is null then return null; end if;
  return app.booking_json(b);
end
$function$;
comment on function api.booking_patch(text,text,uuid,jsonb) is E'PATCH bookings/{id}: status, date, time, details; fires booking.updated on a status or time change.';

create function api.faq_create(token_hash text, location_ref text, body jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'faqs:write');
  f app.faqs;
begin
  insert into app.faqs (location_id, question, answer, position)
  select a.location_id, p.question, p.answer, coalesce(p.position, 0)
    from jsonb_populate_record(null::app.faqs, body) p
  returning * into f;
  return app.faq_json(f);
end
$function$;
comment on function api.faq_create(text,text,jsonb) is E'POST faqs.';

create function api.faq_get(token_hash text, location_ref text, faq_id uuid)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'faqs:read');
begin
  return (select app.faq_json(f) from app.faqs f where f.id = faq_id);
end
$function$;
comment on function api.faq_get(text,text,uuid) is E'GET faqs/{id}.';

create function api.faq_patch(token_hash text, location_ref text, faq_id uuid, patch jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'faqs:write');
  f app.faqs;
begin
  update app.faqs t
     set (question, answer, position)
       = (select p.question, p.answer, p.position from jsonb_populate_record(t, patch) p)
   where t.id = faq_id
  returning * into f;
  if f.id is null then return null; end if;
  return app.faq_json(f);
end
$function$;
comment on function api.faq_patch(text,text,uuid,jsonb) is E'PATCH faqs/{id}.';

create function api.faq_delete(token_hash text, location_ref text, faq_id uuid)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'faqs:write');
  f app.faqs;
begin
  delete from app.faqs t where t.id = faq_id returning * into f;
  if f.id is null then return null; end if;
  return app.faq_json(f);
end
$function$;
comment on function api.faq_delete(text,text,uuid) is E'DELETE faqs/{id}: returns the removed FAQ.';

create function api.pricebook_create(token_hash text, location_ref text, body jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'pricebook:write');
  i app.pricebook_items;
begin
  insert into app.pricebook_items (location_id, service_name, price, note, position)
  select a.location_id, p.service_name, p.price, p.note, coalesce(p.position, 0)
    from jsonb_populate_record(null::app.pricebook_items, body) p
  returning * into i;
  return app.pricebook_item_json(i);
end
$function$;
comment on function api.pricebook_create(text,text,jsonb) is E'POST pricebook.';

create function api.pricebook_get(token_hash text, location_ref text, item_id uuid)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'pricebook:read');
begin
  return (select app.pricebook_item_json(p) from app.pricebook_items p where p.id = item_id);
end
$function$;
comment on function api.pricebook_get(text,text,uuid) is E'GET pricebook/{id}.';

create function api.pricebook_patch(token_hash text, location_ref text, item_id uuid, patch jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'pricebook:write');
  i app.pricebook_items;
begin
  update app.pricebook_items t
     set (service_name, price, note, position)
       = (select p.service_name, p.price, p.note, p.position from jsonb_populate_record(t, patch) p)
   where t.id = item_id
  returning * into i;
  if i.id is null then return null; end if;
  return app.pricebook_item_json(i);
end
$function$;
comment on function api.pricebook_patch(text,text,uuid,jsonb) is E'PATCH pricebook/{id}.';

create function api.pricebook_delete(token_hash text, location_ref text, item_id uuid)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'pricebook:write');
  i app.pricebook_items;
begin
  delete from app.pricebook_items t where t.id = item_id returning * into i;
  if i.id is null then return null; end if;
  return app.pricebook_item_json(i);
end
$function$;
comment on function api.pricebook_delete(text,text,uuid) is E'DELETE pricebook/{id}: returns the removed item.';

create function api.call_forwarding_get(token_hash text, location_ref text)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'settings:read');
begin
  return (select app.call_forwarding_json(f, l.service_phone)
            from app.call_forwarding f join app.locations l on l.id = f.location_id
           where f.location_id = a.location_id);
end
$function$;
comment on function api.call_forwarding_get(text,text) is E'GET call-forwarding.';

create function api.call_forwarding_patch(token_hash text, location_ref text, patch jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'settings:write');
begin
  update app.call_forwarding t
     set (mode, existing_business_line)
       = (select p.mode, p.existing_business_line from jsonb_populate_record(t, patch) p)
   where t.location_id = a.location_id;
  return (select app.call_forwarding_json(f, l.service_phone)
            from app.call_forwarding f join app.locations l on l.id = f.location_id
           where f.location_id = a.location_id);
end
$function$;
comment on function api.call_forwarding_patch(text,text,jsonb) is E'PATCH call-forwarding: mode and/or existing_business_line.';

create function api.business_hours_get(token_hash text, location_ref text)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'settings:read');
begin
  return app.business_hours_json(a.location_id);
end
$function$;
comment on function api.business_hours_get(text,text) is E'GET business-hours.';

create function api.business_hours_put(token_hash text, location_ref text, hours jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'settings:write');
begin
  delete from app.business_hours h where h.location_id = a.location_id;
  insert into app.business_hours (location_id, day, open, close)
  select a.location_id, (x ->> 'day')::smallint, x ->> 'open', x ->> 'close'
    from jsonb_array_elements(hours) x;
  return app.business_hours_json(a.location_id);
end
$function$;
comment on function api.business_hours_put(text,text,jsonb) is E'PUT business-hours: replaces the whole set (an empty array closes every day).';

create function api.agent_get(token_hash text, location_ref text)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'settings:read');
begin
  return (select app.agent_settings_json(s) from app.agent_settings s where s.location_id = a.location_id);
end
$function$;
comment on function api.agent_get(text,text) is E'GET agent.';

create function api.agent_patch(token_hash text, location_ref text, patch jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'settings:write');
  s app.agent_settings;
begin
  update app.agent_settings t
     set (greeting, transfer_number, emergency_keywords, booking_enabled, blocked_numbers)
       = (select p.greeting, p.transfer_number, p.emergency_keywords, p.booking_enabled, p.blocked_numbers
            from jsonb_populate_record(t, patch) p)
   where t.location_id = a.location_id
  returning * into s;
  return app.agent_settings_json(s);
end
$function$;
comment on function api.agent_patch(text,text,jsonb) is E'PATCH agent.';

create function api.integration_create(token_hash text, location_ref text, body jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'integrations:write');
  prov text := body ->> 'provider';
  i app.integrations;
begin
  if prov = any (app.oauth_providers()) then
    perform app.raise('SBOA0', format('%s connects through its OAuth flow, not this endpoint', prov),
                      jsonb_build_object('provider', prov));
  end if;
  if exists (select 1 from app.integrations x where x.provider = prov and x.status = 'connected') then
    perform app.raise('SB409', format('A %s integration is already connected', prov), jsonb_build_object('provider', prov));
  end if;
  insert into app.integrations (location_id, provider, status, label, webhook_url, config, connected_at)
  values (a.location_id, prov, 'connected', body ->> 'label', body ->> 'webhook_url',
          coalesce(body -> 'config', '{}'), now())
  returning * into i;
  return app.integration_json(i);
end
$function$;
comment on function api.integration_create(text,text,jsonb) is E'POST integrations: webhook-style providers only (OAuth ones → SBOA0); one connected per provider (SB409).';

create function api.integration_delete(token_hash text, location_ref text, provider text)
 RETURNS jsonb
 LANGUAGE plpgsql
AS $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'integrations:write');
  i app.integrations;
begin
  update app.integrations t
     set status = 'disconnected', disconnected_at = now(), access_token = null, refresh_token = null
   where t.location_id = a.location_id and t.provider = integration_delete.provider and t.status = 'connected'
  returning * into i;
  if i.id is null then return null; end if;
  return app.integration_json(i);
end
$function$;
comment on function api.integration_delete(text,text,text) is E'DELETE integrations/{provider}: marks the connected one disconnected (and drops its tokens); 404 when none is connected.';

create function api.me(token_hash text)
 RETURNS json
 LANGUAGE plpgsql
AS $function$
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
$function$;
comment on function api.me(text) is E'GET /me: the calling key, its location and scopes. No scope needed.';

create function api.calls_list(token_hash text, location_ref text, filters jsonb, page jsonb, OUT data json, OUT next_cursor text)
 RETURNS record
 LANGUAGE plpgsql
AS $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'calls:read');
  lim int := app.page_limit(page);
  after app.page_cursor := app.page_after(page);
  f_outcome text := filters ->> 'outcome';
  f_from timestamptz := (filters ->> 'from')::timestamptz;
  f_to timestamptz := (filters ->> 'to')::timestamptz;
  f_emergency boolean := (filters ->> 'is_emergency')::boolean;
begin
  if f_outcome is null and f_from is null and f_to is null and f_emergency is null then
    -- Unfiltered pages, the hot read: every value sits behind a sub-select, so the cached generic
    -- plan is chosen and the page is not planned again on each request.
    select coalesce(json_agg(p.j order by p.n) filter (where p.n <= lim), '[]'),
           case when max(p.n) > lim then min(app.cursor_encode(p.created_at, p.id)) filter (where p.n = lim) end
      into data, next_cursor
      from (select app.call_summary_js(c) as j, c.created_at, c.id,
                   row_number() over (order by c.created_at desc, c.id desc) as n
              from app.calls c
             where c.location_id = (select a.location_id)
               and (c.created_at, c.id) < (select after.created_at, after.id)
             order by c.created_at desc, c.id desc limit (select lim + 1)) p;
    return;
  end if;
  -- Filtered pages: planned per request, so the outcome and started_at indexes serve them.
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
$function$;
comment on function api.calls_list(text,text,jsonb,jsonb) is E'GET calls: summaries, newest first; filters { outcome, from, to (started_at, to exclusive), is_emergency }. Returns the page (data) and the next cursor.';

create function api.leads_list(token_hash text, location_ref text, status text, page jsonb, OUT data json, OUT next_cursor text)
 RETURNS record
 LANGUAGE plpgsql
AS $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'leads:read');
  lim int := app.page_limit(page);
  after app.page_cursor := app.page_after(page);
begin
  if leads_list.status is null then
    -- Unfiltered pages: planned once per connection (see api.calls_list).
    select coalesce(json_agg(p.j order by p.n) filter (where p.n <= lim), '[]'),
           case when max(p.n) > lim then min(app.cursor_encode(p.created_at, p.id)) filter (where p.n = lim) end
      into data, next_cursor
      from (select app.lead_js(l) as j, l.created_at, l.id,
                   row_number() over (order by l.created_at desc, l.id desc) as n
              from app.leads l
             where l.location_id = (select a.location_id)
               and (l.created_at, l.id) < (select after.created_at, after.id)
             order by l.created_at desc, l.id desc limit (select lim + 1)) p;
    return;
  end if;
  select coalesce(json_agg(p.j order by p.n) filter (where p.n <= lim), '[]'),
         case when max(p.n) > lim then min(app.cursor_encode(p.created_at, p.id)) filter (where p.n = lim) end
    into data, next_cursor
    from (select app.lead_js(l) as j, l.created_at, l.id,
                 row_number() over (order by l.created_at desc, l.id desc) as n
            from app.leads l
           where l.location_id = a.location_id
             and l.status = leads_list.status
             and app.before_cursor(l.created_at, l.id, after)
           order by l.created_at desc, l.id desc limit lim + 1) p;
end
$function$;
comment on function api.leads_list(text,text,text,jsonb) is E'GET leads[?status=]: newest first. Returns the page (data) and the next cursor.';

create function api.bookings_list(token_hash text, location_ref text, status text, page jsonb, OUT data json, OUT next_cursor text)
 RETURNS record
 LANGUAGE plpgsql
AS $function$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'bookings:read');
  lim int := app.page_limit(page);
  after app.page_cursor := app.page_after(page);
begin
  if bookings_list.status is null then
    -- Unfiltered pages: planned once per connection (see api.calls_list).
    select coalesce(json_agg(p.j order by p.n) filter (where p.n <= lim), '[]'),
           case when max(p.n) > lim then min(app.cursor_encode(p.created_at, p.id)) filter (where p.n = lim) end
      into data, next_cursor
      from (select app.booking_js(b) as j, b.created_at, b.id,
                   row_number() over (order by b.created_at desc, b.id desc) as n
              from app.bookings b
             where b.location_id = (select a.location_id)
               and (b.created_at, b.id) < (select after.created_at, after.id)
             order by b.created_at desc, b.id desc limit (select lim + 1)) p;
    return;
  end if;
  select coalesce(json_agg(p.j order by p.n) filter (where p.n <= lim), '[]'),
         case when max(p.n) > lim then min(app.cursor_encode(p.created_at, p.id)) filter (where p.n = lim) end
    into data, next_cursor
    from (select app.booking_js(b) as j, b.created_at, b.id,
                 row_number() over (order by b.created_at desc, b.id desc) as n
            from app.bookings b
           where b.location_id = a.location_id
             and b.status = bookings_list.status
             and app.before_cursor(b.created_at, b.id, after)
           order by b.created_at desc, b.id desc limit lim + 1) p;
end
$function$;
comment on function api.bookings_list(text,text,text,jsonb) is E'GET bookings[?status=]: newest first. Returns the page (data) and the next cursor.';

create function api.faqs_list(token_hash text, location_ref text, page jsonb, OUT data json, OUT next_cursor text)
 RETURNS record
 LANGUAGE plpgsql
AS $function$
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
$function$;
comment on function api.faqs_list(text,text,jsonb) is E'GET faqs: newest first. Returns the page (data) and the next cursor.';

create function api.pricebook_list(token_hash text, location_ref text, page jsonb, OUT data json, OUT next_cursor text)
 RETURNS record
 LANGUAGE plpgsql
AS $function$
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
$function$;
comment on function api.pricebook_list(text,text,jsonb) is E'GET pricebook: newest first. Returns the page (data) and the next cursor.';

create function api.integrations_list(token_hash text, location_ref text, page jsonb, OUT data json, OUT next_cursor text)
 RETURNS record
 LANGUAGE plpgsql
AS $function$
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
$function$;
comment on function api.integrations_list(text,text,jsonb) is E'GET integrations: connected and disconnected, newest first. Returns the page (data) and the next cursor.';

create function api.members_list(token_hash text, location_ref text, page jsonb, OUT data json, OUT next_cursor text)
 RETURNS record
 LANGUAGE plpgsql
AS $function$
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
$function$;
comment on function api.members_list(text,text,jsonb) is E'GET members: newest first. Returns the page (data) and the next cursor.';

create function api.locations_list(token_hash text, page jsonb, OUT data json, OUT next_cursor text)
 RETURNS record
 LANGUAGE plpgsql
AS $function$
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
$function$;
comment on function api.locations_list(text,jsonb) is E'GET /locations: the locations the token can reach (its own; RLS shows no other). Returns the page (data) and the next cursor.';

create function api.api_keys_list(token_hash text, location_ref text, page jsonb, OUT data json, OUT next_cursor text)
 RETURNS record
 LANGUAGE plpgsql
AS $function$
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
$function$;
comment on function api.api_keys_list(text,text,jsonb) is E'GET /locations/{id}/api-keys: listing records only. Returns the page (data) and the next cursor.';

-- Grants: the one place for this concern's privileges (tenant tables get theirs from
-- app.secure_tenant_table above; only departures from it are here).
grant execute on function api.location_get(text,text) to switchboard_api;
grant execute on function api.location_patch(text,text,jsonb) to switchboard_api;
grant execute on function api.call_get(text,text,uuid) to switchboard_api;
grant execute on function api.lead_create(text,text,jsonb) to switchboard_api;
grant execute on function api.lead_get(text,text,uuid) to switchboard_api;
grant execute on function api.lead_patch(text,text,uuid,jsonb) to switchboard_api;
grant execute on function api.booking_get(text,text,uuid) to switchboard_api;
grant execute on function api.booking_patch(text,text,uuid,jsonb) to switchboard_api;
grant execute on function api.faq_create(text,text,jsonb) to switchboard_api;
grant execute on function api.faq_get(text,text,uuid) to switchboard_api;
grant execute on function api.faq_patch(text,text,uuid,jsonb) to switchboard_api;
grant execute on function api.faq_delete(text,text,uuid) to switchboard_api;
grant execute on function api.pricebook_create(text,text,jsonb) to switchboard_api;
grant execute on function api.pricebook_get(text,text,uuid) to switchboard_api;
grant execute on function api.pricebook_patch(text,text,uuid,jsonb) to switchboard_api;
grant execute on function api.pricebook_delete(text,text,uuid) to switchboard_api;
grant execute on function api.call_forwarding_get(text,text) to switchboard_api;
grant execute on function api.call_forwarding_patch(text,text,jsonb) to switchboard_api;
grant execute on function api.business_hours_get(text,text) to switchboard_api;
grant execute on function api.business_hours_put(text,text,jsonb) to switchboard_api;
grant execute on function api.agent_get(text,text) to switchboard_api;
grant execute on function api.agent_patch(text,text,jsonb) to switchboard_api;
grant execute on function api.integration_create(text,text,jsonb) to switchboard_api;
grant execute on function api.integration_delete(text,text,text) to switchboard_api;
grant execute on function api.me(text) to switchboard_api;
grant execute on function api.calls_list(text,text,jsonb,jsonb) to switchboard_api;
grant execute on function api.leads_list(text,text,text,jsonb) to switchboard_api;
grant execute on function api.bookings_list(text,text,text,jsonb) to switchboard_api;
grant execute on function api.faqs_list(text,text,jsonb) to switchboard_api;
grant execute on function api.pricebook_list(text,text,jsonb) to switchboard_api;
grant execute on function api.integrations_list(text,text,jsonb) to switchboard_api;
grant execute on function api.members_list(text,text,jsonb) to switchboard_api;
grant execute on function api.locations_list(text,jsonb) to switchboard_api;
grant execute on function api.api_keys_list(text,text,jsonb) to switchboard_api;

--! Previous: sha1:37f2352571988303788eee8af7afebb88c7ed9f4
--! Hash: sha1:652a318c26c97b4928304c1cf36295fb286c9672
--! Message: token REST API: resources, insights

-- Token REST API (issue 3): resource endpoints, insights. One api.* function per operation.


-- ---------------------------------------------------------------------------------------------
-- JSON shapes not yet in the foundation.
create function app.call_detail_json(c app.calls, scopes text[]) returns jsonb
  language sql stable parallel safe
as $$
  select app.call_summary_json(c) || jsonb_build_object(
    'recording_url', case when 'recordings:read' = any (scopes) then c.recording_url end,
    'public_log_url', c.public_log_url,
    'transcript', case when 'transcripts:read' = any (scopes) then c.transcript end,
    'transcript_turns', case when 'transcripts:read' = any (scopes) then c.transcript_turns end,
    'call_summary', c.call_summary, 'user_sentiment', c.user_sentiment,
    'in_voicemail', c.in_voicemail)
$$;
comment on function app.call_detail_json(app.calls, text[]) is
  E'Call detail: the summary plus recording (recordings:read) and transcript (transcripts:read), else null.';

create function app.faq_json(f app.faqs) returns jsonb
  language sql stable parallel safe
as $$
  select jsonb_build_object(
    'id', f.id, 'location_id', f.location_id, 'question', f.question, 'answer', f.answer,
    'asked_count', f.asked_count, 'position', f.position,
    'created_at', app.iso(f.created_at), 'updated_at', app.iso(f.updated_at))
$$;
comment on function app.faq_json(app.faqs) is E'FAQ as the API shows it.';

create function app.pricebook_item_json(p app.pricebook_items) returns jsonb
  language sql stable parallel safe
as $$
  select jsonb_build_object(
    'id', p.id, 'location_id', p.location_id, 'service_name', p.service_name, 'price', p.price,
    'note', p.note, 'position', p.position,
    'created_at', app.iso(p.created_at), 'updated_at', app.iso(p.updated_at))
$$;
comment on function app.pricebook_item_json(app.pricebook_items) is E'Pricebook item as the API shows it (price is free text).';

create function app.integration_json(i app.integrations) returns jsonb
  language sql stable parallel safe
as $$
  select jsonb_build_object(
    'id', i.id, 'location_id', i.location_id, 'provider', i.provider, 'status', i.status,
    'label', i.label, 'webhook_url', i.webhook_url, 'external_id', i.external_id,
    'expires_at', app.iso(i.expires_at), 'config', i.config,
    'connected_at', app.iso(i.connected_at), 'disconnected_at', app.iso(i.disconnected_at),
    'last_synced_at', app.iso(i.last_synced_at), 'last_error', i.last_error,
    'created_at', app.iso(i.created_at), 'updated_at', app.iso(i.updated_at))
$$;
comment on function app.integration_json(app.integrations) is E'Integration as the API shows it: never access or refresh tokens.';

create function app.agent_settings_json(s app.agent_settings) returns jsonb
  language sql stable parallel safe
as $$
  select jsonb_build_object(
    'location_id', s.location_id, 'greeting', s.greeting, 'transfer_number', s.transfer_number,
    'emergency_keywords', to_jsonb(s.emergency_keywords), 'booking_enabled', s.booking_enabled,
    'blocked_numbers', to_jsonb(s.blocked_numbers), 'updated_at', app.iso(s.updated_at))
$$;
comment on function app.agent_settings_json(app.agent_settings) is E'Agent settings as the API shows them.';

create function app.call_forwarding_json(f app.call_forwarding, service_phone text) returns jsonb
  language sql stable parallel safe
as $$
  select jsonb_build_object(
    'location_id', f.location_id, 'mode', f.mode, 'existing_business_line', f.existing_business_line,
    'updated_at', app.iso(f.updated_at),
    'instructions', jsonb_build_object(
      'forward_to', service_phone,
      'summary', case f.mode
        when 'replace' then 'Give callers the service number directly, or forward every call from your business line to it.'
        when 'no_answer' then 'Forward calls to the service number when nobody answers your business line.'
        when 'busy' then 'Forward calls to the service number when your business line is busy.'
        when 'after_hours' then 'Forward calls to the service number outside your business hours.'
        else 'Forwarding is off: the agent only answers calls placed to the service number itself.' end,
      'steps', case
        when f.mode = 'off' then '[]'::jsonb
        when service_phone is null then jsonb_build_array('This location has no service phone yet; forwarding can be set up once one is assigned.')
        else jsonb_build_array(
          format('On the phone system or carrier account of %s, open the call-forwarding settings.',
                 coalesce(f.existing_business_line, 'your business line')),
          case f.mode
            when 'replace' then format('Choose unconditional (always) forwarding to %s.', service_phone)
            when 'no_answer' then format('Choose conditional forwarding "on no answer" to %s (after about 4 rings / 20 s).', service_phone)
            when 'busy' then format('Choose conditional forwarding "when busy" to %s.', service_phone)
            else format('Schedule forwarding to %s for the hours you are closed, or switch unconditional forwarding on at closing time.', service_phone) end,
          'Most mobile and landline carriers also accept a forwarding star code; your carrier lists the code for this kind of forwarding.',
          'Place a test call to your business line and check that it appears in the calls list.') end))
$$;
comment on function app.call_forwarding_json(app.call_forwarding, text) is
  E'Call forwarding plus carrier-agnostic set-up instructions for its mode.';

-- ---------------------------------------------------------------------------------------------
-- Calls.
create function api.calls_list(token_hash text, location_ref text, filters jsonb, page jsonb) returns jsonb
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
  return app.page_result(array(
    select app.page_item(c.created_at, c.id, app.call_summary_json(c)) from app.calls c
     where c.location_id = a.location_id
       and app.before_cursor(c.created_at, c.id, after)
       and (f_outcome is null or c.outcome = f_outcome)
       and (f_from is null or c.started_at >= f_from)
       and (f_to is null or c.started_at < f_to)
       and (f_emergency is null or c.is_emergency = f_emergency)
     order by c.created_at desc, c.id desc limit lim + 1), lim);
end
$$;
comment on function api.calls_list(text, text, jsonb, jsonb) is
  E'GET calls: summaries, newest first; filters { outcome, from, to (started_at, to exclusive), is_emergency }.';

create function api.call_get(token_hash text, location_ref text, call_id uuid) returns jsonb
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'calls:read');
begin
  return (select app.call_detail_json(c, a.scopes) from app.calls c where c.id = call_id);
end
$$;
comment on function api.call_get(text, text, uuid) is E'GET calls/{id}: detail; transcript and recording depend on the token''s scopes.';

-- ---------------------------------------------------------------------------------------------
-- Leads. Status moves are checked by the trigger of 000003 (SBTR9).
create function app.check_member(member_id uuid) returns void
  language plpgsql stable
as $$
begin
  if member_id is not null and not exists (select 1 from app.members m where m.id = member_id) then
    perform app.raise('SB400', 'assigned_to is not a member of this location',
      jsonb_build_object('issues', jsonb_build_array(jsonb_build_object('path', 'assigned_to', 'message', 'Unknown member'))));
  end if;
end
$$;
comment on function app.check_member(uuid) is
  E'400 unless the member is visible under RLS: a foreign key alone would accept another location''s member.';

create function api.leads_list(token_hash text, location_ref text, status text, page jsonb) returns jsonb
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'leads:read');
  lim int := app.page_limit(page);
  after app.page_cursor := app.page_after(page);
begin
  return app.page_result(array(
    select app.page_item(l.created_at, l.id, app.lead_json(l)) from app.leads l
     where l.location_id = a.location_id
       and (leads_list.status is null or l.status = leads_list.status)
       and app.before_cursor(l.created_at, l.id, after)
     order by l.created_at desc, l.id desc limit lim + 1), lim);
end
$$;
comment on function api.leads_list(text, text, text, jsonb) is E'GET leads[?status=]: newest first.';

create function api.lead_create(token_hash text, location_ref text, body jsonb) returns jsonb
  language plpgsql volatile
as $$
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
$$;
comment on function api.lead_create(text, text, jsonb) is E'POST leads: a lead without a call (call_id null); fires lead.created.';

create function api.lead_get(token_hash text, location_ref text, lead_id uuid) returns jsonb
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'leads:read');
begin
  return (select app.lead_json(l) from app.leads l where l.id = lead_id);
end
$$;
comment on function api.lead_get(text, text, uuid) is E'GET leads/{id}.';

create function api.lead_patch(token_hash text, location_ref text, lead_id uuid, patch jsonb) returns jsonb
  language plpgsql volatile
as $$
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
$$;
comment on function api.lead_patch(text, text, uuid, jsonb) is
  E'PATCH leads/{id}: fields present replace the stored ones; a status move is checked by the status graph.';

-- ---------------------------------------------------------------------------------------------
-- Bookings. DESIGN names invalid_transition for bookings too but gives no graph; this one
-- keeps completed final and lets cancelled / no-show bookings be rescheduled.
create function app.booking_allowed_moves(from_status text) returns text[]
  language sql immutable parallel safe
as $$
  select case from_status
    when 'scheduled' then array['confirmed', 'completed', 'cancelled', 'no_show']
    when 'confirmed' then array['scheduled', 'completed', 'cancelled', 'no_show']
    when 'cancelled' then array['scheduled']
    when 'no_show' then array['scheduled']
    else array[]::text[] end
$$;
comment on function app.booking_allowed_moves(text) is E'The booking status graph; completed is final.';

create function app.tg_bookings__status_transition() returns trigger
  language plpgsql
as $$
begin
  if new.status is distinct from old.status and not new.status = any (app.booking_allowed_moves(old.status)) then
    perform app.raise('SBTR9',
      format('Booking status cannot move from %s to %s', old.status, new.status),
      jsonb_build_object('from', old.status, 'to', new.status, 'allowed', to_jsonb(app.booking_allowed_moves(old.status))));
  end if;
  return new;
end
$$;
comment on function app.tg_bookings__status_transition() is E'Refuses illegal booking status moves (SBTR9).';
create trigger _200_status_transition before update of status on app.bookings
  for each row execute function app.tg_bookings__status_transition();

create function api.bookings_list(token_hash text, location_ref text, status text, page jsonb) returns jsonb
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'bookings:read');
  lim int := app.page_limit(page);
  after app.page_cursor := app.page_after(page);
begin
  return app.page_result(array(
    select app.page_item(b.created_at, b.id, app.booking_json(b)) from app.bookings b
     where b.location_id = a.location_id
       and (bookings_list.status is null or b.status = bookings_list.status)
       and app.before_cursor(b.created_at, b.id, after)
     order by b.created_at desc, b.id desc limit lim + 1), lim);
end
$$;
comment on function api.bookings_list(text, text, text, jsonb) is E'GET bookings[?status=]: newest first.';

create function api.booking_get(token_hash text, location_ref text, booking_id uuid) returns jsonb
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'bookings:read');
begin
  return (select app.booking_json(b) from app.bookings b where b.id = booking_id);
end
$$;
comment on function api.booking_get(text, text, uuid) is E'GET bookings/{id}.';

create function api.booking_patch(token_hash text, location_ref text, booking_id uuid, patch jsonb) returns jsonb
  language plpgsql volatile
as $$
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
$$;
comment on function api.booking_patch(text, text, uuid, jsonb) is E'PATCH bookings/{id}: status, date, time, details; fires booking.updated on a status or time change.';

-- ---------------------------------------------------------------------------------------------
-- FAQs.
create function api.faqs_list(token_hash text, location_ref text, page jsonb) returns jsonb
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'faqs:read');
  lim int := app.page_limit(page);
  after app.page_cursor := app.page_after(page);
begin
  return app.page_result(array(
    select app.page_item(f.created_at, f.id, app.faq_json(f)) from app.faqs f
     where f.location_id = a.location_id and app.before_cursor(f.created_at, f.id, after)
     order by f.created_at desc, f.id desc limit lim + 1), lim);
end
$$;
comment on function api.faqs_list(text, text, jsonb) is E'GET faqs: newest first.';

create function api.faq_create(token_hash text, location_ref text, body jsonb) returns jsonb
  language plpgsql volatile
as $$
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
$$;
comment on function api.faq_create(text, text, jsonb) is E'POST faqs.';

create function api.faq_get(token_hash text, location_ref text, faq_id uuid) returns jsonb
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'faqs:read');
begin
  return (select app.faq_json(f) from app.faqs f where f.id = faq_id);
end
$$;
comment on function api.faq_get(text, text, uuid) is E'GET faqs/{id}.';

create function api.faq_patch(token_hash text, location_ref text, faq_id uuid, patch jsonb) returns jsonb
  language plpgsql volatile
as $$
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
$$;
comment on function api.faq_patch(text, text, uuid, jsonb) is E'PATCH faqs/{id}.';

create function api.faq_delete(token_hash text, location_ref text, faq_id uuid) returns jsonb
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'faqs:write');
  f app.faqs;
begin
  delete from app.faqs t where t.id = faq_id returning * into f;
  if f.id is null then return null; end if;
  return app.faq_json(f);
end
$$;
comment on function api.faq_delete(text, text, uuid) is E'DELETE faqs/{id}: returns the removed FAQ.';

-- ---------------------------------------------------------------------------------------------
-- Pricebook.
create function api.pricebook_list(token_hash text, location_ref text, page jsonb) returns jsonb
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'pricebook:read');
  lim int := app.page_limit(page);
  after app.page_cursor := app.page_after(page);
begin
  return app.page_result(array(
    select app.page_item(p.created_at, p.id, app.pricebook_item_json(p)) from app.pricebook_items p
     where p.location_id = a.location_id and app.before_cursor(p.created_at, p.id, after)
     order by p.created_at desc, p.id desc limit lim + 1), lim);
end
$$;
comment on function api.pricebook_list(text, text, jsonb) is E'GET pricebook: newest first.';

create function api.pricebook_create(token_hash text, location_ref text, body jsonb) returns jsonb
  language plpgsql volatile
as $$
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
$$;
comment on function api.pricebook_create(text, text, jsonb) is E'POST pricebook.';

create function api.pricebook_get(token_hash text, location_ref text, item_id uuid) returns jsonb
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'pricebook:read');
begin
  return (select app.pricebook_item_json(p) from app.pricebook_items p where p.id = item_id);
end
$$;
comment on function api.pricebook_get(text, text, uuid) is E'GET pricebook/{id}.';

create function api.pricebook_patch(token_hash text, location_ref text, item_id uuid, patch jsonb) returns jsonb
  language plpgsql volatile
as $$
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
$$;
comment on function api.pricebook_patch(text, text, uuid, jsonb) is E'PATCH pricebook/{id}.';

create function api.pricebook_delete(token_hash text, location_ref text, item_id uuid) returns jsonb
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'pricebook:write');
  i app.pricebook_items;
begin
  delete from app.pricebook_items t where t.id = item_id returning * into i;
  if i.id is null then return null; end if;
  return app.pricebook_item_json(i);
end
$$;
comment on function api.pricebook_delete(text, text, uuid) is E'DELETE pricebook/{id}: returns the removed item.';

-- ---------------------------------------------------------------------------------------------
-- Settings: call forwarding, business hours, agent.
create function api.call_forwarding_get(token_hash text, location_ref text) returns jsonb
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'settings:read');
begin
  return (select app.call_forwarding_json(f, l.service_phone)
            from app.call_forwarding f join app.locations l on l.id = f.location_id
           where f.location_id = a.location_id);
end
$$;
comment on function api.call_forwarding_get(text, text) is E'GET call-forwarding.';

create function api.call_forwarding_patch(token_hash text, location_ref text, patch jsonb) returns jsonb
  language plpgsql volatile
as $$
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
$$;
comment on function api.call_forwarding_patch(text, text, jsonb) is E'PATCH call-forwarding: mode and/or existing_business_line.';

create function app.business_hours_json(location_id uuid) returns jsonb
  language sql stable
as $$
  select coalesce(jsonb_agg(jsonb_build_object('day', h.day, 'open', h.open, 'close', h.close)
                            order by h.day, h.open), '[]')
    from app.business_hours h where h.location_id = business_hours_json.location_id
$$;
comment on function app.business_hours_json(uuid) is E'Business hours as [{ day, open, close }], by day then opening time.';

create function api.business_hours_get(token_hash text, location_ref text) returns jsonb
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'settings:read');
begin
  return app.business_hours_json(a.location_id);
end
$$;
comment on function api.business_hours_get(text, text) is E'GET business-hours.';

create function api.business_hours_put(token_hash text, location_ref text, hours jsonb) returns jsonb
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'settings:write');
begin
  delete from app.business_hours h where h.location_id = a.location_id;
  insert into app.business_hours (location_id, day, open, close)
  select a.location_id, (x ->> 'day')::smallint, x ->> 'open', x ->> 'close'
    from jsonb_array_elements(hours) x;
  return app.business_hours_json(a.location_id);
end
$$;
comment on function api.business_hours_put(text, text, jsonb) is E'PUT business-hours: replaces the whole set (an empty array closes every day).';

create function api.agent_get(token_hash text, location_ref text) returns jsonb
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'settings:read');
begin
  return (select app.agent_settings_json(s) from app.agent_settings s where s.location_id = a.location_id);
end
$$;
comment on function api.agent_get(text, text) is E'GET agent.';

create function api.agent_patch(token_hash text, location_ref text, patch jsonb) returns jsonb
  language plpgsql volatile
as $$
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
$$;
comment on function api.agent_patch(text, text, jsonb) is E'PATCH agent.';

-- ---------------------------------------------------------------------------------------------
-- Integrations.
create function app.oauth_providers() returns text[]
  language sql immutable parallel safe
as $$ select array['google_calendar', 'outlook', 'jobber', 'housecall_pro', 'servicetitan', 'hubspot'] $$;
comment on function app.oauth_providers() is E'Providers connected by their own OAuth redirect flow, never by POST integrations.';

create function api.integrations_list(token_hash text, location_ref text, page jsonb) returns jsonb
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'integrations:read');
  lim int := app.page_limit(page);
  after app.page_cursor := app.page_after(page);
begin
  return app.page_result(array(
    select app.page_item(i.created_at, i.id, app.integration_json(i)) from app.integrations i
     where i.location_id = a.location_id and app.before_cursor(i.created_at, i.id, after)
     order by i.created_at desc, i.id desc limit lim + 1), lim);
end
$$;
comment on function api.integrations_list(text, text, jsonb) is E'GET integrations: connected and disconnected, newest first.';

create function api.integration_create(token_hash text, location_ref text, body jsonb) returns jsonb
  language plpgsql volatile
as $$
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
$$;
comment on function api.integration_create(text, text, jsonb) is
  E'POST integrations: webhook-style providers only (OAuth ones → SBOA0); one connected per provider (SB409).';

create function api.integration_delete(token_hash text, location_ref text, provider text) returns jsonb
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'integrations:write');
  i app.integrations;
begin
  update app.integrations t
     set status = 'disconnected', disconnected_at = now(), access_token = null, refresh_token = null
   where t.provider = integration_delete.provider and t.status <> 'disconnected'
  returning * into i;
  if i.id is null then return null; end if;
  return app.integration_json(i);
end
$$;
comment on function api.integration_delete(text, text, text) is
  E'DELETE integrations/{provider}: marks the live one disconnected (and drops its tokens); 404 when none.';

-- ---------------------------------------------------------------------------------------------
-- Members.
create function api.members_list(token_hash text, location_ref text, page jsonb) returns jsonb
  language plpgsql volatile
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'members:read');
  lim int := app.page_limit(page);
  after app.page_cursor := app.page_after(page);
begin
  return app.page_result(array(
    select app.page_item(m.created_at, m.id, app.member_json(m)) from app.members m
     where m.location_id = a.location_id and app.before_cursor(m.created_at, m.id, after)
     order by m.created_at desc, m.id desc limit lim + 1), lim);
end
$$;
comment on function api.members_list(text, text, jsonb) is E'GET members: newest first.';

-- ---------------------------------------------------------------------------------------------
-- Insights (DESIGN.md §10). One pass over the window's calls through a covering index; the
-- rest works on a few hundred pre-aggregated rows.
/*
 * Insights need each call's minute; deriving it from started_at costs numeric arithmetic per row
 * (extract/date_part), so the UTC epoch minute is stored once. The expression is immutable in
 * fact (an epoch does not depend on TimeZone); the wrapper says so, which a generated column needs.
 */
create function app.epoch_minute(ts timestamptz) returns bigint
  language sql immutable parallel safe
as $$ select floor(extract(epoch from ts) / 60)::bigint $$;
comment on function app.epoch_minute(timestamptz) is E'Minutes since 1970-01-01 00:00 UTC (time-zone independent, hence immutable).';

alter table app.calls add column started_minute bigint generated always as (app.epoch_minute(started_at)) stored;
comment on column app.calls.started_minute is E'started_at as UTC epoch minutes, for insights arithmetic (derived; never written).';

create index calls_location_inbound_started_idx on app.calls (location_id, started_at)
  include (started_minute, outcome, estimated_value, is_emergency, service_type, id)
  where direction = 'inbound';
comment on index app.calls_location_inbound_started_idx is
  E'Insights: index-only range scan of a location''s inbound calls by start time.';

create index leads_location_created_call_idx on app.leads (location_id, created_at) include (call_id)
  where call_id is not null;
comment on index app.leads_location_created_call_idx is E'Insights: leads made from calls since a moment, index-only.';

create function app.open_minutes(location_id uuid) returns int4multirange
  language sql stable
as $$
  select coalesce(range_agg(int4range(
           h.day * 1440 + (date_part('hour', h.open::time) * 60 + date_part('minute', h.open::time))::int,
           h.day * 1440 + (date_part('hour', h.close::time) * 60 + date_part('minute', h.close::time))::int)), '{}')
    from app.business_hours h where h.location_id = open_minutes.location_id
$$;
comment on function app.open_minutes(uuid) is
  E'Business hours as minutes of the week (Sunday 00:00 = 0): insights test each call with one multirange containment.';

create function app.utc_offset_minutes(at timestamptz, tz text) returns int
  language sql stable parallel safe
as $$ select (date_part('epoch', (at at time zone tz) - (at at time zone 'UTC')) / 60)::int $$;
comment on function app.utc_offset_minutes(timestamptz, text) is E'The zone''s UTC offset at an instant, in minutes.';

/*
 * Converting every call with AT TIME ZONE costs about a microsecond per conversion. A window of
 * at most 91 days has only a handful of offset changes, so they are found once (day by day, then
 * to the quarter hour) and each call's local minute is its UTC epoch minute plus the offset of
 * its segment: integer arithmetic and a width_bucket binary search.
 */
create function app.offset_segments(w_start timestamptz, w_end timestamptz, tz text, out bounds bigint[], out offsets int[])
  language plpgsql stable
as $$
declare
  cur int := app.utc_offset_minutes(w_start, tz);
  d timestamptz;
  q timestamptz;
  o int;
begin
  bounds := array[]::bigint[];
  offsets := array[cur];
  d := w_start;
  while d < w_end loop
    if app.utc_offset_minutes(least(d + interval '1 day', w_end), tz) <> cur then
      -- refine inside this day; offsets change on quarter hours in every zone in use
      q := d;
      while q < least(d + interval '1 day', w_end) loop
        q := q + interval '15 minutes';
        o := app.utc_offset_minutes(q, tz);
        if o <> cur then
          bounds := bounds || (date_part('epoch', q) / 60)::bigint;
          offsets := offsets || o;
          cur := o;
        end if;
      end loop;
    end if;
    d := d + interval '1 day';
  end loop;
  if cardinality(bounds) = 0 then bounds := array[9223372036854775807]; end if;
end
$$;
comment on function app.offset_segments(timestamptz, timestamptz, text) is
  E'UTC offsets of a zone over a window: offsets[k+1] applies from bounds[k] (epoch minutes); offsets[1] before bounds[1].';

create function api.insights(token_hash text, location_ref text, days int) returns jsonb
  language plpgsql volatile
  -- The planner expects every call to be its own group (it cannot know that a few thousand
  -- (day, hour, class) groups absorb them) and would sort 250k rows; a hash aggregate in memory
  -- is what fits.
  set work_mem to '32MB'
  set enable_sort to off
as $$
declare
  a app.auth := app.authorize(token_hash, location_ref, 'insights:read');
  tz text;
  today date;
  first_day date;
  w_start timestamptz;
  w_end timestamptz;
  open_minutes int4multirange;
  seg record;
  o0 int;
  o1 int;
  b1 bigint;
  b2 bigint;
  result jsonb;
begin
  if days is null or days not between 1 and 90 then
    perform app.raise('SB400', 'days must be an integer from 1 to 90',
      jsonb_build_object('issues', jsonb_build_array(jsonb_build_object('path', 'days', 'message', 'Must be from 1 to 90'))));
  end if;
  select l.timezone into tz from app.locations l where l.id = a.location_id;
  today := (now() at time zone tz)::date;
  first_day := today - (days - 1);
  w_start := first_day::timestamp at time zone tz;
  w_end := (today + 1)::timestamp at time zone tz;
  open_minutes := app.open_minutes(a.location_id);
  seg := app.offset_segments(w_start, w_end, tz);
  -- Scalars for the usual case (at most one offset change in the window); the array is the fallback.
  o0 := seg.offsets[1];
  o1 := coalesce(seg.offsets[2], o0);
  b1 := seg.bounds[1];
  b2 := coalesce(seg.bounds[2], 9223372036854775807);

  with raw as (
    -- lm = local minutes since 1970-01-01 00:00 local
    select c.started_minute + case when c.started_minute < b1 then o0
                                   when c.started_minute < b2 then o1
                                   else seg.offsets[width_bucket(c.started_minute, seg.bounds) + 1] end as lm,
           c.outcome, c.is_emergency, c.service_type, c.estimated_value
      from app.calls c
     where c.location_id = a.location_id and c.direction = 'inbound'
       and c.started_at >= w_start and c.started_at < w_end
  ), g as materialized (
    -- The only scan of calls, folded into (local day, local hour, class) groups: a few thousand rows at most.
    select (lm / 1440)::int as dn,                       -- local day number (0 = 1970-01-01, a Thursday)
           ((lm % 1440) / 60)::int as hour,
           not open_minutes @> ((((lm / 1440) + 4) % 7) * 1440 + lm % 1440)::int as after_hours,
           outcome = 'spam' as spam,
           outcome in ('spam', 'dropped') as unanswered,
           is_emergency,
           service_type,
           count(*) as n,
           coalesce(sum(estimated_value) filter (where outcome = 'booked'), 0) as revenue
      from raw
     group by 1, 2, 3, 4, 5, 6, 7
  ), tot as (
    select coalesce(sum(n) filter (where not spam), 0) as non_spam,
           coalesce(sum(n) filter (where not unanswered), 0) as answered,
           coalesce(sum(n) filter (where spam), 0) as spam,
           coalesce(sum(n) filter (where is_emergency), 0) as emergencies,
           coalesce(sum(n) filter (where after_hours and not spam), 0) as after_hours,
           coalesce(sum(revenue), 0) as revenue
      from g
  ), per_day as (
    select date '1970-01-01' + dn as d, sum(n) filter (where not spam) as calls, sum(revenue) as revenue from g group by dn
  ), hours as (
    select h.hour, coalesce(sum(g.n), 0) as n
      from generate_series(0, 23) h(hour)
      left join g on not g.spam and g.hour = h.hour
     group by h.hour
  ), hour_shares as (
    -- Shares rounded to 4 decimals by largest remainder, so that they sum to exactly 1.
    select hour, floor(n * 10000.0 / nullif(t.non_spam, 0)) as base,
           n * 10000.0 / nullif(t.non_spam, 0) - floor(n * 10000.0 / nullif(t.non_spam, 0)) as rem
      from hours, tot t
  ), hour_final as (
    select hour, coalesce(base, 0) + case when row_number() over (order by rem desc nulls last, hour)
                                              <= 10000 - coalesce(sum(base) over (), 10000) then 1 else 0 end as units
      from hour_shares
  ), svc as (
    select service_type, sum(n) as n from g
     where not spam and service_type is not null
     group by service_type
  )
  select jsonb_build_object(
    'days', days,
    'from', first_day, 'to', today, 'timezone', tz,
    'calls_answered', t.answered,
    -- A lead made from a call is never older than the call, so only leads created since the
    -- window opened need joining (index on leads (location_id, created_at)).
    -- A lead made from a call is never older than the call, so only leads created since the
    -- window opened are looked at (index-only), each checked against its call by primary key.
    'leads_captured', (select count(*) from app.leads l
                        where l.location_id = a.location_id and l.created_at >= w_start and l.call_id is not null
                          and tstzrange(w_start, w_end) @> (select c.started_at from app.calls c
                                                             where c.id = l.call_id and c.direction = 'inbound' offset 0)),
    'revenue_recovered', t.revenue,
    'spam_blocked', t.spam,
    'emergencies', t.emergencies,
    'answer_rate_pct', case when t.non_spam = 0 then 0 else round(100.0 * t.answered / t.non_spam, 1) end,
    'after_hours_calls', t.after_hours,
    'per_day', (select jsonb_agg(jsonb_build_object(
                  'date', s.day::date, 'calls', coalesce(p.calls, 0), 'revenue', coalesce(p.revenue, 0)) order by s.day)
                  from generate_series(first_day, today, interval '1 day') s(day)
                  left join per_day p on p.d = s.day::date),
    'per_hour', (select jsonb_agg(jsonb_build_object('hour', hour, 'share', units / 10000.0) order by hour) from hour_final),
    'services', (select coalesce(jsonb_agg(jsonb_build_object(
                    'service', service_type,
                    'pct', round(100.0 * n / (select sum(n) from svc), 1)) order by n desc, service_type), '[]')
                   from svc))
    into result
    from tot t;
  return result;
end
$$;
comment on function api.insights(text, text, int) is
  E'GET insights?days=N: the last N local days (today included) of inbound calls, per DESIGN.md §10.';

grant execute on all functions in schema api to switchboard_api;

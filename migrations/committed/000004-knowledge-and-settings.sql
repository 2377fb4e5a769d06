--! Previous: sha1:50f39ca0550313fe14721671b5d03f2c9ea70f8d
--! Hash: sha1:bc40a56f8e1cd0ddadf9f24e62f5f35f1d3aa2e8
--! Message: knowledge and settings

-- What the agent knows and how it behaves: FAQs, pricebook, call forwarding, business hours,
-- agent settings, integrations.

create table app.faqs (
  id uuid default gen_random_uuid() not null,
  location_id uuid not null,
  question text not null,
  answer text not null,
  asked_count integer default 0 not null,
  position integer default 0 not null,
  created_at timestamp with time zone default now() not null,
  updated_at timestamp with time zone default now() not null,
  constraint faqs_pkey primary key (id, location_id),
  constraint faqs_question_check check (((length(question) >= 1) AND (length(question) <= 1000))),
  constraint faqs_answer_check check (((length(answer) >= 1) AND (length(answer) <= 5000))),
  constraint faqs_asked_count_check check ((asked_count >= 0)),
  constraint faqs_location_id_fkey foreign key (location_id) references app.locations (id) on delete cascade
);
comment on table app.faqs is E'Questions and answers the agent may read to callers.';
comment on column app.faqs.asked_count is E'How often callers asked it.';
comment on column app.faqs.position is E'Ordering (ascending).';
select app.secure_tenant_table('app.faqs');
create index faqs_location_created_idx on app.faqs (location_id, created_at DESC, id DESC);
create index faqs_location_position_idx on app.faqs (location_id, "position", id);

create table app.pricebook_items (
  id uuid default gen_random_uuid() not null,
  location_id uuid not null,
  service_name text not null,
  price text not null,
  note text,
  position integer default 0 not null,
  created_at timestamp with time zone default now() not null,
  updated_at timestamp with time zone default now() not null,
  constraint pricebook_items_pkey primary key (id, location_id),
  constraint pricebook_items_service_name_check check (((length(service_name) >= 1) AND (length(service_name) <= 200))),
  constraint pricebook_items_price_check check (((length(price) >= 1) AND (length(price) <= 200))),
  constraint pricebook_items_note_check check ((length(note) <= 2000)),
  constraint pricebook_items_location_id_fkey foreign key (location_id) references app.locations (id) on delete cascade
);
comment on table app.pricebook_items is E'Services and their prices, quoted to callers.';
comment on column app.pricebook_items.price is E'Free text such as "$89-$149"; deliberately not a number.';
comment on column app.pricebook_items.position is E'Ordering (ascending).';
select app.secure_tenant_table('app.pricebook_items');
create index pricebook_items_location_created_idx on app.pricebook_items (location_id, created_at DESC, id DESC);
create index pricebook_items_location_position_idx on app.pricebook_items (location_id, "position", id);

create table app.call_forwarding (
  location_id uuid not null,
  mode text default 'off'::text not null,
  existing_business_line app.e164,
  updated_at timestamp with time zone default now() not null,
  constraint call_forwarding_pkey primary key (location_id),
  constraint call_forwarding_mode_check check ((mode = ANY (ARRAY['replace'::text, 'no_answer'::text, 'busy'::text, 'after_hours'::text, 'off'::text]))),
  constraint call_forwarding_location_id_fkey foreign key (location_id) references app.locations (id) on delete cascade
);
comment on table app.call_forwarding is E'How the business line reaches the agent: replace | no_answer | busy | after_hours | off.';
comment on column app.call_forwarding.existing_business_line is E'The business''s own number that forwards to the service phone.';
select app.secure_tenant_table('app.call_forwarding');

create table app.business_hours (
  id uuid default gen_random_uuid() not null,
  location_id uuid not null,
  day smallint not null,
  open app.hhmm not null,
  close app.hhmm not null,
  constraint business_hours_pkey primary key (id, location_id),
  constraint business_hours_location_id_day_open_key unique (location_id, day, open),
  constraint business_hours_day_check check (((day >= 0) AND (day <= 6))),
  constraint business_hours_check check (((open)::text < (close)::text)),
  constraint business_hours_location_id_fkey foreign key (location_id) references app.locations (id) on delete cascade
);
comment on table app.business_hours is E'Opening intervals per weekday (0 = Sunday) in the location''s timezone; a day without rows is closed.';
select app.secure_tenant_table('app.business_hours');

create table app.agent_settings (
  location_id uuid not null,
  greeting text,
  transfer_number app.e164,
  emergency_keywords text[] default '{}'::text[] not null,
  booking_enabled boolean default true not null,
  blocked_numbers text[] default '{}'::text[] not null,
  updated_at timestamp with time zone default now() not null,
  constraint agent_settings_pkey primary key (location_id),
  constraint agent_settings_greeting_check check ((length(greeting) <= 1000)),
  constraint agent_settings_location_id_fkey foreign key (location_id) references app.locations (id) on delete cascade
);
comment on table app.agent_settings is E'How the voice agent behaves for a location.';
comment on column app.agent_settings.transfer_number is E'Where warm transfers go.';
comment on column app.agent_settings.emergency_keywords is E'Words that make a call urgent.';
comment on column app.agent_settings.blocked_numbers is E'E.164 callers rejected before the agent answers (recorded as spam).';
select app.secure_tenant_table('app.agent_settings');

create table app.integrations (
  id uuid default gen_random_uuid() not null,
  location_id uuid not null,
  provider text not null,
  status text default 'connected'::text not null,
  label text,
  webhook_url app.https_url,
  external_id text,
  expires_at timestamp with time zone,
  config jsonb default '{}'::jsonb not null,
  access_token text,
  refresh_token text,
  connected_at timestamp with time zone,
  disconnected_at timestamp with time zone,
  last_synced_at timestamp with time zone,
  last_error text,
  created_at timestamp with time zone default now() not null,
  updated_at timestamp with time zone default now() not null,
  constraint integrations_pkey primary key (id, location_id),
  constraint integrations_provider_check check ((provider = ANY (ARRAY['slack'::text, 'zapier'::text, 'make'::text, 'n8n'::text, 'calcom'::text, 'google_calendar'::text, 'outlook'::text, 'jobber'::text, 'housecall_pro'::text, 'servicetitan'::text, 'hubspot'::text]))),
  constraint integrations_status_check check ((status = ANY (ARRAY['connected'::text, 'disconnected'::text, 'error'::text, 'expired'::text]))),
  constraint integrations_label_check check ((length(label) <= 200)),
  constraint integrations_location_id_fkey foreign key (location_id) references app.locations (id) on delete cascade
);
comment on table app.integrations is E'Third-party connections. Webhook-style providers (slack, zapier, make, n8n, calcom) post to webhook_url.';
comment on column app.integrations.status is E'connected | disconnected | error | expired; one connected row per provider.';
comment on column app.integrations.access_token is E'@behavior -select -filterBy -orderBy\nOAuth access token; never returned by any API.';
comment on column app.integrations.refresh_token is E'@behavior -select -filterBy -orderBy\nOAuth refresh token; never returned by any API.';
select app.secure_tenant_table('app.integrations');
create unique index integrations_one_connected_key on app.integrations (location_id, provider) WHERE (status = 'connected'::text);
create index integrations_location_created_idx on app.integrations (location_id, created_at DESC, id DESC);

create type app.faq_shape as (
  id uuid,
  location_id uuid,
  question text,
  answer text,
  asked_count integer,
  position integer,
  created_at text,
  updated_at text
);
comment on type app.faq_shape is E'The fields of the API''s faq record, in order.';

create function app.faq_js(f app.faqs)
 RETURNS json
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$
  select to_json(row(
    f.id, f.location_id, f.question, f.answer, f.asked_count, f.position, app.iso(f.created_at),
    app.iso(f.updated_at))::app.faq_shape)
$function$;
comment on function app.faq_js(app.faqs) is E'FAQ as the API shows it, as json text.';

create function app.faq_json(f app.faqs)
 RETURNS jsonb
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$ select app.faq_js(f)::jsonb $function$;
comment on function app.faq_json(app.faqs) is E'FAQ as the API shows it.';

create type app.pricebook_item_shape as (
  id uuid,
  location_id uuid,
  service_name text,
  price text,
  note text,
  position integer,
  created_at text,
  updated_at text
);
comment on type app.pricebook_item_shape is E'The fields of the API''s pricebook item record, in order.';

create function app.pricebook_item_js(p app.pricebook_items)
 RETURNS json
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$
  select to_json(row(
    p.id, p.location_id, p.service_name, p.price, p.note, p.position, app.iso(p.created_at),
    app.iso(p.updated_at))::app.pricebook_item_shape)
$function$;
comment on function app.pricebook_item_js(app.pricebook_items) is E'Pricebook item as the API shows it (price is free text), as json text.';

create function app.pricebook_item_json(p app.pricebook_items)
 RETURNS jsonb
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$ select app.pricebook_item_js(p)::jsonb $function$;
comment on function app.pricebook_item_json(app.pricebook_items) is E'Pricebook item as the API shows it (price is free text).';

create type app.integration_shape as (
  id uuid,
  location_id uuid,
  provider text,
  status text,
  label text,
  external_id text,
  expires_at text,
  config jsonb,
  connected_at text,
  disconnected_at text,
  last_synced_at text,
  last_error text,
  created_at text,
  updated_at text
);
comment on type app.integration_shape is E'The fields of the API''s integration record, in order.';

create function app.integration_js(i app.integrations)
 RETURNS json
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$
  select to_json(row(
    i.id, i.location_id, i.provider, i.status, i.label, i.external_id, app.iso(i.expires_at),
    i.config, app.iso(i.connected_at), app.iso(i.disconnected_at), app.iso(i.last_synced_at),
    i.last_error, app.iso(i.created_at), app.iso(i.updated_at))::app.integration_shape)
$function$;
comment on function app.integration_js(app.integrations) is E'Integration as the API shows it, as json text: never access or refresh tokens, never webhook_url (a secret for Slack).';

create function app.integration_json(i app.integrations)
 RETURNS jsonb
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$ select app.integration_js(i)::jsonb $function$;
comment on function app.integration_json(app.integrations) is E'Integration as the API shows it: never access or refresh tokens, never webhook_url (a secret for Slack).';

create function app.agent_settings_json(s app.agent_settings)
 RETURNS jsonb
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$
  select jsonb_build_object(
    'location_id', s.location_id, 'greeting', s.greeting, 'transfer_number', s.transfer_number,
    'emergency_keywords', to_jsonb(s.emergency_keywords), 'booking_enabled', s.booking_enabled,
    'blocked_numbers', to_jsonb(s.blocked_numbers), 'updated_at', app.iso(s.updated_at))
$function$;
comment on function app.agent_settings_json(app.agent_settings) is E'Agent settings as the API shows them.';

create function app.call_forwarding_json(f app.call_forwarding, service_phone text)
 RETURNS jsonb
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$
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
$function$;
comment on function app.call_forwarding_json(app.call_forwarding,text) is E'Call forwarding plus carrier-agnostic set-up instructions for its mode.';

create function app.business_hours_json(location_id uuid)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
AS $function$
  select coalesce(jsonb_agg(jsonb_build_object('day', h.day, 'open', h.open, 'close', h.close)
                            order by h.day, h.open), '[]')
    from app.business_hours h where h.location_id = business_hours_json.location_id
$function$;
comment on function app.business_hours_json(uuid) is E'Business hours as [{ day, open, close }], by day then opening time.';

create function app.oauth_providers()
 RETURNS text[]
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$ select array['google_calendar', 'outlook', 'jobber', 'housecall_pro', 'servicetitan', 'hubspot'] $function$;
comment on function app.oauth_providers() is E'Providers connected by their own OAuth redirect flow, never by POST integrations.';

create function app_private.open_minutes(location_id uuid)
 RETURNS int4multirange
 LANGUAGE sql
 STABLE
AS $function$
  select coalesce(range_agg(int4range(
           h.day * 1440 + (date_part('hour', h.open::time) * 60 + date_part('minute', h.open::time))::int,
           h.day * 1440 + (date_part('hour', h.close::time) * 60 + date_part('minute', h.close::time))::int)), '{}')
    from app.business_hours h where h.location_id = open_minutes.location_id
$function$;
comment on function app_private.open_minutes(uuid) is E'Business hours as minutes of the week (Sunday 00:00 = 0): insights test each call with one multirange containment.';

-- Triggers (name prefix = firing order; see migrations/CONVENTIONS.md)
create trigger _100_set_updated_at BEFORE UPDATE ON app.faqs FOR EACH ROW
  execute function app.tg__set_updated_at();
create trigger _100_set_updated_at BEFORE UPDATE ON app.pricebook_items FOR EACH ROW
  execute function app.tg__set_updated_at();
create trigger _100_set_updated_at BEFORE UPDATE ON app.call_forwarding FOR EACH ROW
  execute function app.tg__set_updated_at();
create trigger _100_set_updated_at BEFORE UPDATE ON app.agent_settings FOR EACH ROW
  execute function app.tg__set_updated_at();
create trigger _100_set_updated_at BEFORE UPDATE ON app.integrations FOR EACH ROW
  execute function app.tg__set_updated_at();

-- Caller-data privacy settings per location (docs/privacy.md). A location without a row has the
-- defaults: redaction on, content and personal data kept until erased.
create table app.privacy_settings (
  location_id uuid not null,
  redact_sensitive_data boolean default true not null,
  content_retention_days integer,
  personal_data_retention_days integer,
  updated_at timestamp with time zone default now() not null,
  constraint privacy_settings_pkey primary key (location_id),
  constraint privacy_settings_content_retention_days_check check ((content_retention_days between 1 and 36500)),
  constraint privacy_settings_personal_data_retention_days_check check ((personal_data_retention_days between 1 and 36500)),
  constraint privacy_settings_location_id_fkey foreign key (location_id) references app.locations (id) on delete cascade
);
comment on table app.privacy_settings is E'Caller-data redaction and retention of a location; no row means the defaults.';
comment on column app.privacy_settings.redact_sensitive_data is E'Card numbers, security codes, expiry dates and SSNs are replaced at ingestion.';
comment on column app.privacy_settings.content_retention_days is E'Days after which a call''s transcript, turns, recording and log URLs are cleared; null keeps them.';
comment on column app.privacy_settings.personal_data_retention_days is E'Days after which caller personal data is anonymised; null keeps it.';
select app.secure_tenant_table('app.privacy_settings');

create or replace function app.tg_locations__defaults()
 returns trigger
 language plpgsql
as $function$
begin
  insert into app.call_forwarding (location_id) values (new.id);
  insert into app.agent_settings (location_id) values (new.id);
  insert into app.notification_settings (location_id) values (new.id);
  insert into app.privacy_settings (location_id) values (new.id);
  return null;
end
$function$;
comment on function app.tg_locations__defaults() is E'Creates the call forwarding, agent, notification and privacy settings rows of a new location.';

insert into app.privacy_settings (location_id) select id from app.locations on conflict do nothing;

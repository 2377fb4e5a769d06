-- ==== Caller data: live-call tool redaction ====

-- Live-call tools: whether the location a call dialled redacts sensitive numbers. Asked by the tool
-- route only when its scan of the tool's free-text arguments found a card number, security code or
-- SSN (docs/privacy.md "Redaction at ingestion").
create or replace function app.voice_redacts(to_number text)
 returns boolean
 language sql
 stable security definer
 set search_path to 'pg_catalog', 'public', 'pg_temp'
as $function$
  select coalesce((select p.redact_sensitive_data
                     from app.locations l join app.privacy_settings p on p.location_id = l.id
                    where l.service_phone = voice_redacts.to_number), true)
$function$;
alter function app.voice_redacts(text) owner to switchboard_system;
comment on function app.voice_redacts(text) is E'Live-call tools: whether the location answering to_number redacts card numbers, security codes and SSNs (app.privacy_settings.redact_sensitive_data; true, the default, when no location or setting is found). The tool route asks only when its scan found something (docs/privacy.md "Redaction at ingestion").';
revoke execute on function app.voice_redacts(text) from public;

/**
 * The concerns of the re-baselined chain, in dependency order: each object of our schemas is
 * matched to the first concern whose `match(kind, name)` accepts it (kind: table, type or
 * function; name: schema.name, functions with their argument types). An object no concern
 * accepts stops generate.mjs, so a new area gets its place here on purpose.
 */
const PRELUDE = `
-- Roles are cluster-wide, so they are created only when missing.
do $$
begin
  if not exists (select from pg_roles where rolname = 'switchboard_api') then
    create role switchboard_api nologin noinherit;
  end if;
  if not exists (select from pg_roles where rolname = 'switchboard_staff') then
    create role switchboard_staff nologin;
  end if;
  if not exists (select from pg_roles where rolname = 'switchboard_system') then
    create role switchboard_system nologin;
  end if;
  -- The staff roles (staff-access concern): app.secure_tenant_table grants to them from file 2 on.
  if not exists (select from pg_roles where rolname = 'switchboard_staff_viewer') then
    create role switchboard_staff_viewer nologin;
  end if;
  if not exists (select from pg_roles where rolname = 'switchboard_staff_operator') then
    create role switchboard_staff_operator nologin;
  end if;
  if not exists (select from pg_roles where rolname = 'switchboard_staff_admin') then
    create role switchboard_staff_admin nologin;
  end if;
end
$$;
comment on role switchboard_api is E'Role of the public REST layer: sees one location at a time, through RLS.';
comment on role switchboard_staff is E'Role of the internal GraphQL: sees every location and billing.';
comment on role switchboard_system is E'Owner of the few SECURITY DEFINER functions that must look across locations (token lookup, phone routing, CLI).';

-- The connecting (migrator) role switches into these per connection or per request.
grant switchboard_api, switchboard_staff, switchboard_system to current_user;

create extension if not exists pgcrypto;
`;
const STAFF_PRELUDE = `
-- The staff roles (docs/staff.md), also created by the first file's prelude because
-- app.secure_tenant_table grants to them. switchboard_staff is their group: schema usage and the
-- staff read policy, no table privileges of its own.
do $$
begin
  if not exists (select from pg_roles where rolname = 'switchboard_staff_viewer') then
    create role switchboard_staff_viewer nologin;
  end if;
  if not exists (select from pg_roles where rolname = 'switchboard_staff_operator') then
    create role switchboard_staff_operator nologin;
  end if;
  if not exists (select from pg_roles where rolname = 'switchboard_staff_admin') then
    create role switchboard_staff_admin nologin;
  end if;
end
$$;
comment on role switchboard_staff is E'Group of the three staff roles (viewer, operator, admin): schema usage and the staff read policy; no table privileges of its own.';
comment on role switchboard_staff_viewer is E'Staff GraphQL, viewer: reads every location without caller content (transcripts, recordings, log URLs, caller e-mail and street address, event payloads).';
comment on role switchboard_staff_operator is E'Staff GraphQL, operator: reads every location, caller content included; writes nothing.';
comment on role switchboard_staff_admin is E'Staff GraphQL, admin: reads and writes every location; never secrets or credentials.';
grant switchboard_staff to switchboard_staff_viewer, switchboard_staff_operator, switchboard_staff_admin;
grant switchboard_staff_viewer, switchboard_staff_operator, switchboard_staff_admin to current_user;
`;
const nm = (name) => name.split('(')[0];
const inList = (list) => (kind, name) => list.includes(nm(name));
const re = (r) => (kind, name) => r.test(nm(name));
const or = (...fs) => (k, n) => fs.some((f) => f(k, n));
// REST operations of the caller-data lifecycle live with its tables, not in rest-api (they need them).
const PRIVACY_API = ['api.data_retention_get', 'api.data_retention_patch', 'api.erasure_create', 'api.erasure_get', 'api.erasures_list', 'api.caller_data_get'];
export const CONCERNS = [
  { file: 'roles-schemas-and-shared-helpers', schemas: ['app', 'api', 'admin', 'app_private'], prelude: PRELUDE,
    match: or(inList(['app.e164', 'app.https_url', 'app.hhmm', 'app.page_cursor', 'app.current_location_id', 'app.iso', 'app.mask_phone', 'app.is_valid_timezone', 'app.known_scopes', 'app.event_types', 'app.raise', 'app.tg__set_updated_at', 'app.secure_tenant_table', 'app.enqueue', 'app.dequeue', 'app.worker_unlock', 'app_private.deferred_jobs', 'app.wakeups_deferred', 'app.engine_wake', 'app.flush_deferred_jobs', 'app.uuid_or_null', 'app.cursor_encode', 'app.page_limit', 'app.page_after', 'app.page_result', 'app.page_item', 'app.before_cursor', 'api.ready'])) },
  { file: 'locations-members-api-keys',
    match: inList(['app.locations', 'app.members', 'app.api_keys', 'app.auth', 'app.location_shape', 'app.member_shape', 'app.api_key_shape', 'app.location_json', 'app.location_js', 'app.api_key_json', 'app.api_key_js', 'app.member_json', 'app.member_js', 'app.tg_locations__defaults', 'app.authorize', 'admin.resolve_location', 'admin.location_create', 'admin.location_list', 'admin.key_create', 'admin.key_list', 'admin.key_revoke', 'admin.member_invite', 'app_private.tg__auth_cache_notify']) },
  { file: 'events-customers-calls-leads-bookings',
    match: inList(['app.customers', 'app.events', 'app.calls', 'app.leads', 'app.bookings', 'app.emit', 'app.lead_allowed_moves', 'app.booking_allowed_moves', 'app.tg_leads__status_transition', 'app.tg_bookings__status_transition', 'app.call_summary_shape', 'app.lead_shape', 'app.booking_shape', 'app.call_summary_json', 'app.call_summary_js', 'app.lead_json', 'app.lead_js', 'app.booking_json', 'app.booking_js', 'app.tg_leads__events', 'app.tg_bookings__events', 'app.call_detail_json', 'app.check_member']) },
  { file: 'knowledge-and-settings',
    match: inList(['app.faqs', 'app.pricebook_items', 'app.call_forwarding', 'app.business_hours', 'app.agent_settings', 'app.integrations', 'app.faq_shape', 'app.pricebook_item_shape', 'app.integration_shape', 'app.faq_json', 'app.faq_js', 'app.pricebook_item_json', 'app.pricebook_item_js', 'app.integration_json', 'app.integration_js', 'app.agent_settings_json', 'app.call_forwarding_json', 'app.business_hours_json', 'app.oauth_providers', 'app_private.open_minutes']) },
  { file: 'notification-settings-and-log',
    match: or(inList(['app.notification_settings', 'app.notifications', 'app.notification_log', 'app.tg_events__notify', 'app.operational_notification_types', 'app.notification_types', 'app.notification_fanout', 'app.notification_channels', 'app.notification_routes_default', 'app.notification_routes_valid', 'app.emails_valid']), re(/^(app\.notification_|api\.notification)/)) },
  { file: 'webhooks-and-delivery-engine',
    match: or(inList(['app.webhook_endpoints', 'app.webhook_deliveries', 'app.tg_events__body', 'app.tg_events__webhook_fanout', 'app.tg_webhook_endpoints__reenable', 'app.retention_prune']), re(/^(app\.webhook_|api\.webhook_)/)) },
  { file: 'voice-ingestion', match: re(/^app\.voice_/) },
  { file: 'billing', schemas: ['billing'], match: re(/^billing\./) },
  { file: 'rest-api', match: (k, n) => k === 'function' && /^api\./.test(nm(n)) && nm(n) !== 'api.insights' && !PRIVACY_API.includes(nm(n)) },
  { file: 'insights-rollup', match: or(re(/^app\.insights_|^app_private\.(insights_|tg_|after_hours)/), inList(['app.tg_calls__after_hours', 'api.insights'])) },
  { file: 'demo-seeding', match: re(/^admin\.demo_seed_/) },
  { file: 'caller-data-privacy',
    match: or(inList(['app.privacy_settings', 'app.erasures', 'app.erasure_platform_calls', 'app.privacy_match', 'app.data_retention_json', 'admin.erasure_create', ...PRIVACY_API]),
              re(/^app\.(privacy_|erasure_)/)) },
  { file: 'idempotency-keys-and-shared-rate-limit',
    match: inList(['app_private.idempotency_keys', 'app.idempotency_location', 'app.idempotency_begin', 'app.idempotency_finish', 'app_private.rate_limits', 'app.rate_limit_take', 'app.idempotency_prune']) },
  { file: 'operations-metrics', match: inList(['app.metrics_queues']) },
  { file: 'staff-access', schemas: ['staff'], prelude: STAFF_PRELUDE,
    match: or(re(/^staff\.|^admin\.staff_/), inList(['app.staff_hide_columns', 'app.staff_hide_table'])) },
];
export const HEADERS = [];
HEADERS.push(
`-- Roles, schemas and the helpers every other file uses: the tenant setting, timestamp and phone
-- formats, our SQLSTATEs (app.raise; migrations/CONVENTIONS.md maps each to HTTP), the standard
-- tenant-table security (app.secure_tenant_table), the only doors into graphile-worker
-- (app.enqueue, app.dequeue, app.worker_unlock) and keyset pagination.`,
`-- Locations (the tenant, a reference table when distributed), members, API keys (token look-up by
-- hash), the token check every REST call starts with (app.authorize) and the CLI's functions.`,
`-- The events outbox and the records a call produces: customers, calls, leads, bookings; their
-- status graphs, their JSON shapes, and the triggers that write lead and booking events.`,
`-- What the agent knows and how it behaves: FAQs, pricebook, call forwarding, business hours,
-- agent settings, integrations.`,
`-- Notifications (docs/notifications.md): routing settings, one row per message with its log, the
-- fan-out from events and operational notices, and the lane's claim / record / release / sweep.`,
`-- Outbound webhooks and the delivery engine (docs/webhooks.md, docs/delivery-engine.md):
-- endpoints, one row per delivery attempt, fan-out from events, leases, health, retention, and the
-- endpoint API.`,
`-- Voice platform ingestion (docs/voice-integration.md): inbound routing by service phone, post-call
-- webhooks, finalisation of a call into customer, lead, booking and events.`,
`-- Billing (Stripe sync): schema billing, which the API role cannot see; staff read it.`,
`-- The REST API (docs/rest-api.md): one function per operation. Each authenticates the token
-- (app.authorize), checks the scope, pins the tenant and answers JSON built in SQL.`,
`-- Insights from a rollup kept by triggers (docs/rest-api.md "Insights"): after-hours flag, hourly
-- and per-service counts with a journal, rebuild on timezone change, the figures and GET insights.`,
`-- Demo seeding for the CLI (\`demo seed\`): history, not live traffic (app.seeding suppresses events).`,
`-- Caller-data lifecycle (docs/privacy.md): privacy settings (redaction, retention windows), the
-- retention prune, erasure of one caller (records, per-call voice-platform deletions,
-- customer.erased) and the export of what is held about a caller.`,
`-- Idempotency-Key on token-API POSTs (answers stored per location for 24 h, in the write's
-- transaction) and the per-key rate limit shared by every API process (docs/rest-api.md).`,
`-- Operations (docs/operations.md): the queue gauges one metrics scrape reads (app.metrics_queues).`,
`-- Staff access (docs/staff.md): staff identities and tokens (hashes only), the roles' column
-- grants (app.staff_hide_columns, app.staff_hide_table), the append-only audit of the staff
-- GraphQL and its prune, and the CLI's staff functions.`,
);
// Triggers whose WHEN clause reads better as written than as deparsed (a row comparison).
export const TRIGGER_SOURCE = {
  'app.calls._300_insights_update': `
create trigger _300_insights_update after update on app.calls
  for each row when ((old.location_id, old.direction, old.started_at, old.outcome, old.is_emergency, old.after_hours,
                      old.service_type, old.estimated_value)
                     is distinct from
                     (new.location_id, new.direction, new.started_at, new.outcome, new.is_emergency, new.after_hours,
                      new.service_type, new.estimated_value))
  execute function app_private.tg_calls__insights();`,
};

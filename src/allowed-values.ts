/**
 * Every list of allowed values the TypeScript side names, once. SQL is the source of each list
 * (a CHECK constraint or an immutable `app.*()` function, named beside each constant); these
 * constants only mirror it, so zod schemas, the OpenAPI document, the event catalog, the CLI and
 * the tests import them instead of spelling values out. test/db/allowed-values.test.ts reads each
 * list from the migrated database's catalog and fails, naming the list and the differing values,
 * when the two disagree (docs/decisions.md, "Allowed-value lists").
 */

/** `app.locations.industry` CHECK. */
export const industries = [
  'hvac', 'plumbing', 'electrical', 'roofing', 'appliance_repair', 'garage_door', 'pest_control',
  'landscaping', 'cleaning', 'general_contractor', 'other',
] as const;

/** `app.known_scopes()`: every API token scope. */
export const scopes = [
  'locations:read', 'locations:write', 'api_keys:read', 'calls:read', 'transcripts:read',
  'recordings:read', 'leads:read', 'leads:write', 'bookings:read', 'bookings:write',
  'insights:read', 'faqs:read', 'faqs:write', 'pricebook:read', 'pricebook:write',
  'settings:read', 'settings:write', 'integrations:read', 'integrations:write',
  'webhooks:read', 'webhooks:write', 'notifications:read', 'members:read',
  'privacy:read', 'privacy:write',
] as const;

/*
 * The event types (`app.event_types()`, the `app.events.type` CHECK and `app.notification_types()`)
 * are not spelled here: src/webhooks/events.ts derives `eventTypes`, `deliveryEventTypes` and
 * `notificationTypes` from its catalog, so an event is added in one TypeScript place, its catalog
 * entry (test/db/allowed-values.test.ts compares them with SQL all the same).
 */

/** `app.operational_notification_types()`: notifications that are not events (never webhooks). */
export const operationalNotificationTypes = ['webhook_endpoint.failing', 'webhook_endpoint.disabled', 'integration.expired'] as const;

/** `app.oauth_providers()`: connected by their own OAuth redirect flow, never by POST integrations. */
export const oauthProviders = ['google_calendar', 'outlook', 'jobber', 'housecall_pro', 'servicetitan', 'hubspot'] as const;
/** Webhook-style integration providers: the `app.integrations.provider` CHECK less `app.oauth_providers()`. */
export const webhookProviders = ['slack', 'zapier', 'make', 'n8n', 'calcom'] as const;
/** `app.integrations.provider` CHECK. */
export const integrationProviders = [...webhookProviders, ...oauthProviders] as const;
/** `app.integration_oauth_states.provider` CHECK: the providers connected through a redirect flow here. */
export const redirectProviders = ['jobber', 'housecall_pro'] as const;
/** `app.integration_syncs.record_type` CHECK. */
export const syncRecordTypes = ['lead', 'booking'] as const;
/** `app.integration_syncs.action` CHECK. */
export const syncActions = ['create', 'update'] as const;
/** `app.integration_syncs.status` CHECK. */
export const syncStatuses = ['pending', 'synced', 'failed'] as const;
/** `app.integrations.status` CHECK. */
export const integrationStatuses = ['connected', 'disconnected', 'error', 'expired'] as const;

/** `app.notification_channels()` and the `app.notifications.channel` CHECK. */
export const notificationChannels = ['sms', 'email', 'chat', 'automation'] as const;
/** `app.notifications.status` and `app.notification_log.status` CHECKs. */
export const notificationStatuses = ['pending', 'sent', 'failed', 'skipped'] as const;

/**
 * `app.notifications.provider` CHECK: twilio (sms), smtp (email), the integration's provider (chat,
 * automation), or `automation` for an automation notification skipped for want of an integration.
 */
export const notificationProviders = ['twilio', 'smtp', ...webhookProviders, 'automation'] as const;

/** `app.calls.outcome` CHECK. */
export const callOutcomes = ['booked', 'transferred', 'lead', 'spam', 'dropped', 'other'] as const;
/** `app.calls.direction` CHECK. */
export const callDirections = ['inbound', 'outbound'] as const;
/** `app.leads.status` CHECK (moves: app.lead_allowed_moves). */
export const leadStatuses = ['new', 'contacted', 'booked', 'closed', 'lost'] as const;
/** `app.bookings.status` CHECK (moves: app.booking_allowed_moves). */
export const bookingStatuses = ['scheduled', 'confirmed', 'completed', 'cancelled', 'no_show'] as const;
/** `app.bookings.source` CHECK. */
export const bookingSources = ['call', 'agent_tool', 'api'] as const;
/** `app.call_transfers.status` CHECK: the voice platform's transfer_* events. */
export const transferStatuses = ['started', 'bridged', 'cancelled', 'ended'] as const;
/** `app.members.role` CHECK. */
export const memberRoles = ['owner', 'admin', 'member'] as const;
/** `app.call_forwarding.mode` CHECK. */
export const forwardingModes = ['replace', 'no_answer', 'busy', 'after_hours', 'off'] as const;

/** `app.erasures.status` CHECK (docs/privacy.md). */
export const erasureStatuses = ['processing', 'completed', 'completed_with_failures'] as const;
/** `app.erasures.source` CHECK. */
export const erasureSources = ['api', 'cli'] as const;
/** `app.erasure_platform_calls.status` CHECK. */
export const platformDeletionStatuses = ['pending', 'deleted', 'failed'] as const;

/** `app.webhook_deliveries.status` CHECK. */
export const deliveryStatuses = ['pending', 'delivered', 'failed', 'dead'] as const;

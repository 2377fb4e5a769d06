import { z } from 'zod';
import { defineArea, defineRoute, LocationParams, page, pageQuery, type RouteSpec } from '../route.js';
import { e164, patchOf, timestamp, uuid } from '../schemas.js';

import { notificationChannels, notificationProviders, notificationStatuses } from '../../allowed-values.js';
import { notificationTypes } from '../../webhooks/events.js';

const Channel = z.enum(notificationChannels);
const ChannelList = z
  .array(Channel)
  .max(notificationChannels.length)
  .refine((l) => new Set(l).size === l.length, 'Channels must not repeat')
  .meta({ id: 'NotificationChannels', uniqueItems: true });

const routesShape = Object.fromEntries(notificationTypes.map((t) => [t, ChannelList])) as Record<
  (typeof notificationTypes)[number],
  typeof ChannelList
>;

export const NotificationSettings = z.object({
  location_id: uuid,
  routes: z.object(routesShape).describe('{ type: [channels] } for every event type and the operational types webhook_endpoint.failing / webhook_endpoint.disabled; an empty list sends nothing'),
  sms_recipients: z.array(z.string()).describe('E.164 numbers texted besides the owner cell'),
  email_recipients: z.array(z.string()).describe('Addresses e-mailed besides owner and admin members'),
  updated_at: timestamp,
}).meta({ id: 'NotificationSettings' });

const distinct = <T>(l: T[]) => new Set(l.map((x) => String(x).toLowerCase())).size === l.length;

export const NotificationSettingsPatch = patchOf({
    routes: z.strictObject(routesShape).partial().describe('Event types named here replace their channel list; others stay'),
    sms_recipients: z.array(e164).max(20).refine(distinct, 'Numbers must not repeat').meta({ uniqueItems: true }),
    email_recipients: z.array(z.email().max(320)).max(20).refine(distinct, 'Addresses must not repeat (ignoring case)')
      .meta({ uniqueItems: true }),
  }).meta({ id: 'NotificationSettingsUpdate' });

const LogEntry = z.object({
  at: timestamp,
  status: z.enum(notificationStatuses),
  detail: z.string().nullable(),
  response_status: z.number().int().nullable(),
}).meta({ id: 'NotificationAttempt' });

export const Notification = z.object({
  id: uuid,
  location_id: uuid,
  event_id: uuid.nullable().describe('The event notified about; null for an operational notification'),
  event: z.enum(notificationTypes).describe('The event type, or an operational type (webhook_endpoint.failing, webhook_endpoint.disabled, integration.expired); the list may grow'),
  channel: Channel,
  provider: z.enum(notificationProviders),
  recipient: z.string().nullable(),
  status: z.enum(notificationStatuses),
  attempts: z.number().int(),
  created_at: timestamp,
  updated_at: timestamp,
  log: z.array(LogEntry).optional().describe('Only with include=log: each try, oldest first'),
}).meta({ id: 'Notification' });

const NotificationsQuery = z.object({
  ...pageQuery,
  include: z.enum(['log']).optional(),
});

export const notificationRoutes: RouteSpec[] = [
  defineRoute({
    operationId: 'getNotificationSettings', method: 'get', path: '/locations/:locationId/notification-settings', tag: 'Notifications', scope: 'settings:read',
    summary: 'Which events notify which channels, and the extra recipients',
    params: LocationParams, response: NotificationSettings,
    handler: ({ call, token, params }) => call('api.notification_settings_get', token, params.locationId),
  }),
  defineRoute({
    operationId: 'updateNotificationSettings', method: 'patch', path: '/locations/:locationId/notification-settings', tag: 'Notifications', scope: 'settings:write',
    summary: 'Change notification routing or recipients',
    params: LocationParams, body: NotificationSettingsPatch, response: NotificationSettings,
    rules: ['phone_valid', 'emails_distinct'],
    handler: ({ call, token, params, body }) => call('api.notification_settings_patch', token, params.locationId, body),
  }),
  defineRoute({
    operationId: 'listNotifications', method: 'get', path: '/locations/:locationId/notifications', tag: 'Notifications', scope: 'notifications:read', list: true,
    summary: 'Notifications sent (or skipped) for this location, newest first; include=log adds each one\'s tries',
    params: LocationParams, query: NotificationsQuery, response: z.array(Notification),
    handler: ({ call, token, params, query }) =>
      call('api.notifications_list', token, params.locationId, page(query), query.include === 'log'),
  }),
];

export const area = defineArea({
  order: 120,
  tags: {
    Notifications: 'Which events notify which channels, and the notifications sent.',
  },
  routes: notificationRoutes,
});

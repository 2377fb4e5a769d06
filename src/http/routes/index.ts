import type { RouteSpec } from '../route.js';
import { bookingRoutes } from './bookings.js';
import { callRoutes } from './calls.js';
import { coreRoutes } from './core.js';
import { insightRoutes } from './insights.js';
import { integrationRoutes } from './integrations.js';
import { knowledgeRoutes } from './knowledge.js';
import { leadRoutes } from './leads.js';
import { memberRoutes } from './members.js';
import { notificationRoutes } from './notifications.js';
import { privacyRoutes } from './privacy.js';
import { schedulingRoutes } from './scheduling.js';
import { settingsRoutes } from './settings.js';
import { webhookRoutes } from './webhooks.js';

/** Every token endpoint, in documentation order. Each area adds its list here. */
export const routes: RouteSpec[] = [
  ...coreRoutes,
  ...callRoutes, ...leadRoutes, ...bookingRoutes, ...schedulingRoutes, ...knowledgeRoutes, ...settingsRoutes,
  ...integrationRoutes, ...memberRoutes, ...insightRoutes,
  ...webhookRoutes, ...notificationRoutes,
  ...privacyRoutes,
];

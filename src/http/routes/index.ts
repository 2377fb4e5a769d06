import type { RouteSpec } from '../route.js';
import { coreRoutes } from './core.js';
import { notificationRoutes } from './notifications.js';
import { webhookRoutes } from './webhooks.js';

/** Every token endpoint, in documentation order. Each area adds its list here. */
export const routes: RouteSpec[] = [...coreRoutes, ...webhookRoutes, ...notificationRoutes];

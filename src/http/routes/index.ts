import type { RouteSpec } from '../route.js';
import { coreRoutes } from './core.js';
import { notificationRoutes } from './notifications.js';

/** Every token endpoint, in documentation order. Each area adds its list here. */
export const routes: RouteSpec[] = [...coreRoutes, ...notificationRoutes];

/** Scheduling settings and open windows (docs/api-contract.md, "Scheduling"; docs/scheduling.md). */
import { z } from 'zod';
import { defineArea, defineRoute, LocationParams, type RouteSpec } from '../route.js';
import { AvailabilityQuery, AvailabilityWindow, Scheduling, SchedulingPatch } from '../../scheduling/schemas.js';

export const schedulingRoutes: RouteSpec[] = [
  defineRoute({
    operationId: 'getScheduling', method: 'get', path: '/locations/:locationId/scheduling', tag: 'Scheduling', scope: 'settings:read',
    summary: 'Arrival windows: length, capacity, lead time, horizon, closed dates', params: LocationParams, response: Scheduling,
    handler: ({ call, token, params }) => call('api.scheduling_get', token, params.locationId),
  }),
  defineRoute({
    operationId: 'updateScheduling', method: 'patch', path: '/locations/:locationId/scheduling', tag: 'Scheduling', scope: 'settings:write',
    summary: 'Change the arrival windows (bookings already made keep theirs)', params: LocationParams, body: SchedulingPatch, response: Scheduling,
    handler: ({ call, token, params, body }) => call('api.scheduling_patch', token, params.locationId, body),
  }),
  defineRoute({
    operationId: 'listAvailability', method: 'get', path: '/locations/:locationId/availability', tag: 'Scheduling', scope: 'bookings:read',
    summary: 'Open windows (room left), oldest first', params: LocationParams, query: AvailabilityQuery,
    response: z.array(AvailabilityWindow),
    handler: ({ call, token, params, query }) => call('api.availability', token, params.locationId, query.from ?? null, query.days ?? null),
  }),
];

export const area = defineArea({
  order: 50,
  tags: {
    Scheduling: 'Arrival windows: their length, capacity, lead time, horizon and closed dates, and the windows still open.',
  },
  routes: schedulingRoutes,
});

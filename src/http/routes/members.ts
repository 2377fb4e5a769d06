import { z } from 'zod';
import { memberRoles } from '../../allowed-values.js';
import { defineArea, defineRoute, LocationParams, page, pageQuery, type RouteSpec } from '../route.js';
import { ts, tsNull, uuid } from './rest-common.js';

export const Member = z.object({
  id: uuid, location_id: uuid, email: z.string(), name: z.string().nullable(),
  role: z.enum(memberRoles), invited_at: ts, joined_at: tsNull,
}).meta({ id: 'Member' });

export const memberRoutes: RouteSpec[] = [
  defineRoute({
    operationId: 'listMembers', method: 'get', path: '/locations/:locationId/members', tag: 'Members', scope: 'members:read', list: true,
    summary: 'Members of the location, newest first', params: LocationParams, query: z.object(pageQuery), response: z.array(Member),
    handler: ({ call, token, params, query }) => call('api.members_list', token, params.locationId, page(query)),
  }),
];

export const area = defineArea({
  order: 90,
  tags: {
    Members: 'People with access to the location.',
  },
  routes: memberRoutes,
});

import { z } from 'zod';
import { ApiKey, Location, LocationPatch } from '../schemas.js';
import { defineRoute, LocationParams, page, pageQuery, type RouteSpec } from '../route.js';


export const coreRoutes: RouteSpec[] = [
  defineRoute({
    method: 'get', path: '/me', tag: 'Me', scope: null,
    summary: 'The calling API key, its location and scopes',
    response: z.object({ api_key: ApiKey, location: Location, scopes: z.array(z.string()) }),
    handler: ({ call, token }) => call('api.me', token),
  }),
  defineRoute({
    method: 'get', path: '/locations', tag: 'Locations', scope: 'locations:read', list: true,
    summary: 'Locations the token can access (its own)',
    query: z.object(pageQuery),
    response: z.array(Location),
    handler: ({ call, token, query }) => call('api.locations_list', token, page(query)),
  }),
  defineRoute({
    method: 'get', path: '/locations/:locationId', tag: 'Locations', scope: 'locations:read',
    summary: 'Location profile', params: LocationParams, response: Location,
    handler: ({ call, token, params }) => call('api.location_get', token, params.locationId),
  }),
  defineRoute({
    method: 'patch', path: '/locations/:locationId', tag: 'Locations', scope: 'locations:write',
    summary: 'Update the location profile', params: LocationParams, body: LocationPatch, conflict: true,
    rules: ['phone_valid', 'timezone_known', 'ipv6_literal'], response: Location,
    handler: ({ call, token, params, body }) => call('api.location_patch', token, params.locationId, body),
  }),
  defineRoute({
    method: 'get', path: '/locations/:locationId/api-keys', tag: 'API keys', scope: 'api_keys:read', list: true,
    summary: 'API keys of the location (listing records; never the token)',
    params: LocationParams, query: z.object(pageQuery), response: z.array(ApiKey),
    handler: ({ call, token, params, query }) => call('api.api_keys_list', token, params.locationId, page(query)),
  }),
];

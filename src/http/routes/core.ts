import { z } from 'zod';
import { ApiKey, Location, LocationPatch } from '../schemas.js';
import { defineArea, defineRoute, JsonText, LocationParams, page, pageQuery, type RouteSpec } from '../route.js';


export const coreRoutes: RouteSpec[] = [
  defineRoute({
    operationId: 'getMe', method: 'get', path: '/me', tag: 'Me', scope: null,
    summary: 'The calling API key, its location and scopes',
    response: z.object({ api_key: ApiKey, location: Location, scopes: z.array(z.string()) })
      .meta({ id: 'Me', description: "The key, its location and its scopes; the location's owner_cell (the owner's phone) is null unless the key holds locations:read" }),
    // Answered from the process's auth cache when it holds a fresh entry (src/auth/cache.ts).
    handler: async ({ call, token, authCache }) => {
      if (!authCache) return call('api.me', token);
      const me = await authCache.me(token, async () => ((await call('api.me', token)) as JsonText | null)?.text ?? null);
      return me === null ? null : new JsonText(me);
    },
  }),
  defineRoute({
    operationId: 'listLocations', method: 'get', path: '/locations', tag: 'Locations', scope: 'locations:read', list: true,
    summary: 'Locations the token can access (its own)',
    query: z.object(pageQuery),
    response: z.array(Location),
    handler: ({ call, token, query }) => call('api.locations_list', token, page(query)),
  }),
  defineRoute({
    operationId: 'getLocation', method: 'get', path: '/locations/:locationId', tag: 'Locations', scope: 'locations:read',
    summary: 'Location profile', params: LocationParams, response: Location,
    handler: ({ call, token, params }) => call('api.location_get', token, params.locationId),
  }),
  defineRoute({
    operationId: 'updateLocation', method: 'patch', path: '/locations/:locationId', tag: 'Locations', scope: 'locations:write',
    summary: 'Update the location profile', params: LocationParams, body: LocationPatch, conflict: true,
    rules: ['phone_valid', 'timezone_known', 'ipv6_literal'], response: Location,
    handler: async ({ call, token, params, body, authCache }) => {
      const location = await call('api.location_patch', token, params.locationId, body);
      // This process's cached /me answers of the location go now, not when the NOTIFY arrives.
      if (authCache && location instanceof JsonText) authCache.invalidate((JSON.parse(location.text) as { id: string }).id);
      return location;
    },
  }),
  defineRoute({
    operationId: 'listApiKeys', method: 'get', path: '/locations/:locationId/api-keys', tag: 'API keys', scope: 'api_keys:read', list: true,
    summary: 'API keys of the location (listing records; never the token)',
    params: LocationParams, query: z.object(pageQuery), response: z.array(ApiKey),
    handler: ({ call, token, params, query }) => call('api.api_keys_list', token, params.locationId, page(query)),
  }),
];

export const area = defineArea({
  order: 10,
  tags: {
    Me: 'The calling API key: its location and scopes.',
    Locations: 'The business profile of the token\'s location.',
    'API keys': 'Listing records of the location\'s API keys (never the token).',
  },
  routes: coreRoutes,
});

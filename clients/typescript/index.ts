/**
 * The Switchboard API client for TypeScript: openapi-fetch over the types generated from the
 * OpenAPI document (schema.d.ts, `npm run generate:client`). Every call is typed by its path and
 * method; `data` is the success body, `error` the error envelope (`Error`), both typed.
 *
 *   const api = createSwitchboardClient({ baseUrl: 'https://api.example.com/api/v1', token });
 *   const { data, error } = await api.GET('/locations/{locationId}/leads', { params: { path: { locationId }, query: { status: 'new' } } });
 */
import createClient, { type Client, type ClientOptions } from 'openapi-fetch';
import type { components, operations, paths } from './schema.js';

export type { components, operations, paths };
/** Every named schema of the document (`Schemas['Lead']`, `Schemas['WebhookDelivery']`, …). */
export type Schemas = components['schemas'];
/** The error envelope of every 4xx and 5xx answer. */
export type ApiError = components['schemas']['Error'];
/** A webhook delivery body, by event type (`WebhookEvent<'LeadCreatedEvent'>`). */
export type WebhookEvent<Name extends keyof Schemas & `${string}Event`> = Schemas[Name];

export type SwitchboardClient = Client<paths>;

export function createSwitchboardClient(options: ClientOptions & { token: string }): SwitchboardClient {
  const { token, headers, ...rest } = options;
  return createClient<paths>({ ...rest, headers: { ...(headers as Record<string, string> | undefined), authorization: `Bearer ${token}` } });
}

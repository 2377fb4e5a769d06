import { z } from 'zod';
import { forwardingModes } from '../../allowed-values.js';
import { defineArea, defineRoute, LocationParams, type RouteSpec } from '../route.js';
import { e164, patchOf, text } from '../schemas.js';
import { closingTime, hhmm, ts, uuid } from './rest-common.js';

export const CallForwarding = z.object({
  location_id: uuid,
  mode: z.enum(forwardingModes),
  existing_business_line: z.string().nullable(),
  updated_at: ts,
  instructions: z.object({
    forward_to: z.string().nullable().describe('The service phone calls are forwarded to'),
    summary: z.string(),
    steps: z.array(z.string()),
  }).describe('Carrier-agnostic set-up instructions for the mode'),
}).meta({ id: 'CallForwarding' });
export const CallForwardingPatch = patchOf({ mode: z.enum(forwardingModes), existing_business_line: e164.nullable() })
  .meta({ id: 'CallForwardingUpdate' });

const minutes = (t: string) => Number(t.slice(0, 2)) * 60 + Number(t.slice(3));
export const BusinessHoursInterval = z.strictObject({
  day: z.number().int().min(0).max(6).describe('0 = Sunday'),
  open: hhmm,
  close: closingTime.describe('Closing time; 24:00 is midnight at the end of the day'),
}).meta({ id: 'BusinessHoursInterval', description: 'One opening interval (HH:MM, location time; an interval past midnight is two: to 24:00, and from 00:00 the next day)' });
export const BusinessHours = z
  .array(BusinessHoursInterval.refine((h) => minutes(h.open) < minutes(h.close), { message: 'open must be before close', path: ['close'] }))
  .max(50)
  .superRefine((list, ctx) => {
    list.forEach((a, i) => {
      list.forEach((b, j) => {
        if (j > i && a.day === b.day && minutes(a.open) < minutes(b.close) && minutes(b.open) < minutes(a.close)) {
          ctx.addIssue({ code: 'custom', path: [j], message: `Overlaps interval ${i} on day ${a.day}` });
        }
      });
    });
  })
  .meta({ id: 'BusinessHours', description: 'Opening intervals in the location timezone; days absent are closed' });

export const Agent = z.object({
  location_id: uuid,
  greeting: z.string().nullable(),
  transfer_number: z.string().nullable(),
  emergency_keywords: z.array(z.string()),
  booking_enabled: z.boolean(),
  blocked_numbers: z.array(z.string()),
  updated_at: ts,
}).meta({ id: 'AgentSettings' });
export const AgentPatch = patchOf({
  greeting: z.string().trim().max(1000).nullable(),
  transfer_number: e164.nullable(),
  emergency_keywords: z.array(text(100)).max(100),
  booking_enabled: z.boolean(),
  blocked_numbers: z.array(e164).max(1000).transform((numbers) => [...new Set(numbers)]).describe('Normalised to E.164; a number given twice (in any form) is kept once'),
}).meta({ id: 'AgentSettingsUpdate' });

export const settingsRoutes: RouteSpec[] = [
  defineRoute({
    operationId: 'getCallForwarding', method: 'get', path: '/locations/:locationId/call-forwarding', tag: 'Settings', scope: 'settings:read',
    summary: 'Call forwarding with set-up instructions', params: LocationParams, response: CallForwarding,
    handler: ({ call, token, params }) => call('api.call_forwarding_get', token, params.locationId),
  }),
  defineRoute({
    operationId: 'updateCallForwarding', method: 'patch', path: '/locations/:locationId/call-forwarding', tag: 'Settings', scope: 'settings:write',
    summary: 'Change call forwarding', params: LocationParams, body: CallForwardingPatch, rules: ['phone_valid'], response: CallForwarding,
    handler: ({ call, token, params, body }) => call('api.call_forwarding_patch', token, params.locationId, body),
  }),
  defineRoute({
    operationId: 'getBusinessHours', method: 'get', path: '/locations/:locationId/business-hours', tag: 'Settings', scope: 'settings:read',
    summary: 'Business hours', params: LocationParams, response: BusinessHours,
    handler: ({ call, token, params }) => call('api.business_hours_get', token, params.locationId),
  }),
  defineRoute({
    operationId: 'replaceBusinessHours', method: 'put', path: '/locations/:locationId/business-hours', tag: 'Settings', scope: 'settings:write',
    summary: 'Replace the business hours (an empty array closes every day)', params: LocationParams,
    body: BusinessHours, response: BusinessHours, rules: ['hours_consistent'],
    // The body is an array: pass it as JSON text so pg does not send it as a Postgres array.
    handler: ({ call, token, params, body }) => call('api.business_hours_put', token, params.locationId, JSON.stringify(body)),
  }),
  defineRoute({
    operationId: 'getAgentSettings', method: 'get', path: '/locations/:locationId/agent', tag: 'Settings', scope: 'settings:read',
    summary: 'Agent settings', params: LocationParams, response: Agent,
    handler: ({ call, token, params }) => call('api.agent_get', token, params.locationId),
  }),
  defineRoute({
    operationId: 'updateAgentSettings', method: 'patch', path: '/locations/:locationId/agent', tag: 'Settings', scope: 'settings:write',
    summary: 'Change agent settings', params: LocationParams, body: AgentPatch, rules: ['phone_valid'], response: Agent,
    handler: ({ call, token, params, body }) => call('api.agent_patch', token, params.locationId, body),
  }),
];

export const area = defineArea({
  order: 70,
  tags: {
    Settings: 'Call forwarding, business hours and agent settings.',
  },
  routes: settingsRoutes,
});

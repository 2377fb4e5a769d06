import { z } from 'zod';
import { defineArea, defineRoute, locAnd, LocationParams, page, pageQuery, type RouteSpec } from '../route.js';
import { e164, patchOf } from '../schemas.js';
import { money, text, urgency, uuid } from './rest-common.js';
import { leadStatuses } from '../../allowed-values.js';
import { Lead } from './records.js';

const fields = {
  name: text(200),
  phone: e164,
  email: z.email().max(320).nullable(),
  address: text(500).nullable(),
  service_type: text(200).nullable(),
  urgency_level: urgency,
  estimated_value: money.nullable(),
  notes: z.string().max(10000).nullable(),
  assigned_to: uuid.nullable().describe('A member of this location'),
};

export const LeadCreate = z.strictObject({
  ...fields,
  email: fields.email.optional(),
  address: fields.address.optional(),
  service_type: fields.service_type.optional(),
  urgency_level: urgency.optional(),
  estimated_value: fields.estimated_value.optional(),
  notes: fields.notes.optional(),
  assigned_to: fields.assigned_to.optional(),
}).meta({ id: 'LeadCreate' });

export const LeadPatch = patchOf({
  ...fields,
  status: z.enum(leadStatuses).describe(
    'Allowed moves: new→contacted|booked|closed|lost, contacted→booked|closed|lost, booked→closed|lost, lost→new|contacted; closed is final (else 409 invalid_transition)'),
}).meta({ id: 'LeadUpdate' });

export const leadRoutes: RouteSpec[] = [
  defineRoute({
    operationId: 'listLeads', method: 'get', path: '/locations/:locationId/leads', tag: 'Leads', scope: 'leads:read', list: true,
    summary: 'Leads, newest first', params: LocationParams,
    query: z.object({ ...pageQuery, status: z.enum(leadStatuses).optional() }),
    response: z.array(Lead),
    handler: ({ call, token, params, query }) => call('api.leads_list', token, params.locationId, query.status, page(query)),
  }),
  defineRoute({
    operationId: 'createLead', method: 'post', path: '/locations/:locationId/leads', tag: 'Leads', scope: 'leads:write', status: 201,
    summary: 'Create a lead (fires lead.created; call_id null)', params: LocationParams, body: LeadCreate,
    rules: ['phone_valid', 'member_reference'], response: Lead, callerData: true,
    handler: ({ call, token, params, body }) => call('api.lead_create', token, params.locationId, body),
  }),
  defineRoute({
    operationId: 'getLead', method: 'get', path: '/locations/:locationId/leads/:leadId', tag: 'Leads', scope: 'leads:read',
    summary: 'One lead', params: locAnd('leadId'), response: Lead,
    handler: ({ call, token, params }) => call('api.lead_get', token, params.locationId, params.leadId),
  }),
  defineRoute({
    operationId: 'updateLead', method: 'patch', path: '/locations/:locationId/leads/:leadId', tag: 'Leads', scope: 'leads:write',
    summary: 'Update a lead or move its status (fires lead.updated on a move)',
    params: locAnd('leadId'), body: LeadPatch, response: Lead, conflict: true, rules: ['phone_valid', 'member_reference'],
    handler: ({ call, token, params, body }) => call('api.lead_patch', token, params.locationId, params.leadId, body),
  }),
];

export const area = defineArea({
  order: 30,
  tags: {
    Leads: 'Leads captured from calls or created through the API, and their status moves.',
  },
  routes: leadRoutes,
});

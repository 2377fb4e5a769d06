import { z } from 'zod';
import { defineArea, defineRoute, locAnd, LocationParams, page, pageQuery, type RouteSpec } from '../route.js';
import { ts, uuid } from './rest-common.js';
import { patchOf, text } from '../schemas.js';

const position = z.number().int().min(-1_000_000).max(1_000_000);

export const Faq = z.object({
  id: uuid, location_id: uuid, question: z.string(), answer: z.string(),
  asked_count: z.number().int(), position: z.number().int(), created_at: ts, updated_at: ts,
}).meta({ id: 'Faq' });
const faqFields = { question: text(1000), answer: text(5000), position };
export const FaqCreate = z.strictObject({ ...faqFields, position: position.optional() }).meta({ id: 'FaqCreate' });
export const FaqPatch = patchOf(faqFields).meta({ id: 'FaqUpdate' });

export const PricebookItem = z.object({
  id: uuid, location_id: uuid, service_name: z.string(),
  price: z.string().describe('Free text such as "$89-$149"'), note: z.string().nullable(),
  position: z.number().int(), created_at: ts, updated_at: ts,
}).meta({ id: 'PricebookItem' });
const itemFields = {
  service_name: text(200),
  price: text(200).describe('Free text such as "$89-$149"; not a number'),
  note: z.string().max(2000).nullable(),
  position,
};
export const PricebookCreate = z.strictObject({ ...itemFields, note: itemFields.note.optional(), position: position.optional() })
  .meta({ id: 'PricebookItemCreate' });
export const PricebookPatch = patchOf(itemFields).meta({ id: 'PricebookItemUpdate' });

const FaqParams = locAnd('faqId');
const ItemParams = locAnd('itemId');

export const knowledgeRoutes: RouteSpec[] = [
  defineRoute({
    operationId: 'listFaqs', method: 'get', path: '/locations/:locationId/faqs', tag: 'FAQs', scope: 'faqs:read', list: true,
    summary: 'FAQs, newest first', params: LocationParams, query: z.object(pageQuery), response: z.array(Faq),
    handler: ({ call, token, params, query }) => call('api.faqs_list', token, params.locationId, page(query)),
  }),
  defineRoute({
    operationId: 'createFaq', method: 'post', path: '/locations/:locationId/faqs', tag: 'FAQs', scope: 'faqs:write', status: 201,
    summary: 'Create an FAQ', params: LocationParams, body: FaqCreate, response: Faq,
    handler: ({ call, token, params, body }) => call('api.faq_create', token, params.locationId, body),
  }),
  defineRoute({
    operationId: 'getFaq', method: 'get', path: '/locations/:locationId/faqs/:faqId', tag: 'FAQs', scope: 'faqs:read',
    summary: 'One FAQ', params: FaqParams, response: Faq,
    handler: ({ call, token, params }) => call('api.faq_get', token, params.locationId, params.faqId),
  }),
  defineRoute({
    operationId: 'updateFaq', method: 'patch', path: '/locations/:locationId/faqs/:faqId', tag: 'FAQs', scope: 'faqs:write',
    summary: 'Update an FAQ', params: FaqParams, body: FaqPatch, response: Faq,
    handler: ({ call, token, params, body }) => call('api.faq_patch', token, params.locationId, params.faqId, body),
  }),
  defineRoute({
    operationId: 'deleteFaq', method: 'delete', path: '/locations/:locationId/faqs/:faqId', tag: 'FAQs', scope: 'faqs:write',
    summary: 'Delete an FAQ (returns the removed record)', params: FaqParams, response: Faq,
    handler: ({ call, token, params }) => call('api.faq_delete', token, params.locationId, params.faqId),
  }),
  defineRoute({
    operationId: 'listPricebookItems', method: 'get', path: '/locations/:locationId/pricebook', tag: 'Pricebook', scope: 'pricebook:read', list: true,
    summary: 'Pricebook items, newest first', params: LocationParams, query: z.object(pageQuery), response: z.array(PricebookItem),
    handler: ({ call, token, params, query }) => call('api.pricebook_list', token, params.locationId, page(query)),
  }),
  defineRoute({
    operationId: 'createPricebookItem', method: 'post', path: '/locations/:locationId/pricebook', tag: 'Pricebook', scope: 'pricebook:write', status: 201,
    summary: 'Create a pricebook item', params: LocationParams, body: PricebookCreate, response: PricebookItem,
    handler: ({ call, token, params, body }) => call('api.pricebook_create', token, params.locationId, body),
  }),
  defineRoute({
    operationId: 'getPricebookItem', method: 'get', path: '/locations/:locationId/pricebook/:itemId', tag: 'Pricebook', scope: 'pricebook:read',
    summary: 'One pricebook item', params: ItemParams, response: PricebookItem,
    handler: ({ call, token, params }) => call('api.pricebook_get', token, params.locationId, params.itemId),
  }),
  defineRoute({
    operationId: 'updatePricebookItem', method: 'patch', path: '/locations/:locationId/pricebook/:itemId', tag: 'Pricebook', scope: 'pricebook:write',
    summary: 'Update a pricebook item', params: ItemParams, body: PricebookPatch, response: PricebookItem,
    handler: ({ call, token, params, body }) => call('api.pricebook_patch', token, params.locationId, params.itemId, body),
  }),
  defineRoute({
    operationId: 'deletePricebookItem', method: 'delete', path: '/locations/:locationId/pricebook/:itemId', tag: 'Pricebook', scope: 'pricebook:write',
    summary: 'Delete a pricebook item (returns the removed record)', params: ItemParams, response: PricebookItem,
    handler: ({ call, token, params }) => call('api.pricebook_delete', token, params.locationId, params.itemId),
  }),
];

export const area = defineArea({
  order: 60,
  tags: {
    FAQs: 'Questions and answers the voice agent uses.',
    Pricebook: 'Services and price ranges the voice agent may quote.',
  },
  routes: knowledgeRoutes,
});

import { z } from 'zod';
import { defineRoute, locAnd, LocationParams, page, pageQuery, type RouteSpec } from '../route.js';
import { hhmm, text, ts, uuid } from './rest-common.js';
import { patchOf } from '../schemas.js';

export const bookingStatuses = ['scheduled', 'confirmed', 'completed', 'cancelled', 'no_show'] as const;

export const Booking = z.object({
  id: uuid,
  location_id: uuid,
  call_id: uuid.nullable(),
  lead_id: uuid.nullable(),
  customer_id: uuid.nullable(),
  status: z.enum(bookingStatuses),
  scheduled_date: z.string().describe('YYYY-MM-DD, location time'),
  scheduled_time: z.string().nullable().describe('HH:MM, location time'),
  service_type: z.string().nullable(),
  address: z.string().nullable(),
  notes: z.string().nullable(),
  created_at: ts,
  updated_at: ts,
});

export const BookingPatch = patchOf({
  status: z.enum(bookingStatuses).describe(
    'Allowed moves: scheduled→confirmed|completed|cancelled|no_show, confirmed→scheduled|completed|cancelled|no_show, cancelled|no_show→scheduled; completed is final'),
  scheduled_date: z.iso.date(),
  scheduled_time: hhmm.nullable(),
  service_type: text(200).nullable(),
  address: text(500).nullable(),
  notes: z.string().max(10000).nullable(),
});

export const bookingRoutes: RouteSpec[] = [
  defineRoute({
    method: 'get', path: '/locations/:locationId/bookings', tag: 'Bookings', scope: 'bookings:read', list: true,
    summary: 'Bookings, newest first', params: LocationParams,
    query: z.object({ ...pageQuery, status: z.enum(bookingStatuses).optional() }),
    response: z.array(Booking),
    handler: ({ call, token, params, query }) => call('api.bookings_list', token, params.locationId, query.status, page(query)),
  }),
  defineRoute({
    method: 'get', path: '/locations/:locationId/bookings/:bookingId', tag: 'Bookings', scope: 'bookings:read',
    summary: 'One booking', params: locAnd('bookingId'), response: Booking,
    handler: ({ call, token, params }) => call('api.booking_get', token, params.locationId, params.bookingId),
  }),
  defineRoute({
    method: 'patch', path: '/locations/:locationId/bookings/:bookingId', tag: 'Bookings', scope: 'bookings:write',
    summary: 'Change a booking (status, date, time; fires booking.updated)',
    params: locAnd('bookingId'), body: BookingPatch, response: Booking,
    handler: ({ call, token, params, body }) => call('api.booking_patch', token, params.locationId, params.bookingId, body),
  }),
];

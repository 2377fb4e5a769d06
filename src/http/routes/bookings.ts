import { z } from 'zod';
import { defineArea, defineRoute, locAnd, LocationParams, page, pageQuery, type RouteSpec } from '../route.js';
import { hhmm, text } from './rest-common.js';
import { bookingStatuses } from '../../allowed-values.js';
import { isoDate, patchOf } from '../schemas.js';
import { Booking } from './records.js';
import { e164 } from '../schemas.js';
import { windowStart } from '../../scheduling/schemas.js';

export const BookingCreate = z.strictObject({
  window_start: windowStart,
  name: text(200),
  phone: e164,
  address: text(500).optional(),
  service_type: text(200).optional(),
  notes: z.string().max(10000).optional(),
}).meta({ id: 'BookingCreate' });

export const BookingPatch = patchOf({
  status: z.enum(bookingStatuses).describe(
    'Allowed moves: scheduled→confirmed|completed|cancelled|no_show, confirmed→scheduled|completed|cancelled|no_show, cancelled|no_show→scheduled; completed is final'),
  window_start: windowStart.describe('Move the booking to this window (409 slot_unavailable like POST)'),
  scheduled_date: isoDate.describe('Only for a booking without a window'),
  scheduled_time: hhmm.nullable().describe('Only for a booking without a window'),
  service_type: text(200).nullable(),
  address: text(500).nullable(),
  notes: z.string().max(10000).nullable(),
}).meta({ id: 'BookingUpdate' });

export const bookingRoutes: RouteSpec[] = [
  defineRoute({
    operationId: 'listBookings', method: 'get', path: '/locations/:locationId/bookings', tag: 'Bookings', scope: 'bookings:read', list: true,
    summary: 'Bookings, newest first', params: LocationParams,
    query: z.object({ ...pageQuery, status: z.enum(bookingStatuses).optional() }),
    response: z.array(Booking),
    handler: ({ call, token, params, query }) => call('api.bookings_list', token, params.locationId, query.status, page(query)),
  }),
  defineRoute({
    operationId: 'createBooking', method: 'post', path: '/locations/:locationId/bookings', tag: 'Bookings', scope: 'bookings:write', status: 201,
    summary: 'Book an arrival window (409 slot_unavailable with the next three open windows; fires booking.created)',
    params: LocationParams, body: BookingCreate, response: Booking, conflict: true, rules: ['phone_valid'], callerData: true,
    handler: ({ call, token, params, body }) => call('api.booking_create', token, params.locationId, body),
  }),
  defineRoute({
    operationId: 'getBooking', method: 'get', path: '/locations/:locationId/bookings/:bookingId', tag: 'Bookings', scope: 'bookings:read',
    summary: 'One booking', params: locAnd('bookingId'), response: Booking,
    handler: ({ call, token, params }) => call('api.booking_get', token, params.locationId, params.bookingId),
  }),
  defineRoute({
    operationId: 'updateBooking', method: 'patch', path: '/locations/:locationId/bookings/:bookingId', tag: 'Bookings', scope: 'bookings:write',
    summary: 'Change a booking (status, window, date, time; fires booking.updated)',
    params: locAnd('bookingId'), body: BookingPatch, response: Booking, conflict: true,
    handler: ({ call, token, params, body }) => call('api.booking_patch', token, params.locationId, params.bookingId, body),
  }),
];

export const area = defineArea({
  order: 40,
  tags: {
    Bookings: 'Appointments booked by the voice agent or through the API.',
  },
  routes: bookingRoutes,
});

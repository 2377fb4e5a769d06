import { z } from 'zod';
import { defineRoute, locAnd, LocationParams, page, pageQuery, type RouteSpec } from '../route.js';
import { hhmm, text } from './rest-common.js';
import { bookingStatuses } from '../../allowed-values.js';
import { patchOf } from '../schemas.js';
import { Booking } from './records.js';

export const BookingPatch = patchOf({
  status: z.enum(bookingStatuses).describe(
    'Allowed moves: scheduled→confirmed|completed|cancelled|no_show, confirmed→scheduled|completed|cancelled|no_show, cancelled|no_show→scheduled; completed is final'),
  scheduled_date: z.iso.date(),
  scheduled_time: hhmm.nullable(),
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
    operationId: 'getBooking', method: 'get', path: '/locations/:locationId/bookings/:bookingId', tag: 'Bookings', scope: 'bookings:read',
    summary: 'One booking', params: locAnd('bookingId'), response: Booking,
    handler: ({ call, token, params }) => call('api.booking_get', token, params.locationId, params.bookingId),
  }),
  defineRoute({
    operationId: 'updateBooking', method: 'patch', path: '/locations/:locationId/bookings/:bookingId', tag: 'Bookings', scope: 'bookings:write',
    summary: 'Change a booking (status, date, time; fires booking.updated)',
    params: locAnd('bookingId'), body: BookingPatch, response: Booking, conflict: true,
    handler: ({ call, token, params, body }) => call('api.booking_patch', token, params.locationId, params.bookingId, body),
  }),
];

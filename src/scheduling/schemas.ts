/**
 * Arrival windows (docs/scheduling.md): the shapes shared by the REST routes and the agent's tools.
 * PostgreSQL cuts the windows and enforces capacity (app.scheduling_windows, the capacity trigger
 * on app.bookings); these schemas only validate what comes in and describe what goes out.
 */
import { z } from 'zod';
import { isoDate, isoInstant, patchOf, queryInt, timestamp } from '../http/schemas.js';

export const windowStart = isoInstant.describe('Start of an arrival window (ISO 8601, as GET availability lists it)');

export const Scheduling = z.strictObject({
  location_id: z.uuid(),
  window_minutes: z.number().int().min(15).max(720).describe('Length of one arrival window, cut from each business-hours interval from its opening time'),
  capacity: z.number().int().min(1).max(100).describe('Active (scheduled or confirmed) bookings one window may hold'),
  lead_time_minutes: z.number().int().min(0).max(20160).describe('No window starting sooner than this is offered or booked'),
  horizon_days: z.number().int().min(1).max(90).describe('No window starting later than this many days ahead is offered or booked'),
  closed_dates: z.array(isoDate).max(366).describe('Days without any window (location time), YYYY-MM-DD'),
  updated_at: timestamp.nullable().describe('null until the settings are first changed (defaults)'),
}).meta({ id: 'SchedulingSettings', description: 'How a location cuts its business hours into arrival windows' });

export const SchedulingPatch = patchOf({
  window_minutes: Scheduling.shape.window_minutes,
  capacity: Scheduling.shape.capacity,
  lead_time_minutes: Scheduling.shape.lead_time_minutes,
  horizon_days: Scheduling.shape.horizon_days,
  closed_dates: Scheduling.shape.closed_dates,
}).meta({ id: 'SchedulingSettingsPatch' });

export const Window = z.strictObject({
  start: timestamp,
  end: timestamp,
});

export const AvailabilityWindow = Window.extend({
  remaining: z.number().int().min(1).describe('Bookings the window can still take'),
}).meta({ id: 'AvailabilityWindow', description: 'An open arrival window' });

export const AvailabilityQuery = z.object({
  from: isoDate.optional().describe('First day (YYYY-MM-DD, location time); default today'),
  days: queryInt(1, 31).optional().describe('Number of days from `from` (1-31, default 7)'),
});

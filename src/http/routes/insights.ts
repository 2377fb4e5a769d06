import { z } from 'zod';
import { defineArea, defineRoute, LocationParams, type RouteSpec } from '../route.js';
import { queryInt } from '../schemas.js';

const days = queryInt(1, 90);

export const InsightsQuery = z
  .object({
    days: days.optional().describe('Window in days, today included (1–90, default 30)'),
    range: days.optional().describe('Alias of days'),
  })
  .transform((q) => ({ days: q.days ?? q.range ?? 30 }));

export const Insights = z.object({
  days: z.number().int(),
  from: z.string().describe('First day of the window (YYYY-MM-DD, location time)'),
  to: z.string().describe('Last day of the window (today, location time)'),
  timezone: z.string(),
  calls_answered: z.number().int(),
  leads_captured: z.number().int(),
  revenue_recovered: z.number(),
  spam_blocked: z.number().int(),
  emergencies: z.number().int(),
  answer_rate_pct: z.number(),
  after_hours_calls: z.number().int(),
  per_day: z.array(z.object({ date: z.string(), calls: z.number().int(), revenue: z.number() })),
  per_hour: z.array(z.object({ hour: z.number().int().min(0).max(23), share: z.number().min(0).max(1) })),
  services: z.array(z.object({ service: z.string(), pct: z.number() })),
}).meta({ id: 'InsightsSummary' });

export const insightRoutes: RouteSpec[] = [
  defineRoute({
    operationId: 'getInsights', method: 'get', path: '/locations/:locationId/insights', tag: 'Insights', scope: 'insights:read',
    summary: 'Call insights over the last N days in the location timezone',
    params: LocationParams, query: InsightsQuery, response: Insights,
    handler: ({ call, token, params, query }) => call('api.insights', token, params.locationId, query.days),
  }),
];

export const area = defineArea({
  order: 100,
  tags: {
    Insights: 'Call statistics over a window of days.',
  },
  routes: insightRoutes,
});

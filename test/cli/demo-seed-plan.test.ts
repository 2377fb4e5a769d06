/**
 * How `demo seed` cuts its calls into batches (src/cli/demo-seed.ts): every call in exactly one
 * batch, each batch within its size and a run of whole days, the days evenly filled.
 */
import { planSeedBatches } from '../../src/cli/demo-seed.js';

const perDay = (calls: number, days: number, d: number) => Math.floor((calls * (d + 1)) / days) - Math.floor((calls * d) / days);

test.each([
  [1_000_000, 30, 20_000],
  [1_000_000, 90, 50_000],
  [600, 10, 100],
  [300, 30, 20_000],
  [5, 30, 20_000],
  [7, 3, 2],
])('%d calls over %d days in batches of %d', (calls, days, size) => {
  const plan = planSeedBatches(calls, days, size);
  expect(plan.reduce((n, b) => n + b.calls, 0)).toBe(calls);
  for (const b of plan) {
    expect(b.calls).toBeGreaterThan(0);
    expect(b.calls).toBeLessThanOrEqual(size);
    expect(b.dayFrom).toBeGreaterThanOrEqual(0);
    expect(b.dayTo).toBeGreaterThan(b.dayFrom);
    expect(b.dayTo).toBeLessThanOrEqual(days);
  }
  // Batches follow the days in order and never overlap unless they split one day.
  for (let i = 1; i < plan.length; i++) {
    const [a, b] = [plan[i - 1], plan[i]];
    expect(b.dayFrom).toBeGreaterThanOrEqual(a.dayTo - 1);
    if (b.dayFrom < a.dayTo) expect([a.dayTo - a.dayFrom, b.dayTo - b.dayFrom]).toEqual([1, 1]);
  }
  // Each day gets its share: the calls of the batches covering only that day add up to it.
  const single = new Map<number, number>();
  for (const b of plan) if (b.dayTo - b.dayFrom === 1) single.set(b.dayFrom, (single.get(b.dayFrom) ?? 0) + b.calls);
  for (const [d, n] of single) if (perDay(calls, days, d) > size) expect(n).toBe(perDay(calls, days, d));
});

test('one batch when everything fits, spanning all the days', () => {
  expect(planSeedBatches(300, 30, 20_000)).toEqual([{ calls: 300, dayFrom: 0, dayTo: 30 }]);
  expect(planSeedBatches(1_000_000, 30, 20_000).slice(0, 2)).toEqual([
    { calls: 20_000, dayFrom: 0, dayTo: 1 }, { calls: 13_333, dayFrom: 0, dayTo: 1 }]);
});

/** Set-up shared by the scheduling, booking and agent-tool tests (docs/scheduling.md). */
import type pg from 'pg';

/** Opens the location every day of the week from `open` to `close` (location time). */
export async function openEveryDay(owner: pg.Pool, locationId: string, open = '08:00', close = '18:00'): Promise<void> {
  await owner.query('delete from app.business_hours where location_id = $1', [locationId]);
  await owner.query(
    `insert into app.business_hours (location_id, day, open, close) select $1, d, $2, $3 from generate_series(0, 6) d`,
    [locationId, open, close],
  );
}

/** Scheduling settings straight in the table (the REST route has its own tests). */
export async function setScheduling(owner: pg.Pool, locationId: string, s: Record<string, unknown>): Promise<void> {
  const cols = Object.keys(s);
  await owner.query(
    `insert into app.scheduling_settings (location_id, ${cols.join(', ')}) values ($1, ${cols.map((_, i) => `$${i + 2}`).join(', ')})
     on conflict (location_id) do update set ${cols.map((c) => `${c} = excluded.${c}`).join(', ')}`,
    [locationId, ...Object.values(s)],
  );
}

/** The location's date `days` from today (YYYY-MM-DD, its own time zone). */
export async function localDate(owner: pg.Pool, tz: string, days: number): Promise<string> {
  const { rows } = await owner.query(`select to_char((now() at time zone $1)::date + $2::int, 'YYYY-MM-DD') as d`, [tz, days]);
  return rows[0].d;
}

/** A local wall-clock time on a date as the API writes instants (app.iso: UTC, milliseconds). */
export async function instant(owner: pg.Pool, tz: string, date: string, hhmm: string): Promise<string> {
  const { rows } = await owner.query(`select app.iso(($2::date + $3::time) at time zone $1) as t`, [tz, date, hhmm]);
  return rows[0].t;
}

/** "Friday, November 27" as the agent says a date (en-US, the location's zone). */
export function spokenDay(date: string): string {
  return new Intl.DateTimeFormat('en-US', { weekday: 'long', month: 'long', day: 'numeric', timeZone: 'UTC' })
    .format(new Date(`${date}T12:00:00Z`));
}

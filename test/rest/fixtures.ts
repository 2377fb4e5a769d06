/** Fixture rows inserted as the owner (tests arrange state the API has no write path for). */
import type pg from 'pg';

let n = 0;
export async function insertCall(owner: pg.Pool, locationId: string, attrs: Record<string, unknown> = {}): Promise<string> {
  n += 1;
  const row: Record<string, unknown> = {
    location_id: locationId, platform_call_id: `call_${n}_${Math.random().toString(36).slice(2)}`,
    caller_phone: '+15125550123', outcome: 'lead', started_at: new Date().toISOString(), ...attrs,
  };
  const cols = Object.keys(row);
  const { rows } = await owner.query(
    `insert into app.calls (${cols.join(', ')}) values (${cols.map((_, i) => `$${i + 1}`).join(', ')}) returning id`,
    cols.map((c) => (row[c] !== null && typeof row[c] === 'object' ? JSON.stringify(row[c]) : row[c])),
  );
  return rows[0].id;
}

export async function insertBooking(owner: pg.Pool, locationId: string, attrs: Record<string, unknown> = {}): Promise<string> {
  const { rows } = await owner.query(
    `insert into app.bookings (location_id, scheduled_date, scheduled_time, service_type, status)
     values ($1, $2, $3, $4, $5) returning id`,
    [locationId, attrs.scheduled_date ?? '2026-12-01', attrs.scheduled_time ?? '09:00', attrs.service_type ?? 'AC repair', attrs.status ?? 'scheduled'],
  );
  return rows[0].id;
}

export async function insertMember(owner: pg.Pool, locationId: string, email: string, role = 'member'): Promise<string> {
  const { rows } = await owner.query('insert into app.members (location_id, email, role) values ($1, $2, $3) returning id', [locationId, email, role]);
  return rows[0].id;
}

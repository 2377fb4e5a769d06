/**
 * A provider's reply is recorded as the first 300 characters of its text (src/notify/send.ts).
 * Cut through a surrogate pair, the text held a lone surrogate: JSON.stringify writes it as
 * `\ud83d`, PostgreSQL's json refuses that, the outcome could never be recorded, and the message was
 * sent again every time its lease lapsed.
 */
import pg from 'pg';
import { snippet } from '../../src/notify/send.js';
import { createTestDatabase, type TestDatabase } from '../support/db.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(() => db?.drop());

test('a reply cut through an emoji is still text PostgreSQL stores as json', async () => {
  // Setup: a Slack echo whose emoji straddles the 300th character.
  const reply = `ECHO ${'A'.repeat(294)}😀 Quokka Lane`;

  // Action
  const detail = snippet(reply);

  // Assertions
  expect(detail).toHaveLength(300);
  expect(detail.endsWith('\uFFFD')).toBe(true);
  expect(JSON.stringify({ detail })).not.toMatch(/\\ud83d/i);
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  const { rows } = await client.query('select ($1::json ->> $2) as detail', [JSON.stringify({ detail }), 'detail']).finally(() => client.end());
  expect(rows[0].detail).toBe(detail);
});

test('a NUL in a reply is dropped: jsonb cannot hold it either', () => {
  // Setup / Action / Assertions
  expect(snippet('250 OK\u0000 queued')).toBe('250 OK queued');
});

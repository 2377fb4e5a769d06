/**
 * migrations/functions/ holds one file per SQL function with its current definition. A database
 * migrated from committed + current.sql must agree with it file for file, so a change to a
 * function cannot reach review without the diff of its one file.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { compareFunctionFiles, functionFiles, writeFunctionFiles } from '../../src/db/function-files.js';
import { useTestDatabase } from '../support/db.js';

const db = useTestDatabase({ client: true });

test('migrations/functions/ matches the migrated database: no file differs, is missing or is extra', async () => {
  const files = await functionFiles(db.client);
  const { changed, missing, extra } = compareFunctionFiles(files);
  const problems = [...changed.map((f) => `differs: ${f}`), ...missing.map((f) => `missing: ${f}`), ...extra.map((f) => `extra: ${f}`)];
  if (problems.length) {
    throw new Error(
      `migrations/functions/ is out of date with committed + current.sql; run \`npm run db:functions\` and commit the result:\n  ${problems.join('\n  ')}`,
    );
  }
  expect(files.size).toBeGreaterThan(100);
});

test('a changed function shows up as its one file', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sb-functions-'));
  try {
    writeFunctionFiles(await functionFiles(db.client), dir);
    expect(compareFunctionFiles(await functionFiles(db.client), dir)).toEqual({ changed: [], missing: [], extra: [] });
    await db.client.query('begin');
    await db.client.query(`create or replace function app.mask_phone(phone text) returns text language sql immutable parallel safe
                     as $$ select '***' $$`);
    await db.client.query(`create function app.brand_new() returns int language sql as 'select 1'`);
    await db.client.query(`drop function app.notification_priority(text)`);
    const after = compareFunctionFiles(await functionFiles(db.client), dir);
    await db.client.query('rollback');
    expect(after).toEqual({ changed: ['app.mask_phone.sql'], missing: ['app.brand_new.sql'], extra: ['app.notification_priority.sql'] });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

/**
 * A revoked staff token stops working within about a second in every process (docs/staff.md
 * "Tokens"): a second process serving the staff GraphQL on the same database, whose cache has
 * just accepted the token, refuses it shortly after `staff revoke` in a third process (the CLI).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { projectRoot } from '../../src/db/migrate.js';
import { childEnv, runCli, tsxBin } from '../support/spawn.js';
import { gqlAt, startStaffEnv, type StaffEnv } from './support.js';

let env: StaffEnv;
let other: ChildProcess | undefined;
let otherUrl: string;

beforeAll(async () => {
  env = await startStaffEnv();
  other = spawn(tsxBin, ['test/staff/serve.ts'], { cwd: projectRoot, env: childEnv({ DATABASE_URL: env.db.url }) });
  otherUrl = await new Promise<string>((resolve, reject) => {
    let out = '';
    other!.stdout!.on('data', (d) => {
      out += d;
      const line = out.split('\n').find((l) => l.startsWith('{'));
      if (line) resolve(JSON.parse(line).url);
    });
    other!.on('exit', (code) => reject(new Error(`second server exited ${code}: ${out}`)));
  });
}, 90_000);
afterAll(async () => {
  if (other && other.exitCode === null) {
    const exited = new Promise((r) => other!.once('exit', r));
    other.kill('SIGTERM');
    await exited;
  }
  await env?.close();
});

test('revoked in one process, refused by another within the bound', async () => {
  const member = await env.member('viewer');
  const query = '{ allLocations { totalCount } }';
  // Both processes accept the token (and the second one has it cached).
  for (let i = 0; i < 3; i++) expect((await gqlAt(otherUrl, member.token, query)).status).toBe(200);
  expect((await env.gql(member.token, query)).status).toBe(200);

  const revoked = await runCli(['staff', 'revoke', '--id', member.id], { DATABASE_URL: env.db.url });
  expect(revoked.code).toBe(0);
  expect(revoked.json).toEqual({ id: member.id, email: 'viewer@staff.example.net', role: 'viewer', created_at: expect.any(String), revoked_at: expect.stringMatching(/Z$/) });

  // Poll (bounded at 5 s, several times the promised second): both processes refuse it.
  const statuses: number[] = [];
  for (let i = 0; i < 50; i++) {
    const [a, b] = await Promise.all([gqlAt(otherUrl, member.token, query), env.gql(member.token, query)]);
    statuses.push(a.status, b.status);
    if (a.status === 401 && b.status === 401) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  expect(statuses.slice(-2)).toEqual([401, 401]);
  // And it stays refused.
  expect((await gqlAt(otherUrl, member.token, query)).status).toBe(401);
}, 60_000);

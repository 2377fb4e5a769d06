/**
 * `npm start` runs the JavaScript that `npm install` compiles (prepare → tsc → dist/), not the
 * TypeScript sources: the build succeeds, and the compiled service finds migrations/ from dist,
 * serves the API and the staff GraphQL (its preset compiled from graphile.config.ts at the top
 * level), and its worker runs tasks loaded from dist/tasks.
 */
import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { projectRoot } from '../../src/db/migrate.js';
import { createTestDatabase } from '../support/db.js';
import { childEnv, exitedWithOutput, freePort } from '../support/spawn.js';
import { createLocation, mintKey, waitingOnLock } from '../support/harness.js';
import { mintMember } from '../staff/support.js';

const run = promisify(execFile);

/** Command lines of a process and its descendants (Linux /proc). */
function tree(pid: number): { pid: number; cmd: string }[] {
  const out: { pid: number; cmd: string }[] = [];
  const todo = [pid];
  while (todo.length) {
    const p = todo.pop()!;
    try {
      out.push({ pid: p, cmd: fs.readFileSync(`/proc/${p}/cmdline`, 'utf8').split('\0').join(' ') });
    } catch {
      continue;
    }
    for (const e of fs.readdirSync('/proc')) {
      if (!/^\d+$/.test(e)) continue;
      try {
        const stat = fs.readFileSync(`/proc/${e}/stat`, 'utf8');
        if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === p) todo.push(Number(e));
      } catch {
        /* gone */
      }
    }
  }
  return out;
}

test('npm start runs the compiled service: API and staff GraphQL up, migrations found, a job runs with the compiled task', async () => {
  await run('npm', ['run', '-s', 'build'], { cwd: projectRoot, env: process.env });
  expect(fs.existsSync(path.join(projectRoot, 'dist', 'src', 'main.js'))).toBe(true);
  expect(fs.existsSync(path.join(projectRoot, 'dist', 'graphile.config.js'))).toBe(true);
  expect(fs.existsSync(path.join(projectRoot, 'dist', 'tasks', 'finalize_call.js'))).toBe(true);

  const db = await createTestDatabase();
  const owner = new pg.Client({ connectionString: db.url });
  await owner.connect();
  const [port, adminPort] = [await freePort(), await freePort()];
  const child = spawn('npm', ['start', '--silent'], {
    cwd: projectRoot,
    detached: true,
    env: childEnv({ DATABASE_URL: db.url, HOST: '127.0.0.1', PORT: String(port), ADMIN_PORT: String(adminPort), DATA_DIR: path.join(projectRoot, '.test-data', 'unused') }),
  });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exited = exitedWithOutput(child);
  const holder = new pg.Client({ connectionString: db.url });
  try {
    const until = async (what: () => Promise<boolean>, label: string) => {
      for (const deadline = Date.now() + 60_000; Date.now() < deadline && child.exitCode === null; ) {
        if (await what().catch(() => false)) return;
        await new Promise((r) => setTimeout(r, 200));
      }
      throw new Error(`${label} did not happen:\n${out}`);
    };
    await until(async () => (await fetch(`http://127.0.0.1:${port}/readyz`)).status === 200 && /worker started/.test(out), 'start');

    // The service is node running dist/, with no TypeScript loader in its process tree.
    const procs = tree(child.pid!);
    const main = procs.find((p) => p.cmd.includes('dist/src/main.js') && !p.cmd.startsWith('sh '));
    expect(main).toBeDefined();
    expect(procs.some((p) => /tsx/.test(p.cmd))).toBe(false);

    // The staff GraphQL, built from the compiled graphile.config.js (pg-aggregates included), for a staff token.
    const { token } = await mintMember(owner, 'viewer');
    const staff = await fetch(`http://127.0.0.1:${adminPort}/graphql`, {
      method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ query: '{ allLocations { totalCount aggregates { distinctCount { slug } } } }' }),
    });
    expect(staff.status).toBe(200);
    const gql = (await staff.json()) as { data: { allLocations: { totalCount: number; aggregates: unknown } } };
    expect(gql.data.allLocations).toEqual({ totalCount: 0, aggregates: { distinctCount: { slug: '0' } } });

    // A finalize_call job for an unknown call: the compiled task runs it (a no-op) and logs it.
    await owner.query(`select graphile_worker.add_job('finalize_call', json_build_object('call_id', gen_random_uuid()))`);
    await until(async () => /finalize_call done/.test(out), 'finalize_call');
    expect(out).toMatch(/"reason":"missing"/);

    // A request in flight through the shutdown: its list read waits on a lock this test holds.
    const loc = await createLocation(owner as unknown as pg.Pool);
    const { token: apiToken } = await mintKey(owner as unknown as pg.Pool, loc.id);
    await holder.connect();
    await holder.query('begin');
    await holder.query('lock table app.calls in access exclusive mode');
    const inFlight = fetch(`http://127.0.0.1:${port}/api/v1/locations/${loc.id}/calls`, { headers: { authorization: `Bearer ${apiToken}` } });
    await waitingOnLock(holder, { application: 'switchboard-api' });

    // SIGTERM to npm and to the service at once, as a supervisor or Ctrl-C on the process group
    // does: npm relays its signal to the service (the script execs node: no shell in between to
    // die and leave node running). Two signals sent together may arrive as one (a signal pending
    // twice is delivered once), so a repeat is also sent once the shutdown has begun, while the
    // request still holds it open: the repeat does not cut the shutdown short, the request is
    // answered, the service stops cleanly and npm exits with its status.
    process.kill(child.pid!, 'SIGTERM');
    process.kill(main!.pid, 'SIGTERM');
    await until(async () => /"msg":"shutting down"/.test(out), 'shutting down');
    process.kill(main!.pid, 'SIGTERM');
    await until(async () => /signal received again; already stopping/.test(out), 'the repeat logged');
    expect(child.exitCode).toBeNull();
    await holder.query('commit');
    const answered = await inFlight;
    expect(answered.status).toBe(200);
    expect(((await answered.json()) as { data: unknown[] }).data).toEqual([]);
    expect(await exited).toBe(0);
    expect(out).toMatch(/"msg":"stopped"/);
    const heard = out.match(/"msg":"signal received[^"]*"/g)!;
    expect(heard[0]).toBe('"msg":"signal received"');
    expect(heard.slice(1).every((m) => m === '"msg":"signal received again; already stopping"')).toBe(true);
    const state = (() => {
      try {
        return fs.readFileSync(`/proc/${main!.pid}/stat`, 'utf8').replace(/^.*\) /, '')[0];
      } catch {
        return 'gone';
      }
    })();
    expect(['gone', 'Z']).toContain(state);
  } finally {
    if (child.exitCode === null) {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        /* already gone */
      }
    }
    await holder.end().catch(() => undefined);
    await owner.end();
    await db.drop();
  }
}, 180_000);

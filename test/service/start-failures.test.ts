/**
 * A start that cannot succeed says why in one log line, with the fix, and exits non-zero: an
 * embedded-PostgreSQL failure (a DATA_DIR that cannot be made, a cluster folder without a cluster,
 * a cluster PostgreSQL refuses) or a setting that would make every send fail. Never an unhandled
 * event or a stack trace.
 */
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { projectRoot } from '../../src/db/migrate.js';
import { childEnv, exitedWithOutput, freePort, tsxBin } from '../support/spawn.js';

const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'sb-fail-'));
afterAll(() => fs.rmSync(scratch, { recursive: true, force: true }));

/** Runs `src/main.ts` to its end; the service must not come up. */
async function failedStart(env: Record<string, string>): Promise<{ code: number | null; lines: string[] }> {
  const ports = { PORT: String(await freePort()), ADMIN_PORT: String(await freePort()), HOST: '127.0.0.1' };
  const child = spawn(tsxBin, ['src/main.ts'], { cwd: projectRoot, env: childEnv({ ...ports, ...env }) });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  const code = await exitedWithOutput(child);
  return { code, lines: out.split('\n').filter(Boolean) };
}

/** Exactly one fatal line, naming the cause and the fix; every line is a log record (no raw stack). */
function oneClearLine(lines: string[]): { msg: string; [k: string]: unknown } {
  const records = lines.map((l) => {
    try {
      return JSON.parse(l);
    } catch {
      throw new Error(`not a log line: ${l}\n--- all output:\n${lines.join('\n')}`);
    }
  });
  const fatal = records.filter((r) => r.level === 60);
  expect(fatal).toHaveLength(1);
  expect(records.filter((r) => r.level >= 50)).toHaveLength(1);
  expect(fatal[0].err).toBeUndefined();
  expect(lines.join('\n')).not.toMatch(/\n\s+at |"stack"|Unhandled|uncaught/i);
  return fatal[0];
}

test('a DATA_DIR that cannot be created', async () => {
  const file = path.join(scratch, 'a-file');
  fs.writeFileSync(file, 'not a directory');
  const { code, lines } = await failedStart({ DATA_DIR: path.join(file, 'data') });
  expect(code).not.toBe(0);
  const line = oneClearLine(lines);
  expect(line.msg).toMatch(/^embedded PostgreSQL: cannot create or write DATA_DIR .*a-file\/data: ENOTDIR.*\. Fix: set DATA_DIR to /);
}, 60_000);

test('a cluster folder that holds no cluster (an interrupted first start)', async () => {
  const dataDir = path.join(scratch, 'half');
  fs.mkdirSync(path.join(dataDir, 'pg'), { recursive: true });
  fs.writeFileSync(path.join(dataDir, 'pg', 'leftover'), 'x');
  const { code, lines } = await failedStart({ DATA_DIR: dataDir });
  expect(code).not.toBe(0);
  const line = oneClearLine(lines);
  expect(line.msg).toMatch(/not empty but without a cluster in it.*Fix: move .*half\/pg aside/);
}, 60_000);

test('a cluster PostgreSQL refuses to start', async () => {
  const dataDir = path.join(scratch, 'broken');
  const pgDir = path.join(dataDir, 'pg');
  fs.mkdirSync(pgDir, { recursive: true, mode: 0o700 });
  fs.writeFileSync(path.join(pgDir, 'PG_VERSION'), '17\n');
  // As root the cluster runs as `postgres`: hand it the folder, so that PostgreSQL itself refuses it.
  if (process.getuid?.() === 0) {
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }));
    fs.chownSync(pgDir, uid, uid);
    fs.chownSync(path.join(pgDir, 'PG_VERSION'), uid, uid);
  }
  const { code, lines } = await failedStart({ DATA_DIR: dataDir });
  expect(code).not.toBe(0);
  const line = oneClearLine(lines);
  expect(line.msg).toMatch(/^embedded PostgreSQL: found .*broken\/pg damaged or incomplete: .+\. Fix: restore .* from a backup, or move it aside/);
}, 60_000);

// Only root can hand a folder to another user.
(process.getuid?.() === 0 ? test : test.skip)('a cluster folder owned by another user', async () => {
  const dataDir = path.join(scratch, 'foreign');
  const pgDir = path.join(dataDir, 'pg');
  fs.mkdirSync(pgDir, { recursive: true, mode: 0o700 });
  fs.writeFileSync(path.join(pgDir, 'PG_VERSION'), '17\n');
  fs.chownSync(pgDir, 65534, 65534);
  const { code, lines } = await failedStart({ DATA_DIR: dataDir });
  expect(code).not.toBe(0);
  expect(oneClearLine(lines).msg).toMatch(/found .*foreign\/pg owned by uid 65534, .*Fix: .*chown -R /);
}, 60_000);

test('an SMS_API_URL that is not https stops start-up, naming it', async () => {
  const { code, lines } = await failedStart({ DATA_DIR: path.join(scratch, 'unused'), SMS_API_URL: 'http://sms.example.com/send' });
  expect(code).not.toBe(0);
  expect(oneClearLine(lines).msg).toMatch(/^Invalid configuration: SMS_API_URL: must be a https:\/\/ URL/);
  expect(fs.existsSync(path.join(scratch, 'unused'))).toBe(false); // nothing started
}, 60_000);

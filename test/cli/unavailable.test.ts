/**
 * The CLI against a database that takes connections and answers nothing (its processes stopped):
 * it ends with the `unavailable` error line and exit 1 within the documented bound
 * (docs/operations.md, "A database that does not answer"), by DATABASE_URL or attached to an
 * embedded cluster another process supervises.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { lockFile } from '../../src/db/embedded/index.js';
import { SupervisorLock } from '../../src/db/embedded/lock.js';
import { runCli } from '../support/spawn.js';

/** A loopback server that accepts connections and never writes: a stopped PostgreSQL. */
let silent: net.Server;
let port: number;
const sockets = new Set<net.Socket>();
beforeAll(async () => {
  silent = net.createServer((s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
  port = (silent.address() as net.AddressInfo).port;
});
afterAll(async () => {
  for (const s of sockets) s.destroy();
  await new Promise((r) => silent.close(r));
});

test('with DATABASE_URL: unavailable within the 5 s connection bound', async () => {
  // Setup
  const env = { DATABASE_URL: `postgres://operator:pw@127.0.0.1:${port}/switchboard` };
  // Action
  const started = Date.now();
  const out = await runCli(['staff', 'list'], env, 30_000);
  // Assertions
  expect([out.code, out.json?.error?.code]).toEqual([1, 'unavailable']);
  expect(out.json.error.message).toBe('The database is unavailable; try again shortly (no answer within 5 s of connecting)');
  expect(Date.now() - started).toBeLessThan(15_000);
});

describe('attached to an embedded cluster', () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'sb-cli-silent-'));
  let lock: SupervisorLock;
  let postmaster: ChildProcess;
  beforeAll(async () => {
    // Another process supervises (holds the lock); the cluster's postmaster.pid names a live
    // process and the silent port, as a stopped postmaster's does.
    lock = new SupervisorLock(lockFile(dataDir));
    await lock.held;
    postmaster = spawn('sleep', ['120']);
    fs.mkdirSync(path.join(dataDir, 'pg'), { mode: 0o700 });
    fs.writeFileSync(path.join(dataDir, 'pg', 'postmaster.pid'), `${postmaster.pid}\n${dataDir}/pg\n0\n${port}\n127.0.0.1\n`);
  });
  afterAll(() => {
    postmaster?.kill();
    lock?.release();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  test('unavailable once the cluster has answered nothing for 10 s', async () => {
    // Action
    const started = Date.now();
    const out = await runCli(['staff', 'list'], { DATA_DIR: dataDir }, 60_000);
    // Assertions
    expect([out.code, out.json?.error?.code]).toEqual([1, 'unavailable']);
    expect(out.json.error.message).toMatch(/takes connections but has answered none for 10 s/);
    expect(Date.now() - started).toBeLessThan(25_000);
  }, 70_000);
});

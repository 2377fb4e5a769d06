/**
 * The supervisor lock of the embedded cluster (src/db/embedded/lock.ts): one holder at a time,
 * the next waiter gets it when the holder releases it, and when the holding process dies by
 * kill -9 (nothing of it runs to release anything).
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SupervisorLock } from '../../src/db/embedded/lock.js';
import { tsxBin } from '../support/spawn.js';
import { projectRoot } from '../../src/db/migrate.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sb-lock-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

test('one holder at a time: the waiter gets the lock only after the holder releases it', async () => {
  const file = path.join(dir, 'a.lock');
  const order: string[] = [];
  const a = new SupervisorLock(file);
  expect(await a.held).toBe(true);
  order.push('a held');
  const b = new SupervisorLock(file);
  const bHeld = b.held.then((held) => order.push(`b held: ${held}`));
  // b is still waiting while a holds the lock, whatever the time it takes to ask.
  await new Promise((r) => setTimeout(r, 300));
  order.push('a releases');
  a.release();
  await bHeld;
  expect(order).toEqual(['a held', 'a releases', 'b held: true']);
  // c, asking once b holds it, waits on b. (Asking while a still held it, c could have been
  // queued before b: flock's waiters are served in the order they reach the kernel.)
  const c = new SupervisorLock(file);
  let cHeld = false;
  void c.held.then((h) => (cHeld = h));
  await new Promise((r) => setTimeout(r, 300));
  expect(cHeld).toBe(false);
  b.release();
  expect(await c.held).toBe(true);
  c.release();
});

test('a holder killed with SIGKILL gives the lock up to the next waiter', async () => {
  const file = path.join(dir, 'b.lock');
  const script = `import { SupervisorLock } from ${JSON.stringify(path.join(projectRoot, 'src/db/embedded/lock.ts'))};
    setInterval(() => undefined, 1000); // the lock's own process does not keep this one alive
    const l = new SupervisorLock(${JSON.stringify(file)});
    if (await l.held) console.log('held');`;
  const scriptFile = path.join(dir, 'holder.mts');
  fs.writeFileSync(scriptFile, script);
  const holder = spawn(tsxBin, [scriptFile], { cwd: projectRoot, stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise<void>((resolve, reject) => {
    holder.stdout.on('data', (d) => /held/.test(String(d)) && resolve());
    holder.once('exit', (code) => reject(new Error(`holder exited ${code}`)));
  });
  const waiter = new SupervisorLock(file);
  let held = false;
  void waiter.held.then((h) => (held = h));
  await new Promise((r) => setTimeout(r, 300));
  expect(held).toBe(false);
  const exited = new Promise((r) => holder.once('exit', r));
  // tsx runs the script in a child node process: kill -9 every process of the holder's tree but flock's.
  for (const pid of treeOf(holder.pid!)) try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ }
  await exited;
  expect(await waiter.held).toBe(true);
  waiter.release();
}, 60_000);

test('a lock file that cannot be created is a clear failure, not a wait', async () => {
  const lock = new SupervisorLock(path.join(dir, 'missing', 'x.lock'));
  expect(await lock.held).toBe(false);
  expect(lock.failure?.message).toMatch(/cannot take the supervisor lock .*missing\/x\.lock.*Fix: /);
});

/** The node processes of a tree (not flock, nor the cat under it: they go when the pipe closes). */
function treeOf(root: number): number[] {
  const children = (pid: number) => fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d)).map(Number).filter((p) => {
    try {
      const stat = fs.readFileSync(`/proc/${p}/stat`, 'utf8');
      return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid;
    } catch {
      return false;
    }
  });
  const out: number[] = [];
  const todo = [root];
  while (todo.length) {
    const pid = todo.pop()!;
    let comm = '';
    try {
      comm = fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
    } catch {
      continue;
    }
    if (comm === 'flock' || comm === 'cat' || comm === 'sh') continue;
    out.push(pid);
    todo.push(...children(pid));
  }
  return out;
}

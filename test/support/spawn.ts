import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { projectRoot } from '../../src/db/migrate.js';

export const tsxBin = path.join(projectRoot, 'node_modules', '.bin', 'tsx');
export const tsxLoader = pathToFileURL(path.join(projectRoot, 'node_modules', 'tsx', 'dist', 'loader.mjs')).href;

/** Base environment for child processes: nothing of the parent's test settings leaks in. */
export function childEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  // A worker's admin listener on a port of its own (0 = any free one), so parallel test files never collide on 5679.
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME, LOG_LEVEL: 'info', WORKER_ADMIN_PORT: '0' };
  return { ...env, ...extra };
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
  json: any;
}

/**
 * Runs the CLI as an operator would, returning exit code and parsed stdout; one still running
 * after `timeoutMs` gets SIGTERM (code null), so a CLI that hangs fails its test instead of hanging
 * it. Node with tsx's loader, one process: the `tsx` command would start a second Node to run it.
 */
export function runCli(args: string[], env: Record<string, string>, timeoutMs?: number): Promise<CliResult> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', tsxLoader, 'src/cli/index.ts', ...args], { cwd: projectRoot, env: childEnv(env), timeout: timeoutMs });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('close', (code) => {
      let json: unknown;
      try {
        json = JSON.parse(stdout);
      } catch {
        json = undefined;
      }
      resolve({ code, stdout, stderr, json });
    });
  });
}

/**
 * Resolves with the child's exit code once its output is read too: 'exit' can come before the last
 * lines arrive (at most 2 s more, in case a grandchild such as the postmaster holds the pipes).
 */
export function exitedWithOutput(child: ChildProcess): Promise<number | null> {
  const ended = (st: NodeJS.ReadableStream) => new Promise<void>((r) => st.once('end', () => r()));
  const drained = Promise.all([ended(child.stdout!), ended(child.stderr!)]);
  return new Promise((r) => child.on('exit', (code) => {
    // The 2 s bound is cleared once the output has ended, and never holds the process open by
    // itself (a test that awaits 'exit' directly would otherwise leave it running after the file).
    let bound: NodeJS.Timeout | undefined;
    void Promise.race([drained, new Promise((t) => (bound = setTimeout(t, 2000)).unref())]).then(() => {
      clearTimeout(bound);
      r(code);
    });
  }));
}

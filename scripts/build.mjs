/**
 * `npm run build` (also `prepare`): a clean compile of the TypeScript into dist/, put in place with
 * two renames once it is complete, so a service or test starting from dist/ while a build runs
 * (the compiled-service test beside the supervision tests) never finds it missing or half written.
 * Files of removed sources do not linger: the new tree replaces the old one whole.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');
const dist = path.join(root, 'dist');
const next = path.join(root, `dist.next-${process.pid}`);
const old = path.join(root, `dist.old-${process.pid}`);
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
try {
  execFileSync(process.execPath, [tsc, '-p', path.join(root, 'tsconfig.build.json'), '--outDir', next], { stdio: 'inherit' });
  if (fs.existsSync(dist)) fs.renameSync(dist, old);
  fs.renameSync(next, dist);
} catch (err) {
  process.exitCode = typeof err?.status === 'number' ? err.status : 1;
  if (!err?.status) console.error(err);
} finally {
  fs.rmSync(next, { recursive: true, force: true });
  fs.rmSync(old, { recursive: true, force: true });
}

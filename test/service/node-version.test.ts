/**
 * The service and the operator scripts end with one line naming the Node they need when started
 * on an older one (`node dist/src/main.js` by hand, or an install without dev dependencies), not
 * with undici's TypeError at import (src/node-version.ts).
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { projectRoot } from '../../src/db/migrate.js';
import { nodeTooOld } from '../../src/node-version.js';
import { childEnv } from '../support/spawn.js';

const run = promisify(execFile);

test('versions before 22.19 are too old; 22.19 and later are not', () => {
  expect(['20.20.2', '22.0.0', '22.18.9', '22.19.0', '23.0.0', '24.21.0'].map((v) => nodeTooOld(v))).toEqual([true, true, true, false, false, false]);
});

test.each([['the service', 'dist/src/main.js'], ['the CLI', 'dist/src/cli/index.js']])('%s on Node 20 exits 1 with one line naming the version it needs', async (_name, entry) => {
  // This Node, reporting itself as 20: what the check reads. Nothing else of the program runs.
  const as20 = 'data:text/javascript,Object.defineProperty(process.versions,"node",{value:"20.20.2"})';
  const failed = await run(process.execPath, ['--import', as20, entry, 'location', 'list'], { cwd: projectRoot, env: childEnv({}), timeout: 30_000 })
    .then(() => ({ code: 0, stdout: '', stderr: '' }), (err: { code: number; stdout: string; stderr: string }) => err);
  expect(failed.code).toBe(1);
  expect(failed.stdout).toBe('');
  const lines = failed.stderr.trim().split('\n');
  expect(lines).toHaveLength(1);
  expect(JSON.parse(lines[0])).toMatchObject({ level: 60, msg: expect.stringMatching(/^Switchboard needs Node ≥ 22\.19; this is Node 20\.20\.2\./) });
});

/**
 * `@redocly/cli lint` with the recommended ruleset (redocly.yaml) finds no error and no warning in
 * the document the server serves. The CLI runs as integrators run it, on the document written to a
 * file; it is bundled in the package, so it needs no network.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildOpenApi } from '../../src/http/openapi.js';
import { routes } from '../../src/http/routes/index.js';

const root = fileURLToPath(new URL('../..', import.meta.url));

function lint(doc: unknown): { totals: { errors: number; warnings: number }; problems: Array<{ ruleId: string; message: string }> } {
  const dir = mkdtempSync(path.join(tmpdir(), 'redocly-'));
  try {
    const file = path.join(dir, 'openapi.json');
    writeFileSync(file, JSON.stringify(doc));
    const run = spawnSync(process.execPath, [path.join(root, 'node_modules/@redocly/cli/bin/cli.js'), 'lint', file,
      '--config', path.join(root, 'redocly.yaml'), '--format', 'json'], {
      cwd: root, encoding: 'utf8', env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', CI: 'true' },
    });
    const start = run.stdout.indexOf('{');
    if (start < 0) throw new Error(`redocly lint gave no JSON report:\n${run.stdout}\n${run.stderr}`);
    return JSON.parse(run.stdout.slice(start));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('redocly lint (recommended): 0 errors, 0 warnings', () => {
  const result = lint(buildOpenApi(routes));
  expect(result.problems.map((p) => `${p.ruleId}: ${p.message}`)).toEqual([]);
  expect(result.totals).toMatchObject({ errors: 0, warnings: 0 });
});

test('the lint is live: a tag without a description is a warning', () => {
  const doc = buildOpenApi(routes);
  delete doc.tags[0].description;
  const result = lint(doc);
  expect(result.totals.warnings).toBeGreaterThan(0);
  expect(result.problems.map((p) => p.ruleId)).toContain('tag-description');
});

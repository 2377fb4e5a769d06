/**
 * The repository carries its own contract (docs/api-contract.md) and cites nothing outside
 * itself: no file may point at the design document the project started from or at a path beside
 * the checkout, so a reader of any clone can follow every citation. Committed migrations are
 * included: the re-baselined chain cites only docs/ (and they are immutable once committed).
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { projectRoot } from '../../src/db/migrate.js';

const SELF = 'test/repo/citations.test.ts';
const EXEMPT = [new RegExp(`^${SELF.replace(/\./g, '\\.')}$`)];

/** Citations of something outside the repository. */
const OUTSIDE: Array<[RegExp, string]> = [
  [/\bDESIGN(\.md\b|\s*§)/, 'the outside design document (cite docs/api-contract.md §N)'],
  [/(^|[^\w.])\.\.\/+shared\b/, 'a path beside the checkout (../shared)'],
  [/\/work\/shared\b/, 'an absolute path outside the checkout'],
  [/\bshared\/seed\//, 'the outside product brief'],
];

/** Problems in one file's text: `line: what it cites`. */
function outsideCitations(text: string): string[] {
  const found: string[] = [];
  text.split('\n').forEach((line, i) => {
    for (const [re, what] of OUTSIDE) if (re.test(line)) found.push(`${i + 1}: ${what}: ${line.trim().slice(0, 120)}`);
  });
  return found;
}

/** Tracked files plus new ones not ignored (what a commit would carry). */
function repositoryFiles(): string[] {
  const out = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: projectRoot, encoding: 'utf8' });
  return out.split('\0').filter(Boolean).filter((f) => !EXEMPT.some((re) => re.test(f)));
}

test('the checker recognises each kind of outside citation', () => {
  expect(outsideCitations('see DESIGN.md §8 for the rule')).toHaveLength(1);
  expect(outsideCitations('(DESIGN §6)')).toHaveLength(1);
  expect(outsideCitations("readFileSync('../shared/x.txt')")).toHaveLength(1);
  expect(outsideCitations('cat /work/shared/notes.md')).toHaveLength(1);
  expect(outsideCitations('the brief in shared/seed/000.txt')).toHaveLength(1);
  expect(outsideCitations('docs/api-contract.md §8; src/net/ssrf.ts; a shared helper; design notes')).toEqual([]);
});

test('no file cites a document or path outside the repository', () => {
  const files = repositoryFiles();
  expect(files).toEqual(expect.arrayContaining(['README.md', 'docs/api-contract.md', 'src/main.ts', 'package.json']));
  const problems: string[] = [];
  for (const f of files) {
    const full = path.join(projectRoot, f);
    if (!fs.existsSync(full) || !fs.statSync(full).isFile()) continue; // deleted in the work tree
    const buf = fs.readFileSync(full);
    if (buf.includes(0)) continue; // binary
    for (const p of outsideCitations(buf.toString('utf8'))) problems.push(`${f}:${p}`);
  }
  expect(problems).toEqual([]);
});

test('the contract keeps the section numbers the code cites (§1–§12)', () => {
  const contract = fs.readFileSync(path.join(projectRoot, 'docs/api-contract.md'), 'utf8');
  const sections = [...contract.matchAll(/^## (\d+)\. /gm)].map((m) => Number(m[1]));
  expect(sections).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
  // Every `docs/api-contract.md §N` citation in the repository names an existing section.
  const cited = new Set<number>();
  for (const f of repositoryFiles()) {
    const full = path.join(projectRoot, f);
    if (!fs.existsSync(full) || !fs.statSync(full).isFile()) continue;
    for (const m of fs.readFileSync(full, 'utf8').matchAll(/api-contract\.md`?\s*§(\d+)/g)) cited.add(Number(m[1]));
  }
  expect(cited.size).toBeGreaterThan(0);
  for (const n of cited) expect(sections).toContain(n);
});

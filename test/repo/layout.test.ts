/**
 * Layout rules of the repository (README "Layout", docs/decisions.md "Layout rules"):
 * - no import cycle among the service's modules (src/, tasks/, graphile.config.ts), type-only
 *   imports included: a cycle couples the modules and makes their load order matter;
 * - every file in tasks/ is a thin adapter: it default-exports `(deps) => make…(deps)` over a
 *   function imported from src/, where the task's code lives;
 * - no hand-written file in src/, tasks/, bench/, scripts/ or test/ is over 400 lines (the
 *   generated client types in test/generated/ aside), and bench/ has no import cycle either.
 */
import fs from 'node:fs';
import path from 'node:path';
import madge from 'madge';
import ts from 'typescript';
import { projectRoot } from '../../src/db/migrate.js';

async function importGraph() {
  return madge(['src', 'tasks', 'graphile.config.ts'], {
    baseDir: projectRoot,
    fileExtensions: ['ts'],
    tsConfig: path.join(projectRoot, 'tsconfig.json'),
    // `import type` counts: a type-only cycle still ties two modules together.
    detectiveOptions: { ts: { skipTypeImports: false }, es6: { skipTypeImports: false } },
  } as madge.MadgeConfig);
}

describe('imports', () => {
  let graph: Awaited<ReturnType<typeof importGraph>>;
  beforeAll(async () => {
    graph = await importGraph();
  }, 60_000);

  test('the graph is complete: every service module is in it, relative imports resolved', () => {
    const deps = graph.obj();
    const files = (dir: string): string[] => fs.readdirSync(path.join(projectRoot, dir), { recursive: true, encoding: 'utf8' })
      .filter((f) => f.endsWith('.ts')).map((f) => path.posix.join(dir, f.split(path.sep).join('/')));
    for (const f of [...files('src'), ...files('tasks'), 'graphile.config.ts']) expect(Object.keys(deps)).toContain(f);
    // Known edges, type-only ones included, so a resolver that silently drops imports fails here.
    expect(deps['src/http/app.ts']).toEqual(expect.arrayContaining(['src/http/deps.ts', 'src/http/platform/index.ts']));
    expect(deps['src/http/platform/voice.ts']).toContain('src/http/deps.ts');
    expect(deps['src/admin/graphql.ts']).toContain('graphile.config.ts');
    // Only packages may be unresolved (madge skips some package subpath exports), never our files.
    expect(graph.warnings().skipped.filter((s) => s.startsWith('.') || s.startsWith('/'))).toEqual([]);
  });

  test('no import cycle', () => {
    expect(graph.circular()).toEqual([]);
  });
});

describe('tasks/', () => {
  const taskFiles = fs.readdirSync(path.join(projectRoot, 'tasks')).filter((f) => f.endsWith('.ts'));

  /** Why the file is not a thin adapter, or null. */
  function adapterProblem(file: string): string | null {
    const text = fs.readFileSync(path.join(projectRoot, 'tasks', file), 'utf8');
    const sf = ts.createSourceFile(file, text, ts.ScriptTarget.ES2023, true, ts.ScriptKind.TS);
    const imported = new Set<string>();
    let factory: string | null = null;
    let exported: string | null = null;
    for (const st of sf.statements) {
      if (ts.isImportDeclaration(st)) {
        const from = (st.moduleSpecifier as ts.StringLiteral).text;
        if (!from.startsWith('../src/')) return `imports ${from} (a task file imports only from src/)`;
        const names = st.importClause?.namedBindings;
        if (names && ts.isNamedImports(names) && !st.importClause!.isTypeOnly) {
          for (const el of names.elements) if (!el.isTypeOnly) imported.add(el.name.text);
        }
        continue;
      }
      if (ts.isVariableStatement(st) && st.declarationList.declarations.length === 1 && factory === null) {
        const d = st.declarationList.declarations[0];
        const init = d.initializer;
        if (!ts.isIdentifier(d.name) || d.type?.getText() !== 'TaskFactory' || !init || !ts.isArrowFunction(init)) {
          return 'declares something other than `const factory: TaskFactory = (deps) => make…(deps)`';
        }
        const param = init.parameters.length === 1 ? init.parameters[0].name.getText() : null;
        const body = init.body;
        if (!param || !ts.isCallExpression(body) || !ts.isIdentifier(body.expression) || !imported.has(body.expression.text)
            || body.arguments.length !== 1 || body.arguments[0].getText() !== param) {
          return `its factory does more than call a function imported from src/ with the deps: ${init.getText()}`;
        }
        factory = d.name.text;
        continue;
      }
      if (ts.isExportAssignment(st) && !st.isExportEquals && ts.isIdentifier(st.expression)) {
        exported = st.expression.text;
        continue;
      }
      return `has code of its own: ${st.getText().split('\n')[0]}`;
    }
    if (!factory || exported !== factory) return 'does not `export default` its factory';
    return null;
  }

  test('the folder holds the tasks (the file name is the task identifier)', () => {
    expect(taskFiles).toEqual(expect.arrayContaining(['delivery_sweep.ts', 'finalize_call.ts', 'prune_deliveries.ts']));
  });

  test.each(taskFiles)('%s is a thin adapter over src/', (file) => {
    expect(adapterProblem(file)).toBeNull();
  });
});

describe('file size', () => {
  const MAX_LINES = 400;
  const handWritten = ['src', 'tasks', 'bench', 'scripts', 'test'].flatMap((dir) =>
    fs.readdirSync(path.join(projectRoot, dir), { recursive: true, encoding: 'utf8' })
      .map((f) => path.posix.join(dir, f.split(path.sep).join('/')))
      .filter((f) => /\.(ts|mts|mjs|js)$/.test(f) && !f.startsWith('test/generated/')));

  test('the scan sees the files it is about', () => {
    expect(handWritten).toEqual(expect.arrayContaining(['src/main.ts', 'bench/run.ts', 'test/repo/layout.test.ts', 'src/db/embedded/index.ts']));
  });

  test(`no hand-written file is over ${MAX_LINES} lines`, () => {
    const long = handWritten
      .map((f) => [f, fs.readFileSync(path.join(projectRoot, f), 'utf8').split('\n').length - 1] as const)
      .filter(([, lines]) => lines > MAX_LINES)
      .map(([f, lines]) => `${f}: ${lines} lines`);
    expect(long).toEqual([]);
  });
});

test('bench/ has no import cycle (shared types and helpers live in bench/common.ts)', async () => {
  const graph = await madge(['bench'], {
    baseDir: projectRoot,
    fileExtensions: ['ts'],
    tsConfig: path.join(projectRoot, 'tsconfig.json'),
    detectiveOptions: { ts: { skipTypeImports: false }, es6: { skipTypeImports: false } },
  } as madge.MadgeConfig);
  expect(Object.keys(graph.obj())).toEqual(expect.arrayContaining(['bench/run.ts', 'bench/metrics.ts', 'bench/common.ts']));
  expect(graph.circular()).toEqual([]);
}, 60_000);

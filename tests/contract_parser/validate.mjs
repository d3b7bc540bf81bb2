// Parses the MQTT contract with the official AsyncAPI parser (@asyncapi/parser) and prints
// every diagnostic with its severity and path. Exit 0: no error-severity diagnostic;
// exit 1: at least one; exit 2: the check itself could not run.
//
// Usage: node validate.mjs [path/to/asyncapi.yaml]   (default: the repo's contract)
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Parser, fromFile, DiagnosticSeverity } from '@asyncapi/parser';

const here = path.dirname(fileURLToPath(import.meta.url));
const defaultContract = path.resolve(here, '../../daemon/mqtt/contract/asyncapi.yaml');
const contract = path.resolve(process.argv[2] ?? defaultContract);

const SEVERITY = {
  [DiagnosticSeverity.Error]: 'error',
  [DiagnosticSeverity.Warning]: 'warning',
  [DiagnosticSeverity.Information]: 'info',
  [DiagnosticSeverity.Hint]: 'hint',
};

function shown(file) {
  const relative = path.relative(process.cwd(), file);
  return relative.startsWith('..') ? file : relative;
}

function where(diagnostic) {
  const pointer = '/' + diagnostic.path.map((part) => String(part).replaceAll('~', '~0').replaceAll('/', '~1')).join('/');
  const file = shown(diagnostic.source ?? contract);
  const line = diagnostic.range ? `:${diagnostic.range.start.line + 1}` : '';
  return `${file}${line} #${pointer}`;
}

async function main() {
  // fromFile passes the file's path as `source`, so relative $refs (schemas/*.json) resolve
  // against the contract's folder.
  const parser = new Parser();
  const { document, diagnostics } = await fromFile(parser, contract).parse();
  for (const diagnostic of diagnostics) {
    const severity = SEVERITY[diagnostic.severity] ?? String(diagnostic.severity);
    console.log(`${severity} ${diagnostic.code}: ${where(diagnostic)}: ${diagnostic.message}`);
  }
  const errors = diagnostics.filter((d) => d.severity === DiagnosticSeverity.Error).length;
  const warnings = diagnostics.filter((d) => d.severity === DiagnosticSeverity.Warning).length;
  const version = document ? document.version() : 'unparsed';
  console.log(`${shown(contract)}: AsyncAPI ${version}, ${errors} error(s), ${warnings} warning(s), ${diagnostics.length} diagnostic(s)`);
  process.exitCode = errors > 0 || document === undefined ? 1 : 0;
}

main().catch((error) => {
  console.error(`the contract check could not run: ${error?.stack ?? error}`);
  process.exitCode = 2;
});

// build.mjs: bundles src/ with esbuild into one HTML template (index.html with the script and the
// styles inlined, and the licences of every bundled package appended), which cli/ compiles into
// `cuprof`. Usage: node build.mjs --out report.html
import * as esbuild from 'esbuild';
import { readFileSync, writeFileSync, existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const out = args[args.indexOf('--out') + 1];
if (!out || args.indexOf('--out') < 0) {
  console.error('usage: node build.mjs --out report.html');
  process.exit(64);
}

const result = await esbuild.build({
  absWorkingDir: here,
  entryPoints: ['src/main.js'],
  bundle: true,
  minify: true,
  format: 'iife',
  target: ['chrome100', 'firefox100', 'safari15'],
  write: false,
  outdir: 'dist',
  metafile: true,
  keepNames: true, // d3-flame-graph tells its hierarchy's nodes by their class name
  legalComments: 'none', // the licences are appended whole, below
  logLevel: 'warning',
});
const js = result.outputFiles.find((f) => f.path.endsWith('.js')).text;
const cssFile = result.outputFiles.find((f) => f.path.endsWith('.css'));
const css = cssFile ? cssFile.text : '';

// Every npm package inside the bundle, with its version and licence (the page lists them and
// carries their licence texts, as their licences ask).
const packages = new Map();
for (const input of Object.keys(result.metafile.inputs)) {
  const m = input.match(/node_modules\/((?:@[^/]+\/)?[^/]+)\//);
  if (!m || packages.has(m[1])) continue;
  const dir = join(here, 'node_modules', m[1]);
  const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
  const licenceFile = ['LICENSE', 'LICENSE.md', 'LICENSE.txt', 'license']
    .map((f) => join(dir, f)).find((f) => existsSync(f));
  packages.set(m[1], {
    name: m[1], version: pkg.version, license: pkg.license,
    text: licenceFile ? readFileSync(licenceFile, 'utf8') : '',
  });
}
const list = [...packages.values()].sort((a, b) => a.name.localeCompare(b.name));
const libraries = JSON.stringify(list.map(({ name, version, license }) => ({ name, version, license })));
const texts = list.map((p) => `${p.name} ${p.version} (${p.license})\n\n${p.text.trim()}\n`)
  .join('\n' + '-'.repeat(72) + '\n\n');

// Inline text must not close its element early.
const safeScript = (s) => s.replace(/<\/(script)/gi, '<\\/$1').replace(/<!--/g, '<\\!--');
const safeComment = (s) => s.replace(/--/g, '- -');
let html = readFileSync(join(here, 'index.html'), 'utf8');
const put = (marker, text) => {
  if (!html.includes(marker)) throw new Error(`index.html lacks ${marker}`);
  html = html.split(marker).join(text);
};
put('/*VIEWER_CSS*/', css.replace(/<\/(style)/gi, '<\\/$1'));
put('/*VIEWER_JS*/', safeScript(js));
put('/*VIEWER_LIBRARIES*/', safeScript(libraries));
put('<!--VIEWER_LICENCES-->', `<!--\nLicences of the libraries bundled in this page:\n\n${safeComment(texts)}-->`);
if (!html.includes('<!--CUPROF_DATA-->')) throw new Error('index.html lacks the data marker');
writeFileSync(out, html);

/**
 * `npm run bench -- [name …]`: runs the named benchmarks (all when none is named). Each lives in
 * `bench/<name>.ts` and exports `run(args)`. Benchmarks are measurements, never tests: they print
 * figures and exit 0; docs/benchmarks.md records the figures with the command that produced them.
 */
const SUITES = [
  'delivery',
  'api',
  'tracker',
  'mix',
  'proxy',
  'retention',
  'reports',
  'history',
  'roi',
] as const;
type Suite = (typeof SUITES)[number];

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const named = args.filter((a) => !a.startsWith('-'));
  const unknown = named.filter((n) => !(SUITES as readonly string[]).includes(n));
  if (unknown.length > 0) {
    process.stderr.write(`unknown benchmark(s): ${unknown.join(', ')}; choose from ${SUITES.join(', ')}\n`);
    process.exit(1);
  }
  const chosen = (named.length > 0 ? named : SUITES) as Suite[];
  for (const name of chosen) {
    process.stdout.write(`\n== ${name} ==\n`);
    const mod = (await import(`./${name}.js`)) as { run: (args: string[]) => Promise<void> };
    await mod.run(args.filter((a) => a.startsWith('-')));
  }
  process.exit(0);
}

main().catch((err: unknown) => {
  process.stderr.write(
    `benchmark failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
  );
  process.exit(1);
});

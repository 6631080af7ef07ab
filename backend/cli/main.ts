import { runCli } from './run.js';

/** `npm run admin -- <command> [flags]`: see run.ts and docs/cli.md. */
process.exitCode = await runCli(
  process.argv.slice(2),
  { stdout: process.stdout, stderr: process.stderr },
  process.env,
);

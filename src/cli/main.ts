#!/usr/bin/env node
/** Entry point of the `cloudctl` binary: runs one invocation and exits with its code. */
import { startedByNpm, whenParentGone } from "../shared/parent-watch.js";
import { ExitCode } from "./exit-codes.js";
import { runCli } from "./program.js";

// Run by npx or `npm run` (npm, then a shell, then this): a follow or watch whose wrapper was
// killed has nobody left to print to.
if (startedByNpm()) whenParentGone(() => process.exit(ExitCode.failure), { generations: 2 });
const code = await runCli(process.argv);
// Flush stdout before exiting so piped output is never cut short.
process.stdout.write("", () => process.exit(code));

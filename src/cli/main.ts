#!/usr/bin/env node
/** Entry point of the `cloudctl` binary: runs one invocation and exits with its code. */
import { whenParentGone } from "../shared/parent-watch.js";
import { ExitCode } from "./exit-codes.js";
import { runCli } from "./program.js";

// A follow or watch whose wrapper (npx, npm run) was killed has nobody left to print to.
whenParentGone(() => process.exit(ExitCode.failure));
const code = await runCli(process.argv);
// Flush stdout before exiting so piped output is never cut short.
process.stdout.write("", () => process.exit(code));

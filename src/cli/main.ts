#!/usr/bin/env node
/** Entry point of the `cloudctl` binary: runs one invocation and exits with its code. */
import { runCli } from "./program.js";

const code = await runCli(process.argv);
// Flush stdout before exiting so piped output is never cut short.
process.stdout.write("", () => process.exit(code));

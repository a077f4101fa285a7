/**
 * Runs {@link streamUpload} in its own process, so a test can measure the server's memory without
 * the client's: `node --import tsx stream-upload-main.ts <url> <token> <fileName> <sizeBytes>`.
 * Prints the result as one JSON line.
 */
import { streamUpload } from "./stream-upload.js";

const [url, token, fileName, sizeBytes] = process.argv.slice(2);
const result = await streamUpload({ url, token, fileName, sizeBytes: Number(sizeBytes) });
process.stdout.write(`${JSON.stringify(result)}\n`);

/**
 * Writes `cluster.id` into controller.yml after a join, keeping the rest of the file (comments
 * included) as it is. The file is replaced through a temporary file and a rename.
 */
import { readFileSync, renameSync, statSync, writeFileSync } from "node:fs";
import { parseDocument } from "yaml";

/** Sets `cluster.id` in the YAML file at `path`. */
export function writeClusterIdToConfig(path: string, clusterId: string): void {
  const document = parseDocument(readFileSync(path, "utf8"));
  if (document.errors.length > 0) throw new Error(`${path} is not valid YAML: ${document.errors[0]!.message}`);
  document.setIn(["cluster", "id"], clusterId);
  const tmp = `${path}.cluster-id.tmp`;
  writeFileSync(tmp, document.toString(), { mode: statSync(path).mode & 0o777 });
  renameSync(tmp, path);
}

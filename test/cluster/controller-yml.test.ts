// Writing cluster.id into controller.yml after a join keeps everything else, comments included.
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse as parseYaml } from "yaml";
import { writeClusterIdToConfig } from "../../src/cluster/identity/controller-yml.js";

const dir = mkdtempSync(join(tmpdir(), "cloud-controller-yml-"));
after(() => rmSync(dir, { recursive: true, force: true }));

describe("writing cluster.id into controller.yml", () => {
  it("sets the key in an existing section and keeps comments and other keys", () => {
    const path = join(dir, "a.yml");
    writeFileSync(path, "# my controller\nhttp:\n  port: 8080 # the API\ncluster:\n  # pinned after the join\n  id: old\n", { mode: 0o640 });
    writeClusterIdToConfig(path, "new-id");
    const text = readFileSync(path, "utf8");
    assert.match(text, /# my controller/);
    assert.match(text, /# the API/);
    assert.deepEqual(parseYaml(text), { http: { port: 8080 }, cluster: { id: "new-id" } });
    assert.equal(statSync(path).mode & 0o777, 0o640, "the file mode is kept");
  });

  it("adds the section when it is missing, also to an empty file", () => {
    const path = join(dir, "b.yml");
    writeFileSync(path, "raft:\n  port: 9190\n");
    writeClusterIdToConfig(path, "c1");
    assert.deepEqual(parseYaml(readFileSync(path, "utf8")), { raft: { port: 9190 }, cluster: { id: "c1" } });
    const empty = join(dir, "c.yml");
    writeFileSync(empty, "");
    writeClusterIdToConfig(empty, "c2");
    assert.deepEqual(parseYaml(readFileSync(empty, "utf8")), { cluster: { id: "c2" } });
  });

  it("refuses a file that is not YAML and leaves it as it was", () => {
    const path = join(dir, "d.yml");
    writeFileSync(path, "a: [unclosed\n");
    assert.throws(() => writeClusterIdToConfig(path, "x"), /not valid YAML/);
    assert.equal(readFileSync(path, "utf8"), "a: [unclosed\n");
  });
});

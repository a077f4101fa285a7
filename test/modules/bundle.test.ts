// Module bundles: a good bundle opens with its manifest, digest and frontend; every hostile one is
// refused with a message saying why (traversal, links, size claims, forged or incomplete manifests,
// artifacts whose digest differs); signatures verify against trusted keys only.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { BundleRejected } from "../../src/modules/bundle/bundle-error.js";
import { openModuleBundle } from "../../src/modules/bundle/bundle-reader.js";
import { writeBundleTree } from "../../src/modules/bundle/bundle-tree.js";
import { parsePublicKey, signBundleDigest, verifyBundleSignature } from "../../src/modules/bundle/signature.js";
import { DEVELOPMENT_MODULE_PUBLIC_KEY_PEM } from "../../src/modules/bundle/development-key.js";
import { buildBundle, developmentPrivateKey, manifestOf, newSigningKey, rawTgz, sha256Of, signBundle } from "./support/bundles.js";

describe("module bundles", () => {
  let dir: string;
  let spool: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "module-bundles-"));
    spool = join(dir, "spool");
    await mkdir(spool);
  });
  after(() => rm(dir, { recursive: true, force: true }));

  const refused = async (path: string, expected: RegExp) => {
    await assert.rejects(openModuleBundle(path, spool), (error: unknown) => {
      assert.ok(error instanceof BundleRejected, String(error));
      assert.match(error.message, expected);
      return true;
    });
    assert.deepEqual(await readdir(spool), [], "nothing of a refused bundle stays in the spool");
  };

  const goodFiles = (version = "1.0.0", frontendText = "export default 1;") => ({
    "META-INF/cloud/module.yaml": manifestOf("motd", version, { frontend: { sdkVersion: 1, entry: "index.js" } }),
    "backend/index.js": "export default { start() {} };\n",
    "META-INF/frontend/module-frontend.json": JSON.stringify({ title: "MOTD" }),
    "META-INF/frontend/index.js": frontendText,
  });

  it("opens a good bundle: manifest, digest, files, frontend; the backend hash ignores frontend changes", async () => {
    const path = await buildBundle(join(dir, "good"), join(dir, "good.tgz"), goodFiles());
    const bundle = await openModuleBundle(path, spool);
    try {
      assert.equal(bundle.manifest.id, "motd");
      assert.equal(bundle.sha256, await sha256Of(path));
      assert.deepEqual([...bundle.files.keys()].sort(), [
        "META-INF/cloud/module.yaml",
        "META-INF/frontend/index.js",
        "META-INF/frontend/module-frontend.json",
        "backend/index.js",
      ]);
      assert.deepEqual(bundle.frontend?.files, ["index.js", "module-frontend.json"]);
      const tree = await writeBundleTree(bundle.files, join(dir, "tree", "motd"));
      assert.equal(await readFile(join(tree, "backend/index.js"), "utf8"), "export default { start() {} };\n");
      const other = await openModuleBundle(await buildBundle(join(dir, "good2"), join(dir, "good2.tgz"), goodFiles("1.0.0", "export default 2;")), spool);
      assert.equal(other.backendHash, bundle.backendHash);
      assert.notEqual(other.frontend?.contentHash, bundle.frontend?.contentHash);
      await other.dispose();
    } finally {
      await bundle.dispose();
    }
    // the same directory packs to the same bytes
    assert.equal(await sha256Of(await buildBundle(join(dir, "good"), join(dir, "good-again.tgz"), goodFiles())), await sha256Of(path));
  });

  it("refuses hostile archives: traversal, absolute paths, symbolic and hard links, size claims, non-archives", async () => {
    const manifest = "id: evil\nversion: 1.0.0\nbackend:\n  entrypoint: index.js\n";
    const base = [
      { name: "META-INF/cloud/module.yaml", data: manifest },
      { name: "index.js", data: "export default {}" },
    ];
    await refused(await rawTgz(join(dir, "traversal.tgz"), [...base, { name: "../../escaped.js", data: "x" }]), /bundle: .*\.\. segment/);
    await refused(await rawTgz(join(dir, "absolute.tgz"), [...base, { name: "/etc/cron.d/evil", data: "x" }]), /bundle: .*absolute path/);
    await refused(await rawTgz(join(dir, "symlink.tgz"), [...base, { name: "link.js", type: "symlink", linkname: "/etc/passwd" }]), /bundle: .*link/);
    await refused(await rawTgz(join(dir, "hardlink.tgz"), [...base, { name: "hard.js", type: "link", linkname: "index.js" }]), /bundle: .*link/);
    await refused(
      await rawTgz(join(dir, "oversize.tgz"), [...base, { name: "huge.bin", type: "file", claimedSize: 300 * 1024 * 1024 }]),
      /bundle: unpacks to more than/,
    );
    const noise = join(dir, "noise.tgz");
    await writeFile(noise, randomBytes(4096));
    await refused(noise, /bundle: /);
  });

  it("refuses forged or incomplete contents, naming the field", async () => {
    const build = (name: string, files: Record<string, string | object>) => buildBundle(join(dir, name), join(dir, `${name}.tgz`), files);
    await refused(await build("no-manifest", { "backend/index.js": "" }), /META-INF\/cloud\/module\.yaml is missing/);
    await refused(
      await build("bad-manifest", { "META-INF/cloud/module.yaml": { id: "platform", version: "1.0.0", backend: { entrypoint: "a.js" } }, "a.js": "" }),
      /module\.yaml: id: "platform" is reserved/,
    );
    await refused(await build("no-backend", { "META-INF/cloud/module.yaml": { id: "x", version: "1.0.0" } }), /module\.yaml: backend: is required/);
    await refused(
      await build("no-entry-file", { "META-INF/cloud/module.yaml": manifestOf("x") }),
      /backend\.controller\.entrypoint: file backend\/index\.js is not in the bundle/,
    );
    await refused(
      await build("no-descriptor", {
        "META-INF/cloud/module.yaml": manifestOf("x", "1.0.0", { frontend: { sdkVersion: 1, entry: "index.js" } }),
        "backend/index.js": "",
      }),
      /module-frontend\.json is missing/,
    );
    const variant = { id: "v", mcVersionRange: "*", runtimeApiVersion: 1, artifact: "plugins/x.jar", sha256: "0".repeat(64), installPath: "plugins/" };
    await refused(
      await build("bad-artifact", {
        "META-INF/cloud/module.yaml": manifestOf("x", "1.0.0", {
          extensions: [{ id: "e", target: "server/paper", activation: "always", variants: [variant] }],
        }),
        "backend/index.js": "",
        "plugins/x.jar": "not the declared bytes",
      }),
      /extensions\[0\]\.variants\[0\]\.sha256: does not match plugins\/x\.jar/,
    );
    await refused(
      await build("missing-artifact", {
        "META-INF/cloud/module.yaml": manifestOf("x", "1.0.0", {
          extensions: [{ id: "e", target: "server/paper", activation: "always", variants: [variant] }],
        }),
        "backend/index.js": "",
      }),
      /extensions\[0\]\.variants\[0\]\.artifact: plugins\/x\.jar is not in the bundle/,
    );
  });
});

describe("module signatures", () => {
  let dir: string;
  let bundle: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "module-signatures-"));
    bundle = await buildBundle(join(dir, "m"), join(dir, "m.tgz"), { "META-INF/cloud/module.yaml": manifestOf("signed"), "backend/index.js": "" });
  });
  after(() => rm(dir, { recursive: true, force: true }));

  it("verifies a base64 or raw detached Ed25519 signature over the bundle's sha256 against a trusted key", async () => {
    const key = newSigningKey();
    const trusted = [parsePublicKey(key.publicKeyPem, "config")];
    const sidecar = await signBundle(bundle, key.privateKeyPem);
    const digest = await sha256Of(bundle);
    assert.equal(verifyBundleSignature(digest, Buffer.from(sidecar), trusted).id, trusted[0].id);
    assert.equal(verifyBundleSignature(digest, Buffer.from(sidecar, "base64"), trusted).origin, "config");
    const dev = parsePublicKey(DEVELOPMENT_MODULE_PUBLIC_KEY_PEM, "development");
    assert.equal(verifyBundleSignature(digest, Buffer.from(await signBundle(bundle, await developmentPrivateKey())), [dev]).origin, "development");
  });

  it("refuses a signature of another key, of other bytes, a garbled sidecar, and any signature with no key configured", async () => {
    const key = newSigningKey();
    const trusted = [parsePublicKey(key.publicKeyPem, "config")];
    const digest = await sha256Of(bundle);
    const signatureFailure = (error: unknown) => error instanceof BundleRejected && error.signature;
    assert.throws(() => verifyBundleSignature(digest, Buffer.from(Buffer.alloc(64).toString("base64")), trusted), signatureFailure);
    const otherKey = newSigningKey();
    assert.throws(() => verifyBundleSignature(digest, Buffer.from(sigOf(digest, otherKey.privateKeyPem)), trusted), /does not verify against any trusted key/);
    assert.throws(() => verifyBundleSignature("0".repeat(64), Buffer.from(sigOf(digest, key.privateKeyPem)), trusted), /does not verify/);
    assert.throws(() => verifyBundleSignature(digest, Buffer.from("not a signature"), trusted), /neither a 64-byte Ed25519 signature nor its base64 text/);
    assert.throws(() => verifyBundleSignature(digest, Buffer.from(sigOf(digest, key.privateKeyPem)), []), /no trusted public key is configured/);
    assert.throws(() => parsePublicKey(newSigningKey().privateKeyPem.replace("PRIVATE", "PUBLIC"), "config"), /is not a public key/);
  });
});

const sigOf = (digest: string, pem: string) => signBundleDigest(digest, pem);

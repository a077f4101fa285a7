/**
 * Installing, upgrading and removing modules for the cluster (spec document 3, "Module
 * management"): a bundle (uploaded, or pulled from a registry and checked against the index's
 * sha256) is opened and checked, its signature verified against the trusted keys (unsigned ones
 * refused while `modules.signing.required`), then, under the module's cluster-wide record lock, its
 * blobs are stored, it is loaded here first, and only once it loaded is the record written and the
 * other controllers told. A module that fails to load is not installed (or, on upgrade, the previous
 * version comes back) and the route answers 422. MODULE_* events are published here, once.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { join } from "node:path";
import { EventTypes } from "../events/event-types.js";
import type { Logger } from "../logs/types.js";
import { ApiError } from "../shared/errors.js";
import type { Clock } from "../shared/clock.js";
import type { FileContent } from "../templates/file-content.js";
import { BundleRejected } from "./bundle/bundle-error.js";
import { openModuleBundle, type OpenedBundle } from "./bundle/bundle-reader.js";
import { writeBundleTree } from "./bundle/bundle-tree.js";
import { verifyBundleSignature, type TrustedKey } from "./bundle/signature.js";
import type { ModuleManager } from "./host/module-manager.js";
import type { LoadableModule } from "./host/module-runtime.js";
import type { ModuleRecord, ModuleRecords } from "./module-records.js";
import type { ModuleSync } from "./module-sync.js";

/** A bundle as a route received it: spooled to disk, with its digest and chunk hashes. */
export interface UploadedBundle {
  path: string;
  content: FileContent;
  /** The detached signature sidecar, when one came. */
  signature: Buffer | null;
  /** `upload`, or the registry index it came from. */
  source: string;
}

export interface ModuleServiceDeps {
  records: ModuleRecords;
  manager: ModuleManager;
  sync: ModuleSync;
  /** The cluster-wide lock of one module's record. */
  lock: { run<T>(name: string, fn: () => Promise<T>): Promise<T> };
  clock: Clock;
  logger: Logger;
  spoolDirectory: string;
  signing: { required: boolean; keys: readonly TrustedKey[] };
  /** Publishes a MODULE_* event for the cluster. */
  publish(type: string, data: Record<string, unknown>): void;
}

type Operation = "install" | "upgrade";
const CODES: Record<Operation, string> = { install: "PLATFORM_INSTALL_FAILED", upgrade: "PLATFORM_UPGRADE_FAILED" };

/** The error a refused bundle answers with. */
function refusal(error: unknown, operation: Operation): unknown {
  if (!(error instanceof BundleRejected)) return error;
  return new ApiError(422, error.signature ? "SIGNATURE_VERIFICATION_FAILED" : CODES[operation], error.message);
}

/** See the module comment. */
export class ModuleService {
  constructor(private readonly deps: ModuleServiceDeps) {}

  /** Installs a new module; 409 when it is installed already. */
  async install(upload: UploadedBundle, by: string): Promise<ModuleRecord> {
    return this.withBundle(upload, "install", async (bundle, signed) => {
      const id = bundle.manifest.id;
      return this.locked(id, async () => {
        if (await this.deps.records.get(id)) throw new ApiError(409, CODES.install, `Module ${id} is installed; upgrade it instead`);
        return this.commit(bundle, upload, signed, by, null);
      });
    });
  }

  /** Upgrades an installed module; 404 when it is not installed, 409 when the bundle is another module. */
  async upgrade(id: string, upload: UploadedBundle, by: string): Promise<ModuleRecord> {
    if (!(await this.deps.records.get(id))) throw new ApiError(404, CODES.upgrade, `Module ${id} is not installed`);
    return this.withBundle(upload, "upgrade", async (bundle, signed) => {
      if (bundle.manifest.id !== id) throw new ApiError(409, CODES.upgrade, `The bundle is module ${bundle.manifest.id}, not ${id}`);
      return this.locked(id, async () => {
        const previous = await this.deps.records.get(id);
        if (!previous) throw new ApiError(404, CODES.upgrade, `Module ${id} is not installed`);
        return this.commit(bundle, upload, signed, by, previous);
      });
    });
  }

  /** Installs, or upgrades when installed (a registry pull); `created` tells which. */
  async installOrUpgrade(upload: UploadedBundle, by: string): Promise<{ record: ModuleRecord; created: boolean }> {
    return this.withBundle(upload, "install", async (bundle, signed) => {
      const id = bundle.manifest.id;
      return this.locked(id, async () => {
        const previous = await this.deps.records.get(id);
        return { record: await this.commit(bundle, upload, signed, by, previous), created: previous === null };
      });
    });
  }

  /** Removes a module: stopped and unloaded everywhere, its record and bundle gone (its storage stays). */
  async remove(id: string): Promise<ModuleRecord> {
    return this.locked(id, async () => {
      const record = await this.deps.records.get(id);
      if (!record) throw new ApiError(404, "NOT_FOUND", `Module ${id} is not installed`);
      await this.deps.manager.remove(id, { announce: true });
      await this.deps.records.delete(id);
      await this.deps.records.collectBundle(record.bundle);
      await this.deps.sync.removeTrees(id, null);
      this.deps.publish(EventTypes.MODULE_UNLOADED, { moduleName: id });
      await this.deps.sync.announce(id);
      return record;
    });
  }

  /**
   * Re-stages a module's dashboard bundle. With a bundle, only its frontend may differ from the
   * installed one (409 otherwise): it is stored and staged while the backend keeps running.
   */
  async reloadFrontend(id: string, upload: UploadedBundle | null, by: string): Promise<ModuleRecord> {
    const apply = async (bundle: OpenedBundle | null, signed: Signed | null) =>
      this.locked(id, async () => {
        let record = await this.deps.records.get(id);
        if (!record) throw new ApiError(404, "NOT_FOUND", `Module ${id} is not installed`);
        let tree = this.deps.sync.treeOf(id, record.bundle.sha256);
        if (bundle && signed && upload) {
          if (bundle.manifest.id !== id) throw new ApiError(409, "CONFLICT", `The bundle is module ${bundle.manifest.id}, not ${id}`);
          if (bundle.backendHash !== record.backendHash)
            throw new ApiError(409, "CONFLICT", `More than the frontend of module ${id} changed; upgrade it instead`);
          await this.deps.records.storeBundle(upload.content);
          tree = await writeBundleTree(bundle.files, this.deps.sync.treeOf(id, bundle.sha256));
          const previous = record;
          record = this.recordOf(bundle, upload, signed, by, previous);
          await this.deps.records.put(record);
          const runtime = this.deps.manager.get(id);
          if (runtime) runtime.module = { ...runtime.module, directory: tree, bundleSha256: bundle.sha256 };
          if (previous.bundle.sha256 !== bundle.sha256) await this.deps.records.collectBundle(previous.bundle);
          await this.deps.sync.removeTrees(id, tree);
        } else {
          await this.deps.sync.materialize(record);
        }
        await this.deps.sync.stageFrontend(id, tree);
        this.deps.publish(EventTypes.MODULE_FRONTEND_RELOADED, { moduleName: id, contentHash: record.frontend?.contentHash ?? "" });
        await this.deps.sync.announce(id);
        return record;
      });
    if (!upload) return apply(null, null);
    return this.withBundle(upload, "upgrade", (bundle, signed) => apply(bundle, signed));
  }

  /** Opens and checks the bundle and its signature, runs `use`, then removes the spool. */
  private async withBundle<T>(upload: UploadedBundle, operation: Operation, use: (bundle: OpenedBundle, signed: Signed) => Promise<T>): Promise<T> {
    const spool = await mkdtemp(join(this.deps.spoolDirectory, "cloud-module-"));
    let bundle: OpenedBundle | null = null;
    try {
      try {
        bundle = await openModuleBundle(upload.path, spool);
        if (bundle.sha256 !== upload.content.sha256) throw new Error("the bundle changed on disk while it was read");
        return await use(bundle, this.verify(bundle.sha256, upload.signature));
      } catch (error) {
        throw refusal(error, operation);
      }
    } finally {
      await bundle?.dispose();
      await rm(spool, { recursive: true, force: true });
    }
  }

  private verify(sha256: string, signature: Buffer | null): Signed {
    if (signature === null) {
      if (this.deps.signing.required) throw new BundleRejected("signature: the bundle is unsigned and modules.signing.required is true", true);
      return { signature: null, signedBy: null };
    }
    const key = verifyBundleSignature(sha256, signature, this.deps.signing.keys);
    return { signature: signature.toString("base64"), signedBy: key.id };
  }

  /** Runs `fn` under the module's cluster-wide lock, one local operation at a time (with the syncs). */
  private locked<T>(id: string, fn: () => Promise<T>): Promise<T> {
    return this.deps.sync.operations.run("modules", () => this.deps.lock.run(id, fn));
  }

  /** Stores the bundle, loads it here, and only once it loaded writes the record and tells the others. */
  private async commit(bundle: OpenedBundle, upload: UploadedBundle, signed: Signed, by: string, previous: ModuleRecord | null): Promise<ModuleRecord> {
    const { manager, records, sync } = this.deps;
    const id = bundle.manifest.id;
    const operation: Operation = previous ? "upgrade" : "install";
    await records.storeBundle(upload.content);
    const directory = await writeBundleTree(bundle.files, sync.treeOf(id, bundle.sha256));
    const next: LoadableModule = { manifest: bundle.manifest, directory, bundleSha256: bundle.sha256, backendHash: bundle.backendHash };
    const record = this.recordOf(bundle, upload, signed, by, previous);
    if (bundle.manifest.backend.controller) {
      const runtime = manager.get(id) ? await manager.upgrade(next, { announce: true }) : await manager.install(next, { announce: true });
      if (runtime.state === "FAILED") {
        const reason = runtime.failure?.reason ?? "it failed";
        if (previous?.manifest.backend.controller) await manager.upgrade(await sync.materialize(previous), { announce: false });
        else await manager.remove(id, { announce: false });
        await sync.removeTrees(id, previous ? sync.treeOf(id, previous.bundle.sha256) : null);
        if (previous?.bundle.sha256 !== bundle.sha256) await records.collectBundle(record.bundle);
        throw new ApiError(422, CODES[operation], `Module ${id} ${bundle.manifest.version} failed to load: ${reason}`);
      }
    }
    await records.put(record);
    if (previous && previous.bundle.sha256 !== bundle.sha256) await records.collectBundle(previous.bundle);
    await sync.stageFrontend(id, directory);
    await sync.removeTrees(id, directory);
    this.deps.publish(EventTypes.MODULE_LOADED, { moduleName: id, hasFrontend: bundle.frontend !== null });
    await sync.announce(id);
    this.deps.logger.info(
      `Module ${id} ${bundle.manifest.version} ${previous ? `upgraded from ${previous.version}` : "installed"} (${signed.signedBy ? `signed by ${signed.signedBy}` : "unsigned"})`,
    );
    return record;
  }

  private recordOf(bundle: OpenedBundle, upload: UploadedBundle, signed: Signed, by: string, previous: ModuleRecord | null): ModuleRecord {
    const now = new Date(this.deps.clock.nowMs()).toISOString();
    return {
      _id: bundle.manifest.id,
      version: bundle.manifest.version,
      manifest: bundle.manifest,
      bundle: { sha256: bundle.sha256, sizeBytes: bundle.sizeBytes, ...(upload.content.chunks ? { chunks: [...upload.content.chunks] } : {}) },
      signature: signed.signature,
      signedBy: signed.signedBy,
      backendHash: bundle.backendHash,
      frontend:
        bundle.frontend && bundle.manifest.frontend
          ? { entry: bundle.manifest.frontend.entry, contentHash: bundle.frontend.contentHash, files: bundle.frontend.files.length }
          : null,
      source: upload.source,
      installedAt: previous?.installedAt ?? now,
      updatedAt: now,
      installedBy: by,
      generation: (previous?.generation ?? 0) + 1,
    };
  }
}

interface Signed {
  signature: string | null;
  signedBy: string | null;
}

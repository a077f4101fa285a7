/**
 * Keeps this controller running what the records say (docs/decisions/modules.md, "Several
 * controllers"): a module installed, upgraded or removed through any controller is laid out here
 * from the shared blob store (verified again) and loaded, upgraded or removed, without announcing
 * anything (the controller that took the request announced it once for the cluster). Controllers
 * hear of a change on the `cloud:v1:modules:changed` channel and, as pub/sub may drop a message, by
 * reading the records every `syncIntervalMs`. Local operations and syncs run one at a time.
 */
import { cp, mkdir, mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { existsSync } from "node:fs";
import { join } from "node:path";
import type { Logger } from "../logs/types.js";
import type { Clock, Timer } from "../shared/clock.js";
import type { KvStore } from "../store/ports.js";
import { openModuleBundle } from "./bundle/bundle-reader.js";
import { writeBundleTree } from "./bundle/bundle-tree.js";
import { FRONTEND_DIRECTORY } from "./manifest/manifest-types.js";
import type { ModuleManager } from "./host/module-manager.js";
import type { LoadableModule } from "./host/module-runtime.js";
import { SerialQueue } from "./host/serial.js";
import type { ModuleRecord, ModuleRecords } from "./module-records.js";

/** The channel announcing a change of the records (the message is the module id: a nudge to sync). */
export const MODULES_CHANGED_CHANNEL = "cloud:v1:modules:changed";
/** How often every controller reads the records. */
export const MODULE_SYNC_INTERVAL_MS = 5_000;

export interface ModuleSyncDeps {
  records: ModuleRecords;
  manager: ModuleManager;
  kv: KvStore;
  clock: Clock;
  logger: Logger;
  /** `<data.dir>/modules`: bundle trees under `<id>/<sha256>`, staged frontends under `frontend/<id>`. */
  directory: string;
  spoolDirectory: string;
  syncIntervalMs?: number;
}

/** See the module comment. */
export class ModuleSync {
  /** Local operations and syncs, one at a time. */
  readonly operations = new SerialQueue();
  private timer: Timer | null = null;
  private unsubscribe: (() => Promise<void>) | null = null;
  private lastSyncMs: number | null = null;
  private lastError: string | null = null;
  private stopped = false;

  constructor(private readonly deps: ModuleSyncDeps) {}

  /** Loads what the records hold, then follows them. */
  async start(): Promise<void> {
    await mkdir(this.deps.directory, { recursive: true });
    // Bundle trees live below: their .js files are ES modules unless a bundle's own package.json says otherwise.
    await writeFile(join(this.deps.directory, "package.json"), `${JSON.stringify({ type: "module", private: true })}\n`);
    this.unsubscribe = await this.deps.kv.subscribe(MODULES_CHANGED_CHANNEL, () => void this.sync().catch(() => undefined));
    this.timer = this.deps.clock.setInterval(() => void this.sync().catch(() => undefined), this.deps.syncIntervalMs ?? MODULE_SYNC_INTERVAL_MS, {
      unref: true,
    });
    await this.sync();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.timer?.cancel();
    await this.unsubscribe?.().catch(() => undefined);
    await this.operations.run("modules", async () => undefined);
  }

  /** Tells the other controllers to sync now. */
  async announce(moduleId: string): Promise<void> {
    await this.deps.kv
      .publish(MODULES_CHANGED_CHANNEL, moduleId)
      .catch((error: unknown) => this.deps.logger.warn(`Announcing the change of module ${moduleId} failed`, error));
  }

  /** Whether the last sync succeeded within three intervals. */
  healthy(): boolean {
    const interval = this.deps.syncIntervalMs ?? MODULE_SYNC_INTERVAL_MS;
    return !this.stopped && this.lastError === null && this.lastSyncMs !== null && this.deps.clock.nowMs() - this.lastSyncMs <= 3 * interval;
  }

  /** Brings this controller to what the records say. */
  sync(): Promise<void> {
    return this.operations.run("modules", () => this.syncNow());
  }

  /** The tree a bundle is laid out in. */
  treeOf(id: string, sha256: string): string {
    return join(this.deps.directory, id, sha256);
  }

  /** Lays out a record's bundle from the blob store (verified again) unless it is there. */
  async materialize(record: ModuleRecord): Promise<LoadableModule> {
    const directory = this.treeOf(record._id, record.bundle.sha256);
    if (!existsSync(directory)) {
      const spool = await mkdtemp(join(this.deps.spoolDirectory, "cloud-module-"));
      try {
        const file = join(spool, "bundle");
        if (!(await this.deps.records.fetchBundle(record, file)))
          throw new Error(`the bundle blobs of module ${record._id} ${record.version} are missing from the blob store`);
        const bundle = await openModuleBundle(file, spool);
        try {
          if (bundle.sha256 !== record.bundle.sha256)
            throw new Error(`the stored bundle of module ${record._id} hashes to ${bundle.sha256}, its record says ${record.bundle.sha256}`);
          await writeBundleTree(bundle.files, directory);
        } finally {
          await bundle.dispose();
        }
      } finally {
        await rm(spool, { recursive: true, force: true });
      }
    }
    return { manifest: record.manifest, directory, bundleSha256: record.bundle.sha256, backendHash: record.backendHash };
  }

  /** Copies a module's frontend into `frontend/<id>` (replacing what was staged). */
  async stageFrontend(id: string, tree: string | null): Promise<void> {
    const staged = join(this.deps.directory, "frontend", id);
    await rm(staged, { recursive: true, force: true });
    if (!tree || !existsSync(join(tree, FRONTEND_DIRECTORY))) return;
    await mkdir(join(this.deps.directory, "frontend"), { recursive: true });
    await cp(join(tree, FRONTEND_DIRECTORY), staged, { recursive: true });
  }

  /** Removes a module's trees except `keep` (and its staged frontend when nothing is kept). */
  async removeTrees(id: string, keep: string | null): Promise<void> {
    const root = join(this.deps.directory, id);
    if (!keep) {
      await rm(root, { recursive: true, force: true });
      await this.stageFrontend(id, null);
      return;
    }
    for (const name of await readdir(root).catch(() => [] as string[]))
      if (join(root, name) !== keep) await rm(join(root, name), { recursive: true, force: true });
  }

  private async syncNow(): Promise<void> {
    if (this.stopped) return;
    const { manager, logger } = this.deps;
    try {
      const records = await this.deps.records.list();
      const wanted = new Set<string>();
      let failures = 0;
      for (const record of records) {
        if (!record.manifest.backend.controller) continue;
        wanted.add(record._id);
        const runtime = manager.get(record._id);
        if (runtime?.module.bundleSha256 === record.bundle.sha256) continue;
        try {
          const loadable = await this.materialize(record);
          if (!runtime) {
            await manager.install(loadable, { announce: false });
          } else if (runtime.module.backendHash === record.backendHash && runtime.state !== "FAILED") {
            // Only the frontend changed: the worker keeps running.
            runtime.module = loadable;
          } else {
            await manager.upgrade(loadable, { announce: false });
          }
          await this.stageFrontend(record._id, loadable.directory);
          await this.removeTrees(record._id, loadable.directory);
        } catch (error) {
          failures++;
          logger.error(`Module ${record._id} ${record.version} could not be laid out here`, error);
        }
      }
      for (const runtime of manager.list()) {
        if (wanted.has(runtime.id)) continue;
        await manager.remove(runtime.id, { announce: false });
        await this.removeTrees(runtime.id, null);
      }
      this.lastError = failures > 0 ? `${failures} modules could not be laid out` : null;
      this.lastSyncMs = this.deps.clock.nowMs();
    } catch (error) {
      this.lastError = (error as Error).message;
      logger.warn("Reading the module records failed; retrying on the next sync", error);
      throw error;
    }
  }
}

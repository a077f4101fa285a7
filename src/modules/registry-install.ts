/**
 * Installing from a registry and the registry catalog (spec document 3: "the controller pulls the
 * jar from a configured registry, checks sha256 against the index and verifies the signature";
 * `GET /api/v1/modules/platform/registry` answers "an object with registries and modules"). Only
 * configured registries are read: a request may pin one of them, never name another URL.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { join } from "node:path";
import semver from "semver";
import { ApiError } from "../shared/errors.js";
import type { ModuleRecord } from "./module-records.js";
import type { ModuleService } from "./module-service.js";
import {
  downloadBundle,
  downloadSignature,
  fetchRegistryIndex,
  parseModuleSpec,
  RegistryUnavailable,
  type RegistryIndex,
  type RegistryVersion,
} from "./registry-client.js";

/** One module of the catalog. */
export interface CatalogModule {
  id: string;
  /** The registry index URL offering it. */
  registry: string;
  description: string;
  tags: string[];
  /** The newest version offered. */
  latest: string;
  versions: string[];
  installedVersion: string | null;
  /** The newest version has no signature. */
  unsigned: boolean;
}

export interface CatalogView {
  registries: { url: string; reachable: boolean; error: string | null; moduleCount: number }[];
  modules: CatalogModule[];
}

/** Every configured registry's index (read in parallel) with the installed versions. */
export async function registryCatalog(registries: readonly string[], installed: readonly ModuleRecord[]): Promise<CatalogView> {
  const results = await Promise.all(
    registries.map(async (url) =>
      fetchRegistryIndex(url).then(
        (index) => ({ url, index, error: null }),
        (error: unknown) => ({ url, index: null, error: (error as Error).message }),
      ),
    ),
  );
  const modules: CatalogModule[] = [];
  const seen = new Set<string>();
  for (const { url, index } of results) {
    for (const module of index?.modules ?? []) {
      if (seen.has(module.id)) continue;
      seen.add(module.id);
      const latest = module.versions[0];
      modules.push({
        id: module.id,
        registry: url,
        description: module.description,
        tags: module.tags,
        latest: latest.version,
        versions: module.versions.map((v) => v.version),
        installedVersion: installed.find((record) => record._id === module.id)?.version ?? null,
        unsigned: latest.signatureUrl === null,
      });
    }
  }
  modules.sort((a, b) => a.id.localeCompare(b.id));
  return { registries: results.map(({ url, index, error }) => ({ url, reachable: index !== null, error, moduleCount: index?.modules.length ?? 0 })), modules };
}

export interface RegistryInstallRequest {
  spec: string;
  /** A configured registry to pull from; null: the first that offers the module. */
  registry: string | null;
  registries: readonly string[];
  spoolDirectory: string;
  service: ModuleService;
  by: string;
}

/** Finds the version, downloads and checks it, and installs or upgrades it. */
export async function installFromRegistry(request: RegistryInstallRequest): Promise<{ record: ModuleRecord; created: boolean }> {
  const { id, version } = parseModuleSpec(request.spec);
  if (request.registries.length === 0) throw new ApiError(409, "PLATFORM_INSTALL_FAILED", "No module registry is configured (modules.registries)");
  if (request.registry !== null && !request.registries.includes(request.registry))
    throw new ApiError(422, "PLATFORM_INSTALL_FAILED", `registry: ${request.registry} is not one of the configured registries (modules.registries)`);
  const candidates = request.registry !== null ? [request.registry] : request.registries;
  let found: { index: RegistryIndex; version: RegistryVersion } | null = null;
  const unreachable: string[] = [];
  for (const url of candidates) {
    let index: RegistryIndex;
    try {
      index = await fetchRegistryIndex(url);
    } catch (error) {
      if (!(error instanceof RegistryUnavailable)) throw error;
      unreachable.push(error.message);
      continue;
    }
    const module = index.modules.find((m) => m.id === id);
    const chosen = module && (version === null ? module.versions[0] : module.versions.find((v) => semver.eq(v.version, version)));
    if (chosen) {
      found = { index, version: chosen };
      break;
    }
  }
  if (!found) {
    if (unreachable.length === candidates.length) throw new ApiError(502, "PLATFORM_INSTALL_FAILED", unreachable.join("; "));
    throw new ApiError(
      404,
      "PLATFORM_INSTALL_FAILED",
      `Module ${request.spec} is not offered by ${candidates.join(", ")}${unreachable.length ? ` (${unreachable.join("; ")})` : ""}`,
    );
  }
  const spool = await mkdtemp(join(request.spoolDirectory, "cloud-registry-"));
  try {
    const path = join(spool, "bundle");
    let content;
    let signature: Buffer | null;
    try {
      content = await downloadBundle(found.version, path);
      signature = await downloadSignature(found.version);
    } catch (error) {
      if (error instanceof RegistryUnavailable) throw new ApiError(502, "PLATFORM_INSTALL_FAILED", error.message);
      throw error;
    }
    return await request.service.installOrUpgrade({ path, content, signature, source: found.index.url }, request.by);
  } finally {
    await rm(spool, { recursive: true, force: true });
  }
}

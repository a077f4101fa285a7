/**
 * A module manifest after validation (`META-INF/cloud/module.yaml`, spec document 3, "Manifest"):
 * every default filled in, hosts lower-cased, the legacy `backend.entrypoint` moved to
 * `backend.controller`, and each entrypoint split into its file and export.
 */

/** Where a module runs. */
export type ModuleHost = "controller" | "daemon";

/** A backend of one host: an ES module file of the bundle and the export it names. */
export interface BackendEntry {
  /** As written: `path/to/file.js#Export` (no `#` means the default export). */
  entrypoint: string;
  /** The file, relative to the bundle root. */
  file: string;
  /** The export's name (`default` when none was written). */
  exportName: string;
  reloadable: boolean;
}

export interface ProvidedCapability {
  id: string;
  version: string;
  deprecatedSince: string | null;
  removedIn: string | null;
}

export interface RequiredCapability {
  id: string;
  versionRange: string;
}

export type ExtensionActivation = "explicit-group-attach" | "default-enabled" | "always";

export interface ExtensionVariant {
  id: string;
  mcVersionRange: string;
  runtimeApiVersion: number;
  artifact: string;
  sha256: string;
  installPath: string;
}

export interface WorkloadExtension {
  id: string;
  /** `<workload type>/<runtime family>`, e.g. `server/paper`. */
  target: string;
  activation: ExtensionActivation;
  conflicts: string[];
  variants: ExtensionVariant[];
}

export interface ModuleManifest {
  manifestVersion: 1 | 2;
  id: string;
  version: string;
  hosts: ModuleHost[];
  backend: { controller: BackendEntry | null; daemon: BackendEntry | null };
  frontend: { sdkVersion: 1; entry: string } | null;
  storage: { mongo: boolean; redis: boolean; limits: { mongoDocuments: number; redisKeys: number } };
  capabilities: { provides: ProvidedCapability[]; requires: RequiredCapability[] };
  extensions: WorkloadExtension[];
}

/** Where the manifest sits in a bundle. */
export const MANIFEST_PATH = "META-INF/cloud/module.yaml";
/** Where a module's dashboard bundle sits, and its descriptor. */
export const FRONTEND_DIRECTORY = "META-INF/frontend/";
export const FRONTEND_DESCRIPTOR = "META-INF/frontend/module-frontend.json";
/** The id no module may take: the management routes live under it. */
export const RESERVED_MODULE_ID = "platform";

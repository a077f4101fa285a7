/**
 * A populated control plane for the backup tests and the benchmark: groups, instance records,
 * users, roles, audit entries and templates with several versions, written through the services
 * (instance records straight into their collection, as the scheduler writes them). And the
 * comparisons a round trip is judged by: every bundled collection, document by document, and every
 * template version's hash with the tar.gz of its files.
 */
import { createHash, randomBytes } from "node:crypto";
import { isBundledCollection } from "../../src/backup/bundle-format.js";
import type { AuditService } from "../../src/audit/audit-service.js";
import type { AuthService } from "../../src/auth/auth-service.js";
import type { GroupService } from "../../src/domain/groups/group-service.js";
import type { Doc, DocumentStore } from "../../src/store/ports.js";
import type { TemplateService } from "../../src/templates/template-service.js";

export interface PopulateScale {
  groups: number;
  instances: number;
  users: number;
  auditEntries: number;
  templates: number;
  versionsPerTemplate: number;
  /** Bytes of each template's one large file (random, so it does not compress). */
  templateFileBytes: number;
}

export const SMALL_SCALE: PopulateScale = {
  groups: 20,
  instances: 120,
  users: 5,
  auditEntries: 30,
  templates: 2,
  versionsPerTemplate: 3,
  templateFileBytes: 64 * 1024,
};

export interface Populated {
  documents: DocumentStore;
  groups: GroupService;
  auth: AuthService;
  audit: AuditService;
  templates: TemplateService;
}

/** Writes the data set of `scale` (names carry `tag`, so two populations differ). */
export async function populate(target: Populated, scale: PopulateScale, tag = "p"): Promise<void> {
  for (let n = 0; n < scale.groups; n++) {
    await target.groups.create({ name: `${tag}-group-${n}`, platform: "simulated", minInstances: 0, maxInstances: 50 });
  }
  const instances = target.documents.collection("instances");
  for (let n = 0; n < scale.instances; n++) {
    const group = `${tag}-group-${n % Math.max(1, scale.groups)}`;
    await instances.put({
      _id: `${tag}-instance-${n}`,
      group,
      state: n % 7 === 0 ? "STOPPED" : "RUNNING",
      port: 30000 + n,
      playerCount: n % 13,
      createdAt: new Date(1_700_000_000_000 + n).toISOString(),
    });
  }
  const role = await target.auth.roles.create({
    name: `${tag.toUpperCase()}_AUDITOR`,
    description: "reads the audit log",
    permissions: ["audit.view", "groups.view"],
  });
  for (let n = 0; n < scale.users; n++) {
    await target.auth.users.create({ username: `${tag}-user-${n}`, password: `password-${tag}-${n}-long`, roles: [n % 2 === 0 ? "VIEWER" : role.name] });
  }
  for (let n = 0; n < scale.auditEntries; n++) {
    await target.audit.record(
      { action: "group.update", resourceType: "group", resourceId: `${tag}-group-${n % Math.max(1, scale.groups)}`, details: { n } },
      { username: "admin", ipAddress: "127.0.0.1" },
    );
  }
  for (let t = 0; t < scale.templates; t++) {
    const name = `${tag}-template-${t}`;
    await target.templates.create({ name, description: `template ${t}`, platform: "simulated" });
    const big = randomBytes(scale.templateFileBytes);
    await target.templates.upload(name, undefined, [{ fileName: "server.jar", data: big }], false);
    for (let v = 0; v < scale.versionsPerTemplate; v++)
      await target.templates.writeText(name, "server.properties", `motd=${tag} ${t} version ${v}\nmax-players=${v + 10}\n`);
  }
}

/** Every bundled collection's documents, sorted by `_id` (keys sorted, so stores that reorder fields compare equal). */
export async function dumpCollections(documents: DocumentStore, options: { ignoreTokenVersions?: boolean } = {}): Promise<Record<string, Doc[]>> {
  const snapshot = await documents.snapshot();
  const out: Record<string, Doc[]> = {};
  try {
    for (const name of await snapshot.collections()) {
      if (!isBundledCollection(name)) continue;
      const docs: Doc[] = [];
      for await (const batch of snapshot.documents(name, 500)) docs.push(...batch);
      if (docs.length === 0) continue;
      out[name] = docs
        .map((doc) => {
          const copy = sortKeys(doc) as Doc;
          if (options.ignoreTokenVersions && name === "users") delete copy.tokenVersion;
          return copy;
        })
        .sort((a, b) => (a._id < b._id ? -1 : a._id > b._id ? 1 : 0));
    }
  } finally {
    await snapshot.release();
  }
  return out;
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value === null || typeof value !== "object") return value;
  return Object.fromEntries(
    Object.keys(value)
      .sort()
      .map((key) => [key, sortKeys((value as Record<string, unknown>)[key])]),
  );
}

/** Every template version: its hash and the sha256 of its exported tar.gz (exports are deterministic). */
export async function templateVersionDigests(templates: TemplateService): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const template of await templates.list()) {
    for (const version of await templates.listVersions(template.name)) {
      const { stream } = await templates.exportArchive(template.name, version.hash);
      const hash = createHash("sha256");
      for await (const chunk of stream) hash.update(chunk as Uint8Array);
      out[`${template.name}@${version.hash}`] = hash.digest("hex");
    }
  }
  return out;
}

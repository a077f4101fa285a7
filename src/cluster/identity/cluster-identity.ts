/**
 * What a controller keeps about its cluster membership in `raft.dataDir`, beside the Raft log:
 *
 *   node-id          this controller's member id (`ctl-` + 12 hex digits), created once
 *   identity.json    {clusterId, nodeId, state}: `joining` between a granted join and promotion,
 *                    `member` afterwards, `left` after a graceful leave
 *   tls/ca.crt, tls/node.crt, tls/node.key (0600)   the certificates of the Raft transport
 *   bootstrap.json   (0600) the cluster being created, until its meta is stamped in the log
 *   raft-log/        the LevelDB Raft log
 *
 * Every file is written to a temporary name and renamed, so a crash leaves the old or the new file.
 */
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export interface MemberIdentity {
  readonly clusterId: string;
  readonly nodeId: string;
  readonly state: "joining" | "member" | "left";
}

/** PEM material of the Raft transport. */
export interface NodeTls {
  readonly caPem: string;
  readonly certPem: string;
  readonly keyPem: string;
}

/** A cluster being created: everything the stamp command needs, kept until it is in the log. */
export interface PendingBootstrap {
  readonly clusterId: string;
  readonly ca: { readonly certPem: string; readonly keyPem: string };
  readonly seedSecret: string;
}

/** Files of one controller's cluster identity; see the module comment. */
export class ClusterIdentityStore {
  constructor(readonly dir: string) {}

  get logDir(): string {
    return join(this.dir, "raft-log");
  }

  /** True when a Raft log exists (this controller was a member of some cluster). */
  hasRaftLog(): boolean {
    return existsSync(this.logDir);
  }

  /** The member id, created on first use. */
  ensureNodeId(): string {
    const existing = this.readText("node-id")?.trim();
    if (existing) return existing;
    const nodeId = `ctl-${randomBytes(6).toString("hex")}`;
    this.writeText("node-id", `${nodeId}\n`);
    return nodeId;
  }

  readIdentity(): MemberIdentity | null {
    const text = this.readText("identity.json");
    return text === null ? null : (JSON.parse(text) as MemberIdentity);
  }

  writeIdentity(identity: MemberIdentity): void {
    this.writeText("identity.json", `${JSON.stringify(identity, null, 2)}\n`);
  }

  readTls(): NodeTls | null {
    const caPem = this.readText(join("tls", "ca.crt"));
    const certPem = this.readText(join("tls", "node.crt"));
    const keyPem = this.readText(join("tls", "node.key"));
    return caPem && certPem && keyPem ? { caPem, certPem, keyPem } : null;
  }

  writeTls(tls: NodeTls): void {
    this.writeText(join("tls", "node.key"), tls.keyPem, 0o600);
    this.writeText(join("tls", "node.crt"), tls.certPem);
    this.writeText(join("tls", "ca.crt"), tls.caPem);
  }

  readPendingBootstrap(): PendingBootstrap | null {
    const text = this.readText("bootstrap.json");
    return text === null ? null : (JSON.parse(text) as PendingBootstrap);
  }

  writePendingBootstrap(pending: PendingBootstrap): void {
    this.writeText("bootstrap.json", JSON.stringify(pending), 0o600);
  }

  deletePendingBootstrap(): void {
    rmSync(join(this.dir, "bootstrap.json"), { force: true });
  }

  private readText(name: string): string | null {
    const path = join(this.dir, name);
    return existsSync(path) ? readFileSync(path, "utf8") : null;
  }

  private writeText(name: string, text: string, mode = 0o644): void {
    const path = join(this.dir, name);
    mkdirSync(join(path, ".."), { recursive: true, mode: 0o700 });
    const tmp = `${path}.tmp`;
    writeFileSync(tmp, text, { mode });
    renameSync(tmp, path);
  }
}

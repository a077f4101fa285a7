/** The API's records as the dashboard reads them (spec documents 1-3 and the OpenAPI document). */

export interface KeysetPage<T> {
  data: T[];
  pageSize: number;
  nextCursor: string | null;
  total: number;
}

export interface Overview {
  nodeCount: number;
  instanceCount: number;
  playerCount: number;
  groupCount: number;
}

export interface Readiness {
  status: "READY" | "NOT_READY";
  checks: Record<string, boolean>;
}

export interface GroupListItem {
  name: string;
  platform: string;
  platformVersion: string | null;
  scalingMode: string;
  minInstances: number;
  maxInstances: number;
  maxPlayers: number;
  runningInstances: number;
  totalPlayers: number;
  maintenance: boolean;
  static: boolean;
}

export interface SchedulingIssue {
  code: string;
  message: string;
  since: string;
}

export interface LoadScaling {
  minTps?: number;
  maxMsptAvg?: number;
  sustainSeconds?: number;
  cooldownSeconds?: number;
}

export interface Group extends GroupListItem {
  jarFile: string;
  templates: string[];
  memoryMb: number;
  routing: string;
  portRange: { start: number; end: number };
  priority: number;
  updateStrategy: { type: string; maxSurge: number; maxUnavailable: number };
  parent: string | null;
  loadScaling: LoadScaling | null;
  paused: boolean;
  schedulingIssue: SchedulingIssue | null;
  stoppedInstances?: number;
  createdAt?: string;
  updatedAt?: string;
}

export interface Instance {
  id: string;
  group: string;
  node: string;
  state: string;
  port: number;
  playerCount: number;
  memoryMb?: number;
  uptimeMs: number;
  startedAt: string | null;
  deploymentRevision: number;
}

export interface Crash {
  id: string;
  instanceId: string;
  group: string;
  nodeId: string;
  exitCode: number;
  classification: string;
  logTail: string[];
  uptimeMs: number;
  timestamp: string;
}

export interface Node {
  id: string;
  state: string;
  host: string;
  version: string | null;
  totalMemoryMb: number;
  usedMemoryMb: number;
  cpuUsage: number;
  instanceCount: number;
  cordoned: boolean;
  registeredAt: string;
  connectedAt: string | null;
  lastHeartbeatAt: string | null;
  certificateRevoked: boolean;
  labels: Record<string, string>;
}

export interface NodeToken {
  id: string;
  nodeId: string | null;
  status: string;
  createdAt: string;
  createdBy: string;
  expiresAt: string;
  usedByNodeId: string | null;
  token?: string;
}

export interface Template {
  name: string;
  description: string;
  platform: string;
  hash: string;
  sizeBytes: number;
}

export interface TemplateVersion {
  templateName: string;
  hash: string;
  sizeBytes: number;
  createdAt: string;
}

export interface FileEntry {
  name: string;
  path: string;
  type: "file" | "directory";
  size: number;
}

export interface DeploymentInstance {
  id: string;
  node: string;
  state: string;
  deploymentRevision: number;
  role: "NEW" | "OLD";
  healthy: boolean;
  retired: boolean;
  playerCount: number;
}

export interface Deployment {
  group: string;
  revision: number;
  previousRevision: number;
  state: string;
  phase: string;
  settings: Record<string, unknown> & { strategy: string; healthGate: boolean; minHealthySeconds: number };
  changes: Record<string, unknown>;
  desiredInstances: number | null;
  canaryCount: number | null;
  promoted: boolean;
  outcome: string | null;
  reason: string | null;
  createdBy: string;
  createdAt: string;
  finishedAt: string | null;
  /** The single form only (not in lists). */
  progress: { newInstances: number; newHealthy: number; oldInstances: number; retired: number };
  instances: DeploymentInstance[];
}

export interface Backup {
  id: string;
  sizeBytes: number;
  sha256: string;
  createdAt: string;
  profile: string;
  documentStore: string;
  mongoDocumentCount: number;
  /** Not authenticated by this cluster (uploaded from another): restored only with `foreign: true`. */
  foreign?: boolean;
}

export interface Member {
  nodeId: string;
  raftAddr: string;
  restAddr: string;
  gRPCAddr: string;
  label: string;
  joinedAt: string | null;
  role: string;
  leader: boolean;
}

export interface Player {
  uuid: string;
  name: string;
  instanceId: string | null;
  group: string | null;
  proxyInstanceId: string | null;
  connectedAt: string;
  instanceSince: string | null;
}

export interface LogRecord {
  seq: number;
  ts: number;
  level: string;
  logger: string;
  thread: string;
  message: string;
  throwable?: string;
}

export interface ShareResult {
  id: string;
  url: string;
  expiresAt: string | null;
  password?: string;
  deleteUrl: string;
}

export interface AuditEntry {
  id: number;
  _id: string;
  username: string;
  action: string;
  resourceType: string;
  resourceId: string;
  details: string;
  before?: string | null;
  after?: string | null;
  ipAddress: string;
  createdAt: string;
}

export interface HistoryAnswer {
  from: string;
  to: string;
  stepSeconds: number;
  truncated: boolean;
  series: { name: string; points: [number, number][] }[];
}

/** The group status as the CLI derives it: DRAIN in maintenance, DOWN with nothing running but a minimum, else UP. */
export function groupStatus(g: Pick<GroupListItem, "maintenance" | "runningInstances" | "minInstances">): "UP" | "DOWN" | "DRAIN" {
  if (g.maintenance) return "DRAIN";
  if (g.runningInstances === 0 && g.minInstances > 0) return "DOWN";
  return "UP";
}

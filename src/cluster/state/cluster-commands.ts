/**
 * The commands of the replicated cluster state (JSON entries of the Raft log) and the contexts of
 * its membership changes. Every command carries `atMs`, the time the LEADER read from its clock
 * when it proposed the command: anything time-dependent in the state (lease expiry, token expiry)
 * is decided with it, never with the applying controller's clock, so every member decides alike.
 * Random values (secrets, token ids) travel in the command too; applying is deterministic.
 */
import { Type, type Static } from "@sinclair/typebox";
import { Value } from "@sinclair/typebox/value";

/** Controller (member) ids: they become certificate common names and DNS names. */
export const MEMBER_ID_PATTERN = "^[a-z0-9][a-z0-9.-]{0,62}$";
/** `host:port`, the host a name, an IPv4 address or a bracketed IPv6 address. */
export const HOST_PORT_PATTERN = "^(\\[[0-9A-Fa-f:.]+\\]|[A-Za-z0-9._-]+):[0-9]{1,5}$";
/** Singleton lease names. */
export const LEASE_NAME_PATTERN = "^[a-z0-9][a-z0-9._:-]{0,127}$";

/** Longest singleton lease: a holder that vanishes blocks its job at most this long. */
export const leaseTtlMsMax = 24 * 3600 * 1000;
/** Join tokens kept in the state (every status); issuing beyond this is refused. */
export const joinTokensMax = 1000;
/** Tokens that are no longer ACTIVE stay listed this long after they expire, then are pruned. */
export const joinTokenRetentionAfterExpiryMs = 7 * 24 * 3600 * 1000;
/** Config versions kept; older ones are pruned when a new one is written. */
export const configVersionsMax = 100;
/** Removed members remembered (eject, leave, recovery), newest last. */
export const removedMembersMax = 100;
/** Singleton leases kept (distinct names); granting a new name beyond this is refused. */
export const leasesMax = 256;
/** Largest cluster-shared config document (JSON bytes). */
export const configBytesMax = 256 * 1024;

const MemberId = Type.String({ pattern: MEMBER_ID_PATTERN });
const Address = Type.String({ maxLength: 300 });
const Label = Type.String({ maxLength: 128 });
const Time = Type.Integer({ minimum: 0 });
const Actor = Type.String({ maxLength: 256 });

const obj = <T extends Parameters<typeof Type.Object>[0]>(props: T) => Type.Object(props, { additionalProperties: false });

/** Where a member is reached; empty strings are addresses not known yet. */
export const MemberAddressesSchema = obj({
  raftAddr: Address,
  restAddr: Address,
  grpcAddr: Address,
});

const StampCommand = obj({
  op: Type.Literal("cluster.stamp"),
  atMs: Time,
  clusterId: Type.String({ minLength: 1, maxLength: 128 }),
  ca: obj({ certPem: Type.String({ minLength: 1 }), keyPem: Type.String({ minLength: 1 }) }),
  seedSecret: Type.String({ minLength: 16, maxLength: 256 }),
  member: obj({ nodeId: MemberId, label: Label, ...MemberAddressesSchema.properties }),
});

const MemberUpdateCommand = obj({
  op: Type.Literal("member.update"),
  atMs: Time,
  nodeId: MemberId,
  raftAddr: Type.Optional(Address),
  restAddr: Type.Optional(Address),
  grpcAddr: Type.Optional(Address),
  label: Type.Optional(Label),
});

const TokenIssueCommand = obj({
  op: Type.Literal("token.issue"),
  atMs: Time,
  jti: Type.String({ minLength: 1, maxLength: 64 }),
  label: Label,
  hash: Type.String({ minLength: 64, maxLength: 64 }),
  seedGeneration: Type.Integer({ minimum: 1 }),
  joinAddrs: Type.Array(Address, { minItems: 1, maxItems: 64 }),
  createdAtMs: Time,
  expiresAtMs: Time,
  by: Actor,
});

const TokenRevokeCommand = obj({ op: Type.Literal("token.revoke"), atMs: Time, jti: Type.String({ maxLength: 64 }), by: Actor });

const TokenConsumeCommand = obj({
  op: Type.Literal("token.consume"),
  atMs: Time,
  jti: Type.String({ maxLength: 64 }),
  hash: Type.String({ maxLength: 64 }),
  nodeId: MemberId,
});

const SeedRotateCommand = obj({ op: Type.Literal("seed.rotate"), atMs: Time, secret: Type.String({ minLength: 16, maxLength: 256 }), by: Actor });

const LeaseName = Type.String({ pattern: LEASE_NAME_PATTERN });
const LeaseTtl = Type.Integer({ minimum: 1, maximum: leaseTtlMsMax });
const LeaseAcquireCommand = obj({ op: Type.Literal("lease.acquire"), atMs: Time, name: LeaseName, holder: MemberId, ttlMs: LeaseTtl });
const LeaseRenewCommand = obj({
  op: Type.Literal("lease.renew"),
  atMs: Time,
  name: LeaseName,
  holder: MemberId,
  fencingToken: Type.Integer({ minimum: 1 }),
  ttlMs: LeaseTtl,
});
const LeaseReleaseCommand = obj({
  op: Type.Literal("lease.release"),
  atMs: Time,
  name: LeaseName,
  holder: MemberId,
  fencingToken: Type.Integer({ minimum: 1 }),
});

const ConfigPutCommand = obj({
  op: Type.Literal("config.put"),
  atMs: Time,
  config: Type.Record(Type.String(), Type.Unknown()),
  comment: Type.String({ maxLength: 500 }),
  by: Actor,
  /** The active version the proposer merged into (null: none was active); another one active refuses the put (CLUSTER_WRITE_CONFLICT). Absent: unchecked. */
  parentVersion: Type.Optional(Type.Union([Type.Integer({ minimum: 1 }), Type.Null()])),
});
const ConfigActivateCommand = obj({
  op: Type.Literal("config.activate"),
  atMs: Time,
  version: Type.Integer({ minimum: 1 }),
  by: Actor,
  /** The active version the proposer saw; another one active refuses the activation (CLUSTER_WRITE_CONFLICT). Absent: unchecked. */
  expectedActive: Type.Optional(Type.Union([Type.Integer({ minimum: 1 }), Type.Null()])),
});

export const ClusterCommandSchema = Type.Union([
  StampCommand,
  MemberUpdateCommand,
  TokenIssueCommand,
  TokenRevokeCommand,
  TokenConsumeCommand,
  SeedRotateCommand,
  LeaseAcquireCommand,
  LeaseRenewCommand,
  LeaseReleaseCommand,
  ConfigPutCommand,
  ConfigActivateCommand,
]);

export type ClusterCommand = Static<typeof ClusterCommandSchema>;
export type ClusterCommandOp = ClusterCommand["op"];
/** A command before the leader stamped its time. */
export type UnstampedCommand = ClusterCommand extends infer C ? (C extends ClusterCommand ? Omit<C, "atMs"> : never) : never;

/** The context of a membership change (JSON in the conf change's context). */
export const MembershipContextSchema = Type.Union([
  obj({ kind: Type.Literal("join"), atMs: Time, member: obj({ nodeId: MemberId, label: Label, ...MemberAddressesSchema.properties }) }),
  obj({ kind: Type.Literal("promote"), atMs: Time }),
  obj({
    kind: Type.Union([Type.Literal("eject"), Type.Literal("leave"), Type.Literal("recover")]),
    atMs: Time,
    reason: Type.String({ maxLength: 500 }),
    by: Actor,
  }),
]);
export type MembershipContext = Static<typeof MembershipContextSchema>;

const textEncoder = new TextEncoder();
const textDecoder = new TextDecoder();

export function encodeCommand(command: ClusterCommand): Uint8Array {
  return textEncoder.encode(JSON.stringify(command));
}

/** The command in `data`, or null when it is not valid JSON of a known command. */
export function decodeCommand(data: Uint8Array): ClusterCommand | null {
  let value: unknown;
  try {
    value = JSON.parse(textDecoder.decode(data));
  } catch {
    // Not JSON, so not a command: the state machine refuses the entry as an invalid command.
    return null;
  }
  return Value.Check(ClusterCommandSchema, value) ? value : null;
}

export function encodeMembershipContext(context: MembershipContext): Uint8Array {
  return textEncoder.encode(JSON.stringify(context));
}

/** The membership context in `data`, or null when absent or not valid. */
export function decodeMembershipContext(data: Uint8Array | undefined): MembershipContext | null {
  if (!data || data.byteLength === 0) return null;
  try {
    const value: unknown = JSON.parse(textDecoder.decode(data));
    return Value.Check(MembershipContextSchema, value) ? value : null;
  } catch {
    // Not JSON: no context, the same answer as a context of the wrong shape.
    return null;
  }
}

/** Codes of refused commands; the service maps them to HTTP statuses. */
export const CommandRefusal = {
  NotReady: "CLUSTER_NOT_READY",
  AlreadyStamped: "ALREADY_STAMPED",
  InvalidCommand: "INVALID_COMMAND",
  MemberNotFound: "MEMBER_NOT_FOUND",
  JoinTokenNotFound: "JOIN_TOKEN_NOT_FOUND",
  JoinTokenNotActive: "JOIN_TOKEN_NOT_ACTIVE",
  JoinTokenExists: "JOIN_TOKEN_EXISTS",
  TooManyJoinTokens: "TOO_MANY_JOIN_TOKENS",
  JoinTokenExpired: "JOIN_TOKEN_EXPIRED",
  JoinTokenUsed: "JOIN_TOKEN_USED",
  JoinTokenRevoked: "JOIN_TOKEN_REVOKED",
  JoinTokenInvalidated: "JOIN_TOKEN_INVALIDATED",
  SeedRotated: "SEED_ROTATED",
  LeaseHeld: "LEASE_HELD",
  TooManyLeases: "TOO_MANY_LEASES",
  WriteConflict: "CLUSTER_WRITE_CONFLICT",
  ConfigVersionNotFound: "CONFIG_VERSION_NOT_FOUND",
  ConfigTooLarge: "CONFIG_TOO_LARGE",
} as const;
export type CommandRefusal = (typeof CommandRefusal)[keyof typeof CommandRefusal];

/** What applying a command returned: a value, or a refusal that changed nothing. */
export type CommandResult<T = unknown> = { ok: true; value: T } | { ok: false; code: CommandRefusal; message: string };

/** A command's result with the log index it was applied at (what a reader waits for). */
export type AppliedCommand<T = unknown> = CommandResult<T> & { index: number };

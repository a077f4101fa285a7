/**
 * What the Raft node host drives and is driven by: the replicated state machine, the durable log,
 * the library's node, the message sender and time. Production supplies LevelStorage, the gRPC
 * transport and the cluster state machine; tests supply memory and simulated versions.
 */
import type { ConfChange, ConfState, Entry, Message, NodeId, Ready, Snapshot, Status, Storage } from "../../../raft/types.js";
import type { PersistRequest } from "./level-storage.js";

/** The replicated state machine. `apply` sees every committed normal entry once, in log order. */
export interface StateMachine {
  apply(entry: Entry): Promise<unknown> | unknown;
  /** The whole state, for a snapshot at the last applied index. */
  snapshot(): Uint8Array;
  /** Replaces the whole state with a snapshot's. */
  restore(data: Uint8Array): void;
}

/**
 * The durable log the host writes to ({@link LevelStorage} in production). `persist` must not
 * resolve before what it was given is durable (when `mustSync`).
 */
export interface HostStorage extends Storage {
  persist(request: PersistRequest): Promise<void>;
  createSnapshot(index: number, confState: ConfState, data: Uint8Array): Promise<Snapshot>;
  compact(index: number): Promise<void>;
}

/** The subset of the library's RawNode the host drives. */
export interface RawNodeLike {
  tick(): void;
  campaign(): void;
  step(message: Message): void;
  propose(data: Uint8Array): void;
  proposeConfChange(change: ConfChange): void;
  applyConfChange(change: ConfChange): ConfState;
  transferLeadership(to: NodeId): void;
  readIndex(context: Uint8Array): void;
  hasReady(): boolean;
  ready(): Ready;
  advance(ready: Ready): void;
  status(): Status;
  reportUnreachable(id: NodeId): void;
  reportSnapshot(id: NodeId, ok: boolean): void;
}

/** Encodes and decodes conf changes (the library's encodeConfChange/decodeConfChange). */
export interface ConfChangeCodec {
  encode(change: ConfChange): Uint8Array;
  decode(bytes: Uint8Array): ConfChange;
}

/** Where outbound messages go. */
export interface MessageSender {
  send(messages: readonly Message[]): void;
}

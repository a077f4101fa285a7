/**
 * Binds the simulation to the Raft library under test.
 */
import { MemoryStorage, RaftErrorCode, RawNode, decodeConfChange, hasErrorCode } from "../../../raft/index.js";
import type { RaftLibrary } from "./sim-node.js";

export const raftLibrary: RaftLibrary = {
  createStorage: (initialConfState) => new MemoryStorage(initialConfState),
  createRawNode: (config) => new RawNode(config),
  decodeConfChange,
  isProposalRefusal: (error) => hasErrorCode(error, RaftErrorCode.ProposalDropped) || hasErrorCode(error, RaftErrorCode.NotLeader),
};

/**
 * The two halves of recovering a cluster that lost its quorum: telling dead members from live
 * ones, and rewriting this controller's Raft log so that it is the only voter.
 */
import { connect } from "node:net";
import * as grpc from "@grpc/grpc-js";
import type { ConfState } from "../../../raft/types.js";
import { LevelStorage } from "../raft-host/level-storage.js";
import type { MemberClients } from "../peers/member-clients.js";

/** What a probe needs of a member. */
export interface ProbedMember {
  readonly nodeId: string;
  readonly raftAddr: string;
  readonly grpcAddr: string;
}

/**
 * The members that still answer, on their controller gRPC port (any answer, even a refusal) or
 * on their Raft port (a TCP connection), within `timeoutMs`.
 */
export async function probeMembers(members: readonly ProbedMember[], clients: MemberClients, timeoutMs: number): Promise<string[]> {
  const answers = await Promise.all(
    members.map(async (member) => {
      const [grpcAnswers, raftAnswers] = await Promise.all([
        member.grpcAddr ? grpcAnswersAt(clients, member.grpcAddr, timeoutMs) : false,
        member.raftAddr ? tcpAnswersAt(member.raftAddr, timeoutMs) : false,
      ]);
      return grpcAnswers || raftAnswers ? member.nodeId : null;
    }),
  );
  return answers.filter((id): id is string => id !== null);
}

async function grpcAnswersAt(clients: MemberClients, address: string, timeoutMs: number): Promise<boolean> {
  try {
    await clients.status(address, timeoutMs);
    return true;
  } catch (err) {
    // Any answer, even a refusal, means the member is alive; only silence counts as down.
    const code = (err as grpc.ServiceError).code;
    return code !== grpc.status.UNAVAILABLE && code !== grpc.status.DEADLINE_EXCEEDED;
  }
}

function tcpAnswersAt(address: string, timeoutMs: number): Promise<boolean> {
  const colon = address.lastIndexOf(":");
  const host = address.slice(0, colon).replace(/^\[|\]$/g, "");
  const port = Number(address.slice(colon + 1));
  return new Promise((resolve) => {
    const socket = connect({ host: host === "0.0.0.0" ? "127.0.0.1" : host, port });
    const done = (answered: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(answered);
    };
    const timer = setTimeout(() => done(false), timeoutMs);
    socket.once("connect", () => done(true));
    socket.once("error", () => done(false));
  });
}

/**
 * Replaces the log in `logDir` (the member must be stopped) with one snapshot at `appliedIndex`
 * holding `data`, whose configuration is `nodeId` alone. The term and vote are kept; the commit
 * index becomes the snapshot's.
 */
export async function rewriteLogAsSoleMember(logDir: string, nodeId: string, appliedIndex: number, data: Uint8Array): Promise<void> {
  const storage = await LevelStorage.open(logDir);
  try {
    const hardState = storage.currentHardState();
    const confState: ConfState = { voters: [nodeId], learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false };
    const term = storage.term(appliedIndex);
    await storage.persist({
      snapshot: { metadata: { index: appliedIndex, term, confState }, data },
      hardState: { term: hardState.term, vote: hardState.vote, commit: appliedIndex },
      entries: [],
    });
  } finally {
    await storage.close();
  }
}

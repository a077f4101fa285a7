/**
 * Watches every node's Ready and applied entries and throws a {@link SafetyViolation} the moment a
 * Raft safety property breaks:
 * - election safety: at most one leader per term;
 * - state machine safety: an index, once applied anywhere, holds the same entry everywhere, and
 *   replicas at the same applied index hold the same state (also across snapshot installs);
 * - commit and applied indexes never decrease within a node's life, committed entries come in order;
 * - leader completeness: a new leader's log holds every entry known to be applied anywhere;
 * - the durability contract: a Ready that changes term, vote, entries or snapshot asks for a sync.
 */
import { EntryType, type Entry, type HardState, type NodeId, type Ready } from "../../../raft/types.js";

export class SafetyViolation extends Error {
  constructor(message: string) {
    super(message);
    this.name = "SafetyViolation";
  }
}

interface CommittedRecord {
  readonly term: number;
  /**
   * An upper bound on the term in which the entry was committed: the lowest term any node held
   * when it applied the entry (a node learns of a commit from a leader of its term or an earlier one).
   */
  committedByTermAtMost: number;
  readonly type: string;
  readonly data: Uint8Array;
  readonly firstAppliedBy: NodeId;
}

const decoder = new TextDecoder();

export class SafetyMonitor {
  private readonly leaderByTerm = new Map<number, NodeId>();
  private readonly committed = new Map<number, CommittedRecord>();
  private readonly fingerprints = new Map<number, { fingerprint: string; node: NodeId }>();
  private committedMaxIndex = 0;
  leaderElections = 0;

  /** The highest index known to be applied somewhere (so committed). */
  get knownCommittedIndex(): number {
    return this.committedMaxIndex;
  }

  committedEntry(index: number): { term: number } | undefined {
    return this.committed.get(index);
  }

  onLeader(node: NodeId, term: number): void {
    const other = this.leaderByTerm.get(term);
    if (other !== undefined && other !== node) {
      throw new SafetyViolation(`election safety: ${other} and ${node} are both leader in term ${term}`);
    }
    if (other === undefined) this.leaderElections++;
    this.leaderByTerm.set(term, node);
  }

  onReady(node: NodeId, ready: Ready, previous: HardState): void {
    const hs = ready.hardState;
    if (hs !== null) {
      if (hs.term < previous.term) {
        throw new SafetyViolation(`${node}: term went back from ${previous.term} to ${hs.term}`);
      }
      if (hs.commit < previous.commit) {
        throw new SafetyViolation(`${node}: commit index went back from ${previous.commit} to ${hs.commit}`);
      }
      if (hs.term === previous.term && previous.vote !== null && hs.vote !== previous.vote) {
        throw new SafetyViolation(`${node}: changed its vote in term ${hs.term} from ${previous.vote} to ${String(hs.vote)}`);
      }
    }
    const voteChanged = hs !== null && (hs.term !== previous.term || hs.vote !== previous.vote);
    if (!ready.mustSync && (voteChanged || ready.entries.length > 0 || ready.snapshot !== null)) {
      throw new SafetyViolation(`${node}: a Ready changing term/vote/entries/snapshot did not ask for a sync`);
    }
  }

  onApplied(node: NodeId, nodeTerm: number, entry: Entry, fingerprint: string): void {
    const known = this.committed.get(entry.index);
    if (known === undefined) {
      this.committed.set(entry.index, {
        term: entry.term,
        committedByTermAtMost: nodeTerm,
        type: entry.type,
        data: entry.data,
        firstAppliedBy: node,
      });
      if (entry.index > this.committedMaxIndex) this.committedMaxIndex = entry.index;
    } else if (known.term !== entry.term || known.type !== entry.type || !bytesEqual(known.data, entry.data)) {
      throw new SafetyViolation(
        `state machine safety: ${node} applied index ${entry.index} as term ${entry.term} ${describeData(entry.type, entry.data)}` +
          ` but ${known.firstAppliedBy} applied term ${known.term} ${describeData(known.type, known.data)}`,
      );
    } else if (nodeTerm < known.committedByTermAtMost) {
      known.committedByTermAtMost = nodeTerm;
    }
    this.checkFingerprint(node, entry.index, fingerprint, "after applying");
  }

  onSnapshotRestored(node: NodeId, index: number, fingerprint: string): void {
    this.checkFingerprint(node, index, fingerprint, "after restoring a snapshot at");
  }

  /**
   * Leader completeness (§5.4), checked once the new leader's log is durable: it must hold every
   * entry known to have been committed in an earlier term. Checking the last such entry suffices:
   * by log matching, holding it means holding everything before it.
   */
  checkLeaderLog(node: NodeId, term: number, log: LogView): void {
    let index = this.committedMaxIndex;
    let record = this.committed.get(index);
    while (record !== undefined && record.committedByTermAtMost >= term) record = this.committed.get(--index);
    if (record === undefined) return;
    const lastIndex = log.lastIndex();
    if (lastIndex < index) {
      throw new SafetyViolation(
        `leader completeness: ${node} became leader of term ${term} with last index ${lastIndex},` +
          ` but index ${index} was committed by term ${record.committedByTermAtMost}`,
      );
    }
    if (index < log.firstIndex() - 1) return; // inside the node's snapshot
    const held = log.term(index);
    if (held !== record.term) {
      throw new SafetyViolation(
        `leader completeness: ${node} became leader of term ${term} with term ${held} at index ${index},` +
          ` where the entry committed by term ${record.committedByTermAtMost} has term ${record.term}`,
      );
    }
  }

  private checkFingerprint(node: NodeId, index: number, fingerprint: string, what: string): void {
    const known = this.fingerprints.get(index);
    if (known === undefined) this.fingerprints.set(index, { fingerprint, node });
    else if (known.fingerprint !== fingerprint) {
      throw new SafetyViolation(`state machine safety: ${node} ${what} index ${index} holds ${fingerprint}, ${known.node} held ${known.fingerprint}`);
    }
  }
}

function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a === b) return true;
  if (a.byteLength !== b.byteLength) return false;
  for (let i = 0; i < a.byteLength; i++) if (a[i] !== b[i]) return false;
  return true;
}

function describeData(type: string, data: Uint8Array): string {
  if (data.byteLength === 0) return `${type} (empty)`;
  const text = type === EntryType.Normal ? decoder.decode(data) : Buffer.from(data).toString("hex");
  return `${type} ${JSON.stringify(text)}`;
}

export interface LogView {
  firstIndex(): number;
  lastIndex(): number;
  term(index: number): number;
}

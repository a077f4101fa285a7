/** Member addresses of a raft-kv cluster, written `id@raftHost:port@kvHost:port,...` on command lines. */
export interface MemberAddress {
  readonly id: string;
  readonly raftAddress: string;
  readonly kvAddress: string;
}

export function parseMembers(text: string): MemberAddress[] {
  return text.split(",").map((part) => {
    const [id, raftAddress, kvAddress] = part.trim().split("@");
    if (!id || !raftAddress || !kvAddress) throw new Error(`bad member "${part}": expected id@raftHost:port@kvHost:port`);
    return { id, raftAddress, kvAddress };
  });
}

export function formatMembers(members: readonly MemberAddress[]): string {
  return members.map((m) => `${m.id}@${m.raftAddress}@${m.kvAddress}`).join(",");
}

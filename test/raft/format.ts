/**
 * Compact text renderings of Raft values for scenario outputs.
 */
import { decodeConfChange } from "../../raft/codec.js";
import type { ConfChange, ConfState, Entry, HardState, Message, Ready, Snapshot } from "../../raft/types.js";

const decoder = new TextDecoder();

export function formatBytes(bytes: Uint8Array): string {
  return JSON.stringify(decoder.decode(bytes));
}

export function formatConfChange(cc: ConfChange): string {
  const parts = cc.changes.map((c) => (c.type === "add-voter" ? "v" : c.type === "add-learner" ? "l" : "r") + c.nodeId);
  if (parts.length === 0) parts.push("leave-joint");
  if (cc.transition !== undefined && cc.transition !== "auto") parts.push(cc.transition);
  return parts.join(" ");
}

export function formatEntry(e: Entry): string {
  if (e.type === "conf-change") return `${e.term}/${e.index} conf-change ${formatConfChange(decodeConfChange(e.data))}`;
  return `${e.term}/${e.index} ${formatBytes(e.data)}`;
}

function list(ids: readonly string[]): string {
  return `(${ids.join(",")})`;
}

export function formatConfState(cs: ConfState): string {
  let out = `voters=${list(cs.voters)}`;
  if (cs.votersOutgoing.length > 0) out += `&&${list(cs.votersOutgoing)}`;
  if (cs.learners.length > 0) out += ` learners=${list(cs.learners)}`;
  if (cs.learnersNext.length > 0) out += ` learners-next=${list(cs.learnersNext)}`;
  if (cs.autoLeave) out += " auto-leave";
  return out;
}

export function formatSnapshot(s: Snapshot): string {
  return `index=${s.metadata.index} term=${s.metadata.term} ${formatConfState(s.metadata.confState)}`;
}

export function formatHardState(hs: HardState): string {
  return `term=${hs.term} vote=${hs.vote ?? "none"} commit=${hs.commit}`;
}

const withLog = new Set(["app", "vote", "pre-vote"]);

export function formatMessage(m: Message): string {
  let out = `${m.from}->${m.to} ${m.type} term=${m.term}`;
  if (withLog.has(m.type)) out += ` log=${m.logTerm}/${m.index}`;
  else if (m.index !== 0) out += ` index=${m.index}`;
  if (m.commit !== 0 || m.type === "app" || m.type === "heartbeat") out += ` commit=${m.commit}`;
  if (m.reject) out += m.type === "app-resp" ? ` rejected hint=${m.logTerm}/${m.rejectHint}` : " rejected";
  if (m.context.byteLength > 0) out += ` ctx=${decoder.decode(m.context)}`;
  if (m.entries.length > 0) out += ` entries=[${m.entries.map(formatEntry).join(", ")}]`;
  if (m.snapshot !== null) out += ` snapshot={${formatSnapshot(m.snapshot)}}`;
  return out;
}

export function formatReady(id: string, rd: Ready): string[] {
  const out = [`> ${id} handling Ready`];
  if (rd.softState !== null) out.push(`  state: ${rd.softState.role} lead=${rd.softState.leader ?? "none"}`);
  if (rd.hardState !== null) out.push(`  hard state: ${formatHardState(rd.hardState)}`);
  if (rd.snapshot !== null) out.push(`  snapshot: ${formatSnapshot(rd.snapshot)}`);
  if (rd.entries.length > 0) {
    out.push("  entries:");
    for (const e of rd.entries) out.push(`    ${formatEntry(e)}`);
  }
  if (rd.committedEntries.length > 0) {
    out.push("  committed:");
    for (const e of rd.committedEntries) out.push(`    ${formatEntry(e)}`);
  }
  if (rd.messages.length > 0) {
    out.push("  messages:");
    for (const m of rd.messages) out.push(`    ${formatMessage(m)}`);
  }
  if (rd.readStates.length > 0) {
    out.push("  read states:");
    for (const rs of rd.readStates) out.push(`    index=${rs.index} ctx=${decoder.decode(rs.requestCtx)}`);
  }
  if (rd.mustSync) out.push("  must sync");
  return out;
}

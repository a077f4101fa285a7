/**
 * The replicated key-value state machine the simulated hosts apply committed entries to. Commands
 * carry the client id and an operation id that grows per client; the machine keeps one session per
 * client (as in §6.3 of the Raft thesis), so a command applied twice (a duplicated forwarded
 * proposal) takes effect once, and a command older than the client's latest one (the client timed
 * it out and moved on) takes no effect.
 */
export type KvCommand =
  | { readonly clientId: number; readonly opId: number; readonly kind: "put"; readonly key: string; readonly value: string }
  | {
      readonly clientId: number;
      readonly opId: number;
      readonly kind: "cas";
      readonly key: string;
      readonly expected: string | null;
      readonly value: string;
    };

export type KvResult = { readonly kind: "put" } | { readonly kind: "cas"; readonly swapped: boolean } | { readonly kind: "stale" };

interface Session {
  readonly opId: number;
  readonly result: KvResult;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export function encodeCommand(command: KvCommand): Uint8Array {
  return encoder.encode(JSON.stringify(command));
}

/** Every replica decodes the same entry bytes (messages share them in memory): decode once. */
const decodedCommands = new WeakMap<Uint8Array, KvCommand>();

export function decodeCommand(data: Uint8Array): KvCommand {
  let command = decodedCommands.get(data);
  if (command === undefined) {
    command = JSON.parse(decoder.decode(data)) as KvCommand;
    decodedCommands.set(data, command);
  }
  return command;
}

interface KvSnapshotData {
  readonly values: [string, string][];
  readonly sessions: [number, Session][];
}

export class KvStateMachine {
  private readonly values = new Map<string, string>();
  private readonly sessions = new Map<number, Session>();

  apply(command: KvCommand): KvResult {
    const session = this.sessions.get(command.clientId);
    if (session !== undefined && command.opId === session.opId) return session.result;
    if (session !== undefined && command.opId < session.opId) return { kind: "stale" };
    let result: KvResult;
    if (command.kind === "put") {
      this.values.set(command.key, command.value);
      result = { kind: "put" };
    } else {
      const swapped = (this.values.get(command.key) ?? null) === command.expected;
      if (swapped) this.values.set(command.key, command.value);
      result = { kind: "cas", swapped };
    }
    this.sessions.set(command.clientId, { opId: command.opId, result });
    return result;
  }

  get(key: string): string | null {
    return this.values.get(key) ?? null;
  }

  /** A canonical text of the observable state, for comparing replicas at one index. */
  fingerprint(): string {
    const keys = [...this.values.keys()].sort();
    let text = "";
    for (const key of keys) text += `${key}=${this.values.get(key)};`;
    return text;
  }

  snapshot(): Uint8Array {
    const data: KvSnapshotData = { values: [...this.values.entries()], sessions: [...this.sessions.entries()] };
    return encoder.encode(JSON.stringify(data));
  }

  static restore(bytes: Uint8Array): KvStateMachine {
    const machine = new KvStateMachine();
    if (bytes.byteLength === 0) return machine;
    const data = JSON.parse(decoder.decode(bytes)) as KvSnapshotData;
    for (const [key, value] of data.values) machine.values.set(key, value);
    for (const [clientId, session] of data.sessions) machine.sessions.set(clientId, session);
    return machine;
  }
}

/**
 * The replicated key-value state machine of the raft-kv benchmark server: put, compare-and-set,
 * and local reads (made linearizable by the host's ReadIndex before they run). Commands are JSON
 * with base64 values; the whole map is the snapshot.
 */
import type { Entry } from "../../raft/types.js";
import type { StateMachine } from "../../src/cluster/raft-host/raft-host-ports.js";

export type KvCommand =
  | { readonly op: "put"; readonly key: string; readonly value: string }
  | { readonly op: "cas"; readonly key: string; readonly expected: string | null; readonly value: string };

export interface PutResult {
  readonly index: number;
}

export interface CasResult {
  readonly swapped: boolean;
  /** The value before the operation (base64), or null if the key was absent. */
  readonly current: string | null;
}

const textEncoder = new TextEncoder();
const textDecoder = new TextDecoder();

export function encodeKvCommand(command: KvCommand): Uint8Array {
  return textEncoder.encode(JSON.stringify(command));
}

/** Values are kept base64-encoded, as they travel in commands. */
export class KvStateMachine implements StateMachine {
  private readonly values = new Map<string, string>();

  apply(entry: Entry): PutResult | CasResult {
    const command = JSON.parse(textDecoder.decode(entry.data)) as KvCommand;
    if (command.op === "put") {
      this.values.set(command.key, command.value);
      return { index: entry.index };
    }
    const current = this.values.get(command.key) ?? null;
    if (current !== command.expected) return { swapped: false, current };
    this.values.set(command.key, command.value);
    return { swapped: true, current };
  }

  get(key: string): string | null {
    return this.values.get(key) ?? null;
  }

  snapshot(): Uint8Array {
    return textEncoder.encode(JSON.stringify([...this.values]));
  }

  restore(data: Uint8Array): void {
    this.values.clear();
    if (data.byteLength === 0) return;
    for (const [key, value] of JSON.parse(textDecoder.decode(data)) as [string, string][]) this.values.set(key, value);
  }
}

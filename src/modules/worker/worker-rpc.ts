/**
 * The worker's side of the channel to its controller: numbered requests whose replies settle
 * promises, and a post function. Everything a module asks of the platform (storage, events,
 * capabilities, leases) goes through {@link WorkerRpc.call}.
 */
import type { MessagePort } from "node:worker_threads";
import { moduleErrorOf } from "../../sdk/module/errors.js";
import type { RpcOp, WireError, WorkerMessage } from "./protocol.js";

/** Numbered calls to the host. */
export class WorkerRpc {
  private nextId = 1;
  private readonly pending = new Map<number, { resolve(value: unknown): void; reject(error: Error): void }>();

  constructor(private readonly port: MessagePort) {}

  post(message: WorkerMessage): void {
    this.port.postMessage(message);
  }

  call<T>(op: RpcOp, ...args: unknown[]): Promise<T> {
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (value: unknown) => void, reject });
      this.post({ t: "rpc", id, op, args });
    });
  }

  /** Settles the call `id` with the host's reply. */
  settle(id: number, ok: boolean, value: unknown, error?: WireError): void {
    const call = this.pending.get(id);
    if (!call) return;
    this.pending.delete(id);
    if (ok) call.resolve(value);
    else call.reject(moduleErrorOf(error?.kind, error?.message ?? "the controller refused the call"));
  }

  /** Calls in flight. */
  get inFlight(): number {
    return this.pending.size;
  }
}

/** An error as it crosses the boundary. */
export function wireError(error: unknown): WireError {
  const kind = (error as { kind?: unknown } | null)?.kind;
  const message = error instanceof Error ? error.message : String(error);
  return typeof kind === "string" ? { kind, message } : { message };
}

/**
 * The plugin event stream: a one-shot ticket from `POST /api/plugin/events/ticket`, then the SSE
 * stream `GET /api/v1/events/stream?ticket=…[&lastSequence=N]` (spec document 3, "Event stream"),
 * delivered to a PluginEventBus. It reconnects with a fresh ticket and the last sequence it
 * delivered, so nothing published in between is lost while the controller still buffers it; a
 * RESYNC_REQUIRED tells the bus (and the PlayerManager) to fetch state again. An event whose
 * sequence was already delivered is skipped. Frames addressed to this instance alone (`transfer`,
 * `transfer-completed`, `transfer-failed`, the Transfer as data, no id) go to PluginTransfers.
 *
 * The `connected` frame names the player registry's epoch (`registryEpoch`), and `event:
 * registry-epoch` says it changed while connected. The stream remembers the last epoch; a different
 * one later (the controller's store lost the registry) is told to the onRegistryEpochChange
 * listeners, which report this instance's players again. The first epoch a process sees changes
 * nothing: its players are reported as they join.
 */
import type { IncomingMessage } from "node:http";
import { REGISTRY_EPOCH_FRAME } from "../contracts/plugin-stream.js";
import { RESYNC_REQUIRED, type PluginEventBus } from "./event-bus.js";
import type { PluginTransfers } from "./transfers.js";
import { TICKET_PATH, type PluginTransport } from "./transport.js";
import { silentLogger, type CloudEvent, type SdkLogger } from "./types.js";

export const EVENT_STREAM_PATH = "/api/v1/events/stream";
/** First pause before reconnecting; doubles up to the maximum, back to the first once connected. */
export const reconnectDelayMsMin = 250;
export const reconnectDelayMsMax = 5_000;
/** The controller writes a keep-alive after 15 s of silence: three missed ones mean the connection is dead. */
export const streamIdleTimeoutMs = 45_000;
/** An SSE frame longer than this ends the connection (a stream that never sends a blank line). */
export const frameCharsMax = 1024 * 1024;
export { REGISTRY_EPOCH_FRAME };

/** Told the registry's new epoch and the one seen before it. */
export type RegistryEpochListener = (epoch: string, previous: string) => void;

export interface EventStreamOptions {
  logger?: SdkLogger;
  reconnectDelayMsMin?: number;
  reconnectDelayMsMax?: number;
  idleTimeoutMs?: number;
  /** Start after this sequence (events after it are replayed); default: only new events. */
  lastSequence?: number | null;
}

/** One parsed SSE frame. */
export interface SseFrame {
  event: string;
  data: string;
  id: string | null;
}

/** Splits SSE text into frames (fields event, data, id; comments and other fields ignored). */
export class SseParser {
  private pending = "";

  push(text: string): SseFrame[] {
    this.pending += text;
    if (this.pending.length > frameCharsMax && !/\r?\n\r?\n/.test(this.pending)) throw new Error(`an event stream frame exceeded ${frameCharsMax} characters`);
    const frames: SseFrame[] = [];
    for (let match = /\r?\n\r?\n/.exec(this.pending); match; match = /\r?\n\r?\n/.exec(this.pending)) {
      const block = this.pending.slice(0, match.index);
      this.pending = this.pending.slice(match.index + match[0].length);
      const frame: SseFrame = { event: "message", data: "", id: null };
      const data: string[] = [];
      for (const line of block.split(/\r?\n/)) {
        if (line === "" || line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "event") frame.event = value;
        else if (field === "data") data.push(value);
        else if (field === "id") frame.id = value;
      }
      if (data.length === 0 && frame.id === null && frame.event === "message") continue;
      frame.data = data.join("\n");
      frames.push(frame);
    }
    return frames;
  }
}

export class PluginEventStream {
  private readonly logger: SdkLogger;
  private readonly delayMin: number;
  private readonly delayMax: number;
  private readonly idleTimeoutMs: number;
  private last: number | null;
  private running = false;
  private isConnected = false;
  private abort: AbortController | null = null;
  private loop: Promise<void> | null = null;
  private wake: (() => void) | null = null;
  private connects = 0;
  private connectedWaiters: (() => void)[] = [];
  private epoch: string | null = null;
  private readonly epochListeners = new Set<RegistryEpochListener>();

  constructor(
    private readonly transport: PluginTransport,
    private readonly bus: PluginEventBus,
    options: EventStreamOptions = {},
    private readonly transfers: PluginTransfers | null = null,
  ) {
    this.logger = options.logger ?? silentLogger;
    this.delayMin = options.reconnectDelayMsMin ?? reconnectDelayMsMin;
    this.delayMax = options.reconnectDelayMsMax ?? reconnectDelayMsMax;
    this.idleTimeoutMs = options.idleTimeoutMs ?? streamIdleTimeoutMs;
    this.last = options.lastSequence ?? null;
  }

  /** The sequence of the last event delivered (null before the first). */
  get lastSequence(): number | null {
    return this.last;
  }

  get connected(): boolean {
    return this.isConnected;
  }

  /** Connections made so far (the first included). */
  get connectCount(): number {
    return this.connects;
  }

  /** The player registry's epoch the controller named last (null before it named one). */
  get registryEpoch(): string | null {
    return this.epoch;
  }

  /** Calls `listener` whenever the registry's epoch differs from the one named before; returns the function that stops it. */
  onRegistryEpochChange(listener: RegistryEpochListener): () => void {
    this.epochListeners.add(listener);
    return () => this.epochListeners.delete(listener);
  }

  /** Resolves once the stream said `connected` (now, if it already has). */
  whenConnected(): Promise<void> {
    if (this.isConnected) return Promise.resolve();
    return new Promise((resolve) => this.connectedWaiters.push(resolve));
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.loop = this.run();
  }

  /** Closes the connection and stops reconnecting. */
  async stop(): Promise<void> {
    this.running = false;
    this.abort?.abort();
    this.wake?.();
    await this.loop;
    this.loop = null;
  }

  private async run(): Promise<void> {
    let delayMs = this.delayMin;
    while (this.running) {
      try {
        const outcome = await this.connectOnce();
        if (outcome === "connected") delayMs = this.delayMin;
      } catch (error) {
        if (this.running) this.logger.warn(`Event stream: ${(error as Error).message}`);
      }
      this.setConnected(false);
      if (!this.running) return;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, delayMs);
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.wake = null;
      delayMs = Math.min(this.delayMax, delayMs * 2);
    }
  }

  /** One connection, until it ends; "connected" when the stream got as far as its connected frame. */
  private async connectOnce(): Promise<"connected" | "refused"> {
    const { ticket } = await this.transport.post<{ ticket: string }>(TICKET_PATH);
    if (typeof ticket !== "string" || ticket === "") throw new Error("the ticket route answered without a ticket");
    if (!this.running) return "refused";
    const query = new URLSearchParams({ ticket });
    if (this.last !== null) query.set("lastSequence", String(this.last));
    this.abort = new AbortController();
    const response = await this.transport.openStream(`${EVENT_STREAM_PATH}?${query.toString()}`, this.abort.signal);
    return await this.read(response);
  }

  private read(response: IncomingMessage): Promise<"connected" | "refused"> {
    return new Promise((resolve) => {
      const parser = new SseParser();
      let outcome: "connected" | "refused" = "refused";
      let idle: ReturnType<typeof setTimeout> | null = null;
      const armIdle = () => {
        if (idle) clearTimeout(idle);
        idle = setTimeout(() => {
          this.logger.warn(`Event stream: nothing received for ${this.idleTimeoutMs} ms, reconnecting`);
          response.destroy();
        }, this.idleTimeoutMs);
      };
      const finish = () => {
        if (idle) clearTimeout(idle);
        resolve(outcome);
      };
      armIdle();
      response.setEncoding("utf8");
      response.on("data", (text: string) => {
        armIdle();
        let frames: SseFrame[];
        try {
          frames = parser.push(text);
        } catch (error) {
          this.logger.warn(`Event stream: ${(error as Error).message}`);
          response.destroy();
          return;
        }
        for (const frame of frames) {
          if (frame.event === "connected") {
            outcome = "connected";
            this.connects += 1;
            this.noteEpoch(frame);
            this.setConnected(true);
          } else if (frame.event === REGISTRY_EPOCH_FRAME) this.noteEpoch(frame);
          else if (frame.event === "error") {
            this.logger.warn(`Event stream refused: ${messageOf(frame.data)}`);
          } else if (frame.event === "message") this.handleMessage(frame);
          else if (frame.event.startsWith("transfer")) this.handleTransfer(frame);
        }
      });
      response.on("error", finish);
      response.on("close", finish);
    });
  }

  /** Remembers the `registryEpoch` of a frame; a different one than before is told to the listeners. */
  private noteEpoch(frame: SseFrame): void {
    let epoch: unknown;
    try {
      epoch = (JSON.parse(frame.data) as { registryEpoch?: unknown } | null)?.registryEpoch;
    } catch {
      return;
    }
    if (typeof epoch !== "string" || epoch === "" || epoch === this.epoch) return;
    const previous = this.epoch;
    this.epoch = epoch;
    if (previous === null) return;
    this.logger.info(`The player registry's epoch changed (${previous} -> ${epoch}): the controller lost it`);
    for (const listener of [...this.epochListeners]) {
      try {
        listener(epoch, previous);
      } catch (error) {
        this.logger.warn(`A registry epoch listener failed: ${(error as Error).message}`);
      }
    }
  }

  private handleTransfer(frame: SseFrame): void {
    if (this.transfers === null) return;
    let data: unknown;
    try {
      data = JSON.parse(frame.data);
    } catch {
      this.logger.warn(`Event stream: a ${frame.event} frame that is not JSON was skipped`);
      return;
    }
    this.transfers.deliver(frame.event, data);
  }

  private handleMessage(frame: SseFrame): void {
    let parsed: Partial<CloudEvent> & Record<string, unknown>;
    try {
      parsed = JSON.parse(frame.data) as Partial<CloudEvent> & Record<string, unknown>;
    } catch {
      this.logger.warn("Event stream: a message frame that is not JSON was skipped");
      return;
    }
    if (typeof parsed.type !== "string") return;
    const sequence = typeof parsed.sequence === "number" ? parsed.sequence : Number(frame.id);
    if (parsed.type === RESYNC_REQUIRED) {
      const latest = typeof parsed.latestSequence === "number" ? parsed.latestSequence : sequence;
      if (Number.isFinite(latest)) this.last = latest;
      const { type, ...rest } = parsed;
      this.bus.deliver({ type, sequence: this.last ?? 0, source: "controller", timestamp: String(parsed.timestamp ?? new Date().toISOString()), data: rest });
      return;
    }
    if (Number.isFinite(sequence)) {
      if (this.last !== null && sequence <= this.last) return;
      this.last = sequence;
    }
    this.bus.deliver({
      type: parsed.type,
      sequence: Number.isFinite(sequence) ? sequence : 0,
      source: typeof parsed.source === "string" ? parsed.source : "controller",
      timestamp: typeof parsed.timestamp === "string" ? parsed.timestamp : new Date().toISOString(),
      data: parsed.data && typeof parsed.data === "object" ? (parsed.data as Record<string, unknown>) : {},
    });
  }

  private setConnected(value: boolean): void {
    this.isConnected = value;
    if (value) for (const waiter of this.connectedWaiters.splice(0)) waiter();
  }
}

function messageOf(data: string): string {
  try {
    const parsed = JSON.parse(data) as { message?: unknown };
    return typeof parsed.message === "string" ? parsed.message : data;
  } catch {
    return data;
  }
}

/**
 * Which tab of this browser holds the event stream: one leader among the dashboard tabs that share
 * a channel (a BroadcastChannel named after the API and the user), elected over that channel alone,
 * so it works wherever BroadcastChannel does (also on plain-http origins, where the Web Locks API
 * is missing). The leader says so every {@link HEARTBEAT_MS}; a tab that hears no leader for
 * {@link LEADER_TIMEOUT_MS} (or hears it leave) claims; of the claims heard within
 * {@link CLAIM_WINDOW_MS} the smallest id wins; a leader that hears another leader with a smaller id
 * steps down. A new tab asks first (`probe`), so it joins an existing leader at once.
 */
import type { Timers } from "./types.js";

export const HEARTBEAT_MS = 1_000;
export const LEADER_TIMEOUT_MS = 3_500;
export const CLAIM_WINDOW_MS = 250;

/** The election's messages on the shared channel. */
export type ElectionMessage = { k: "probe"; from: string } | { k: "hb"; from: string } | { k: "claim"; from: string } | { k: "bye"; from: string };

export const isElectionMessage = (m: unknown): m is ElectionMessage =>
  typeof m === "object" &&
  m !== null &&
  ["probe", "hb", "claim", "bye"].includes((m as { k?: string }).k ?? "") &&
  typeof (m as { from?: unknown }).from === "string";

export type Role = "leader" | "follower";

export interface TabElectionOptions {
  id: string;
  post(message: ElectionMessage): void;
  timers: Timers;
  onRole(role: Role): void;
}

export class TabElection {
  private role: Role | null = null;
  private leaderId: string | null = null;
  private claims: Set<string> | null = null;
  private timer: unknown = null;
  private heartbeat: unknown = null;
  private running = false;

  constructor(private readonly options: TabElectionOptions) {}

  get isLeader(): boolean {
    return this.role === "leader";
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.options.post({ k: "probe", from: this.options.id });
    this.wait(CLAIM_WINDOW_MS);
  }

  /** Leaves: a leader tells the others, so one of them takes over at once. */
  stop(): void {
    if (!this.running) return;
    this.running = false;
    if (this.role === "leader") this.options.post({ k: "bye", from: this.options.id });
    this.clearTimers();
    this.role = null;
  }

  /** A message another tab posted. */
  receive(message: ElectionMessage): void {
    if (!this.running || message.from === this.options.id) return;
    const { id } = this.options;
    switch (message.k) {
      case "probe":
        if (this.role === "leader") this.beat();
        break;
      case "claim":
        if (this.role === "leader") this.beat();
        else if (this.claims) this.claims.add(message.from);
        break;
      case "hb":
        if (this.role === "leader") {
          if (message.from < id) this.follow(message.from);
          else this.beat();
        } else {
          this.follow(message.from);
        }
        break;
      case "bye":
        if (this.leaderId === message.from) {
          this.leaderId = null;
          this.claim();
        }
        break;
    }
  }

  private follow(leaderId: string): void {
    this.leaderId = leaderId;
    this.claims = null;
    if (this.heartbeat !== null) this.options.timers.clear(this.heartbeat);
    this.heartbeat = null;
    this.setRole("follower");
    this.wait(LEADER_TIMEOUT_MS);
  }

  /** Waits `ms` for a leader; claims when none was heard by then. */
  private wait(ms: number): void {
    if (this.timer !== null) this.options.timers.clear(this.timer);
    this.timer = this.options.timers.set(() => {
      this.timer = null;
      this.leaderId = null;
      this.claim();
    }, ms);
  }

  private claim(): void {
    if (!this.running) return;
    this.claims = new Set([this.options.id]);
    this.options.post({ k: "claim", from: this.options.id });
    if (this.timer !== null) this.options.timers.clear(this.timer);
    this.timer = this.options.timers.set(() => {
      this.timer = null;
      const claims = this.claims;
      this.claims = null;
      if (!claims) return;
      const winner = [...claims].sort()[0];
      if (winner === this.options.id) this.lead();
      else this.wait(LEADER_TIMEOUT_MS);
    }, CLAIM_WINDOW_MS);
  }

  private lead(): void {
    this.leaderId = this.options.id;
    this.setRole("leader");
    this.beat();
  }

  private beat(): void {
    this.options.post({ k: "hb", from: this.options.id });
    if (this.heartbeat !== null) this.options.timers.clear(this.heartbeat);
    this.heartbeat = this.options.timers.set(() => {
      this.heartbeat = null;
      if (this.role === "leader" && this.running) this.beat();
    }, HEARTBEAT_MS);
  }

  private setRole(role: Role): void {
    if (this.role === role) return;
    this.role = role;
    this.options.onRole(role);
  }

  private clearTimers(): void {
    if (this.timer !== null) this.options.timers.clear(this.timer);
    if (this.heartbeat !== null) this.options.timers.clear(this.heartbeat);
    this.timer = null;
    this.heartbeat = null;
  }
}

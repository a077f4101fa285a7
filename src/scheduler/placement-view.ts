/**
 * One placement view of every node, shared by every controller that places instances: the
 * placement ledgers of the key-value store (placement-ledger.ts), read into a {@link PlacementIndex}
 * that placement decides on. A decision is made on the view as this controller last read it; the
 * claim that follows re-reads the chosen machine's ledger and enters the reservations with one
 * compare-and-set of it, so two controllers can never both take a port or the last memory of a
 * node: the second claim finds the first and is refused (the evaluator places that instance again).
 * A claim's read also refreshes the view of that machine; {@link PlacementView.refresh} reads every
 * ledger (at start, every reconcile interval, and before a placement failure is reported).
 *
 * Reservations leave the ledger when their instance ends (the owner releases them), and the
 * owner's reconcile round repairs what a crash or a lost store left behind (placement-repair.ts).
 */
import { KeyedMutex } from "../domain/shared/keyed-mutex.js";
import type { KvStore } from "../store/ports.js";
import { encodeReservation, HostLedger, PLACEMENT_LEDGER_PREFIX, placementLedgerKey, type ClaimRefusal, type Reservation } from "./placement-ledger.js";
import { PlacementIndex, type PlacementInstance } from "./placement.js";

/** Compare-and-set attempts of one ledger change before it gives up (every failed one means another controller wrote). */
export const ledgerWriteAttemptsMax = 32;

/** Thrown when a ledger kept changing under every attempt of a write. */
export class LedgerContendedError extends Error {
  readonly code = "LEDGER_CONTENDED";
  constructor(readonly host: string) {
    super(`The placement ledger of ${host} changed under ${ledgerWriteAttemptsMax} attempts in a row`);
  }
}

const indexed = (r: Reservation): PlacementInstance => ({ group: r.group, node: r.node, port: r.port, memoryMb: r.memoryMb, state: "SCHEDULED" });

/** The shared reservations of every node, as this controller last read them. */
export class PlacementView {
  /** What placement decides on: every reservation read, and this controller's placements not claimed yet. */
  readonly index: PlacementIndex;
  private readonly hosts = new Map<string, HostLedger>();
  private readonly nodeHosts = new Map<string, string>();
  /** The machine whose ledger holds each claimed reservation read. */
  private readonly hostOfInstance = new Map<string, string>();
  /** What the index holds per instance id (ledger entries and holds). */
  private readonly inIndex = new Map<string, PlacementInstance>();
  /** Placements made here and not claimed yet. */
  private readonly held = new Map<string, Reservation>();
  private readonly writes = new KeyedMutex();

  constructor(private readonly kv: KvStore) {
    this.index = new PlacementIndex((nodeId) => this.hostOf(nodeId));
  }

  /** Records the machine of a node (its reported host); nodes on one machine share its ports and its ledger. */
  setNodeHost(nodeId: string, host: string): void {
    if (this.nodeHosts.get(nodeId) === host) return;
    this.nodeHosts.set(nodeId, host);
    this.index.rehost(nodeId);
  }

  hostOf(nodeId: string): string {
    return this.nodeHosts.get(nodeId) ?? nodeId;
  }

  /** Whether a reservation of `instanceId` is in the view (claimed, or held here). */
  has(instanceId: string): boolean {
    return this.inIndex.has(instanceId);
  }

  /** Every claimed reservation the view holds. */
  reservations(): Reservation[] {
    const all: Reservation[] = [];
    for (const ledger of this.hosts.values()) for (const entry of ledger.entries.values()) all.push(entry.reservation);
    return all;
  }

  /** Reads every ledger again. */
  async refresh(): Promise<void> {
    const keys = await this.kv.keys(PLACEMENT_LEDGER_PREFIX);
    const seen = new Set<string>();
    for (const key of keys) {
      const host = key.slice(PLACEMENT_LEDGER_PREFIX.length);
      seen.add(host);
      this.absorb(host, await this.kv.get(key));
    }
    for (const host of [...this.hosts.keys()]) if (!seen.has(host)) this.absorb(host, null);
  }

  /** A placement just made here: in the index at once (the next decision sees it), claimed by {@link claim}. */
  hold(reservation: Reservation): void {
    this.held.set(reservation.instanceId, reservation);
    this.reindex(reservation.instanceId, indexed(reservation));
  }

  /** A hold given up (its placement was not claimed, or its record not written). */
  unhold(instanceId: string): void {
    if (!this.held.delete(instanceId)) return;
    this.unindex(instanceId);
    const host = this.hostOfInstance.get(instanceId);
    const entry = host === undefined ? undefined : this.hosts.get(host)?.entries.get(instanceId);
    if (entry) this.reindex(instanceId, indexed(entry.reservation));
  }

  /**
   * Enters held reservations into their machines' ledgers (one compare-and-set per machine), each
   * checked against the ledger as it is now. Returns the refused ones with the reason; they are no
   * longer held. `capacityMb` is a node's memory budget (its record's totalMemoryMb).
   */
  async claim(reservations: readonly Reservation[], capacityMb: (nodeId: string) => number): Promise<Map<string, ClaimRefusal>> {
    const byHost = new Map<string, Reservation[]>();
    for (const r of reservations) {
      const host = this.hostOf(r.node);
      const list = byHost.get(host);
      if (list) list.push(r);
      else byHost.set(host, [r]);
    }
    const refusals = new Map<string, ClaimRefusal>();
    await Promise.all(
      [...byHost].map(async ([host, claims]) => {
        let refused: Map<string, ClaimRefusal>;
        try {
          refused = await this.write(host, (ledger) => {
            const plan = ledger.planClaims(claims, capacityMb);
            return { text: plan.text, result: plan.refusals, commit: (text: string) => ledger.apply(plan.accepted, text) };
          });
        } catch (err) {
          for (const claim of claims) this.unhold(claim.instanceId);
          throw err;
        }
        for (const [id, why] of refused) refusals.set(id, why);
        for (const claim of claims) {
          if (refused.has(claim.instanceId)) this.unhold(claim.instanceId);
          else {
            this.held.delete(claim.instanceId);
            this.hostOfInstance.set(claim.instanceId, host);
          }
        }
      }),
    );
    return refusals;
  }

  /** Removes an ended instance's reservation from its machine's ledger. */
  release(instanceId: string, node: string): Promise<void> {
    return this.forget([{ instanceId, node }]);
  }

  /** Removes reservations found stale (their instance ended, or never got a record). */
  async forget(stale: readonly Pick<Reservation, "instanceId" | "node">[]): Promise<void> {
    const byHost = new Map<string, string[]>();
    for (const r of stale) {
      const host = this.hostOfInstance.get(r.instanceId) ?? this.hostOf(r.node);
      const list = byHost.get(host);
      if (list) list.push(r.instanceId);
      else byHost.set(host, [r.instanceId]);
    }
    for (const [host, ids] of byHost) {
      await this.write(host, (ledger) => ({ text: ledger.planRemoval(ids), result: undefined, commit: (text) => this.dropped(ledger, ids, text) }));
    }
  }

  /**
   * Enters reservations of instances that already run and are missing from the ledgers (adopted
   * from the records, or a key-value store that lost its data), without a capacity check: what
   * runs is the truth the view must show.
   */
  async ensure(running: readonly Reservation[]): Promise<void> {
    const byHost = new Map<string, Reservation[]>();
    for (const r of running) byHost.set(this.hostOf(r.node), [...(byHost.get(this.hostOf(r.node)) ?? []), r]);
    for (const [host, list] of byHost) {
      await this.write(host, (ledger) => {
        const missing = list.filter((r) => {
          const current = ledger.entries.get(r.instanceId)?.reservation;
          return !current || current.node !== r.node || current.port !== r.port || current.memoryMb !== r.memoryMb;
        });
        const plan = ledger.planClaims(missing, () => Number.POSITIVE_INFINITY);
        // Ports held twice (what runs disagrees with the ledger) are entered all the same.
        const text =
          plan.refusals.size === 0
            ? plan.text
            : [
                ...[...ledger.entries.values()].filter((e) => !missing.some((m) => m.instanceId === e.reservation.instanceId)).map((e) => e.line),
                ...missing.map(encodeReservation),
              ].join("\n");
        return {
          text,
          result: undefined,
          commit: (written) => {
            ledger.apply(missing, written);
            for (const r of missing) if (!this.held.has(r.instanceId)) this.reindex(r.instanceId, indexed(r));
          },
        };
      });
      for (const r of list) this.hostOfInstance.set(r.instanceId, host);
    }
  }

  /**
   * One change of a machine's ledger: read, plan (`plan` answers the text to write, or null for
   * nothing), compare-and-set, then commit the plan to the cached ledger; again from the read when
   * another controller wrote in between. Changes of one machine by this controller run one at a time.
   */
  private write<T>(host: string, plan: (ledger: HostLedger) => { text: string | null; result: T; commit: (text: string) => void }): Promise<T> {
    const key = placementLedgerKey(host);
    return this.writes.run(host, async () => {
      for (let attempt = 0; attempt < ledgerWriteAttemptsMax; attempt++) {
        const current = await this.kv.get(key);
        const ledger = this.absorb(host, current);
        const next = plan(ledger);
        if (next.text === null || next.text === current) return next.result;
        const written =
          current === null
            ? next.text === "" || (await this.kv.setIfAbsent(key, next.text))
            : next.text === ""
              ? await this.kv.compareAndDelete(key, current)
              : await this.kv.compareAndSet(key, current, next.text);
        if (written) {
          next.commit(next.text);
          this.hosts.set(host, ledger);
          return next.result;
        }
      }
      throw new LedgerContendedError(host);
    });
  }

  private dropped(ledger: HostLedger, ids: readonly string[], text: string): void {
    ledger.drop(ids, text);
    for (const id of ids) {
      this.hostOfInstance.delete(id);
      if (!this.held.has(id)) this.unindex(id);
    }
  }

  /** Takes a ledger's text into the view (decoding it only when it changed since read or written). */
  private absorb(host: string, text: string | null): HostLedger {
    const current = this.hosts.get(host);
    if (current && current.text === text) return current;
    const next = HostLedger.decode(text);
    const before = current?.entries ?? new Map();
    for (const [id, entry] of before) {
      if (next.entries.get(id)?.line === entry.line) continue;
      if (this.hostOfInstance.get(id) === host) this.hostOfInstance.delete(id);
      if (!this.held.has(id)) this.unindex(id);
    }
    for (const [id, entry] of next.entries) {
      this.setNodeHost(entry.reservation.node, host);
      this.hostOfInstance.set(id, host);
      if (before.get(id)?.line === entry.line || this.held.has(id)) continue;
      this.reindex(id, indexed(entry.reservation));
    }
    if (text === null) this.hosts.delete(host);
    else this.hosts.set(host, next);
    return next;
  }

  private reindex(id: string, instance: PlacementInstance): void {
    this.unindex(id);
    this.inIndex.set(id, instance);
    this.index.add(instance);
  }

  private unindex(id: string): void {
    const current = this.inIndex.get(id);
    if (!current) return;
    this.index.remove(current);
    this.inIndex.delete(id);
  }
}

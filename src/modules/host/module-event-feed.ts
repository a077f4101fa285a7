/**
 * Feeds modules the events of the whole cluster: the cluster-wide event journal
 * (`events/event-journal.ts`) numbers every event published on any controller and every controller
 * buffers the same sequence, so reading it in order gives each module every event once, wherever it
 * was published (the key-value bridge carries only nine types). Events from before the feed started
 * are not replayed; INSTANCE_CONSOLE_OUTPUT is not journaled and so never reaches a module; a hole
 * in the journal (events it no longer has) is skipped.
 */
import type { EventJournal } from "../../events/event-journal.js";
import type { ModuleEvent } from "../../sdk/module/types.js";

/** What the feed reads of the journal. */
export type JournalView = Pick<EventJournal, "latestSequence" | "earliestSequence" | "entry" | "listen">;

/** See the module comment. */
export class ModuleEventFeed {
  private cursor = 0;
  private unlisten: (() => void) | null = null;

  constructor(
    private readonly journal: JournalView,
    private readonly deliver: (event: ModuleEvent) => void,
  ) {}

  start(): void {
    this.cursor = this.journal.latestSequence;
    this.unlisten = this.journal.listen(() => this.drain());
  }

  stop(): void {
    this.unlisten?.();
    this.unlisten = null;
  }

  private drain(): void {
    const latest = this.journal.latestSequence;
    this.cursor = Math.max(this.cursor, this.journal.earliestSequence - 1);
    while (this.cursor < latest) {
      this.cursor++;
      const entry = this.journal.entry(this.cursor);
      if (!entry) continue;
      let parsed: { type: string; source: string | null; timestamp: string | null; data: Record<string, unknown> };
      try {
        parsed = JSON.parse(entry.json) as typeof parsed;
      } catch {
        continue;
      }
      this.deliver(
        Object.freeze({
          type: parsed.type,
          source: parsed.source ?? "",
          timestamp: parsed.timestamp ?? "",
          data: Object.freeze(parsed.data ?? {}),
          sequence: entry.sequence,
        }),
      );
    }
  }
}

/** Where daemon reports the gateway does not handle itself go: to every subscribed handler. */
import type { Logger } from "../logs/types.js";
import type { DaemonReport } from "./gateway-types.js";

/**
 * The subscribers of daemon reports (instance state, console, crash, log). {@link deliver} calls
 * each handler in subscription order; a handler that throws is logged and the others still
 * receive the report.
 */
export class ReportIntake {
  private readonly handlers = new Set<(report: DaemonReport) => void>();

  constructor(private readonly logger: Logger) {}

  /** Adds a handler; returns the function that removes it. */
  subscribe(handler: (report: DaemonReport) => void): () => void {
    this.handlers.add(handler);
    return () => this.handlers.delete(handler);
  }

  deliver(report: DaemonReport): void {
    for (const handler of this.handlers) {
      try {
        handler(report);
      } catch (err) {
        this.logger.error("A daemon report handler failed", err);
      }
    }
  }
}

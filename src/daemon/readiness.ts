/** When a STARTING instance counts as ready, as its platform's readiness rule says. */
import { connect } from "node:net";
import type { ReadinessRule } from "./platforms.js";

/** True when `line` is the console line a log-line rule waits for. Pure. */
export function isReadyLine(readiness: ReadinessRule, line: string): boolean {
  return readiness.kind === "log-line" && line.includes(readiness.pattern);
}

/**
 * One attempt of the port-open rule: connects to `port` on 127.0.0.1 and calls `onOpen` when the
 * connection is accepted, `onClosed` when it is refused or fails. The socket is closed at once
 * either way; the caller decides whether to try again.
 */
export function probePortOnce(port: number, onOpen: () => void, onClosed: () => void): void {
  const socket = connect({ host: "127.0.0.1", port });
  socket.once("connect", () => {
    socket.destroy();
    onOpen();
  });
  socket.once("error", () => {
    socket.destroy();
    onClosed();
  });
}

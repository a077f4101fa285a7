/**
 * What the controller's server-sent event streams (the event stream, the plugin event stream, the
 * log tails) have in common: the frame format and the response they write to.
 */

/** One SSE frame with an event name, JSON data and, when given, an id. */
export const sseFrame = (event: string, data: unknown, id?: number): string =>
  `${id === undefined ? "" : `id: ${id}\n`}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;

/** An SSE response as a stream writes to it. */
export interface SseWriter {
  /** Resolves once the text was handed on to the connection. */
  write(text: string): Promise<unknown>;
  onAbort(listener: () => void): void;
  readonly aborted: boolean;
  /** Ends the connection at once. */
  cut(): void;
}

/**
 * A minimal Server-Sent Events client for tests and benchmarks: opens a stream with fetch, parses
 * frames (`id`, `event`, `data`, comment lines) as they arrive and lets a test wait for frames.
 */

/** One parsed frame; a comment line is a frame of its own with `comment` set. */
export interface SseFrame {
  event: string;
  id?: string;
  data: string;
  comment?: string;
  /** performance.now() when the frame was parsed. */
  receivedAtMs: number;
}

export interface SseStream {
  readonly status: number;
  readonly frames: SseFrame[];
  /** Resolves when the server ended the stream (or it was closed here). */
  readonly ended: Promise<void>;
  readonly isEnded: boolean;
  /** Waits until `count` frames matching `predicate` arrived; returns them. */
  waitFor(count: number, predicate?: (frame: SseFrame) => boolean, timeoutMs?: number): Promise<SseFrame[]>;
  close(): void;
}

/** Parses `data` of a frame as JSON. */
export const frameJson = (frame: SseFrame): any => JSON.parse(frame.data);

/** Frames that carry events (not `connected`, `error` or comments). */
export const isMessage = (frame: SseFrame): boolean => frame.event === "message" && frame.comment === undefined;

/** Opens `url` as an event stream. */
export async function openSse(url: string, headers: Record<string, string> = {}): Promise<SseStream> {
  const abort = new AbortController();
  const response = await fetch(url, { headers: { accept: "text/event-stream", ...headers }, signal: abort.signal });
  const frames: SseFrame[] = [];
  let waiters: (() => void)[] = [];
  let isEnded = false;
  const notify = () => {
    const current = waiters;
    waiters = [];
    for (const waiter of current) waiter();
  };
  const ended = (async () => {
    if (!response.body) return;
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    try {
      while (true) {
        const { done, value } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let split = buffer.indexOf("\n\n");
        while (split >= 0) {
          const block = buffer.slice(0, split);
          buffer = buffer.slice(split + 2);
          const frame: SseFrame = { event: "message", data: "", receivedAtMs: performance.now() };
          const data: string[] = [];
          for (const line of block.split("\n")) {
            if (line.startsWith(":")) frame.comment = line.slice(1).trim();
            else if (line.startsWith("id:")) frame.id = line.slice(3).trim();
            else if (line.startsWith("event:")) frame.event = line.slice(6).trim();
            else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
          }
          frame.data = data.join("\n");
          frames.push(frame);
          split = buffer.indexOf("\n\n");
        }
        notify();
      }
    } catch {
      // Closed here or dropped by the server: the stream ended either way.
    } finally {
      isEnded = true;
      notify();
    }
  })();
  return {
    status: response.status,
    frames,
    ended,
    get isEnded() {
      return isEnded;
    },
    async waitFor(count, predicate = () => true, timeoutMs = 10_000) {
      const deadline = performance.now() + timeoutMs;
      for (;;) {
        const matching = frames.filter(predicate);
        if (matching.length >= count) return matching;
        if (isEnded)
          throw new Error(
            `stream ended with ${matching.length} of ${count} frames: last ids ${frames
              .slice(-3)
              .map((f) => f.id ?? f.event)
              .join(",")}`,
          );
        const left = deadline - performance.now();
        if (left <= 0)
          throw new Error(
            `got ${matching.length} of ${count} frames in ${timeoutMs} ms, last ids ${frames
              .slice(-3)
              .map((f) => f.id ?? f.event)
              .join(",")}`,
          );
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, left);
          waiters.push(() => {
            clearTimeout(timer);
            resolve();
          });
        });
      }
    },
    close() {
      abort.abort();
    },
  };
}

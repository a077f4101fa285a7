// The log stream hub alone, over an in-memory writer: a source whose replay cannot be read (a
// node's log on another controller that could not be asked) ends the stream with one
// `Log unavailable` error frame carrying the reason, and releases its follow subscription.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ApiError } from "../../src/shared/errors.js";
import { LogStreamHub, type LogSource, type LogStreamWriter } from "../../src/logs/log-stream.js";

function memoryWriter(): LogStreamWriter & { text: string } {
  const writer = {
    text: "",
    aborted: false,
    write: async (text: string) => {
      writer.text += text;
    },
    onAbort: () => undefined,
    cut: () => {
      writer.aborted = true;
    },
  };
  return writer;
}

describe("log stream hub", () => {
  it("ends a stream whose replay cannot be read with one Log unavailable frame, and stops following", async () => {
    const hub = new LogStreamHub();
    let following = 0;
    const source: LogSource = {
      read: () => Promise.reject(new ApiError(503, "LOG_HOLDER_UNAVAILABLE", "Controller ctl-0 cannot be reached")),
      follow: () => {
        following++;
        return () => following--;
      },
    };
    const writer = memoryWriter();
    await hub.serve(writer, source, {});
    assert.equal(writer.text, `event: error\ndata: ${JSON.stringify({ message: "Log unavailable", detail: "Controller ctl-0 cannot be reached" })}\n\n`);
    assert.equal(following, 0, "the follow subscription is released");
    assert.equal(hub.clientCount, 0);
  });
});

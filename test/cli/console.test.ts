// instance console against a fake controller whose SSE stream echoes the commands it receives.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { envelope, homeWithContext, spawnCli, startFakeController, waitForExit, type FakeController } from "./harness.js";
import { eventually } from "../support/wait.js";

/** Bound on waiting for one expected piece of console output. */
const outputWaitMs = 30_000;

function until(read: () => string, pattern: RegExp): Promise<void> {
  return eventually(
    () => pattern.test(read()),
    () => `${pattern}; got: ${read()}`,
    outputWaitMs,
  ).then(() => undefined);
}

describe("cloudctl instance console", () => {
  let server: FakeController;
  const streams = new Set<ReadableStreamDefaultController<Uint8Array>>();
  const encoder = new TextEncoder();
  const broadcast = (line: string) => {
    for (const stream of streams) stream.enqueue(encoder.encode(`data: ${JSON.stringify({ line })}\n\n`));
  };
  before(async () => {
    let tickets = 0;
    server = await startFakeController((app) => {
      app.post("/api/v1/services/missing/console/ticket", (c) => c.json(envelope(404, "NOT_FOUND", "Instance not found: missing"), 404));
      app.post("/api/v1/services/:id/console/ticket", (c) => c.json({ ticket: `ticket-${++tickets}` }));
      app.get(
        "/api/v1/services/refused/console",
        () => new Response('event: error\ndata: {"message":"Unauthorized"}\n\n', { headers: { "content-type": "text/event-stream" } }),
      );
      app.get("/api/v1/services/:id/console", (c) => {
        if (!c.req.query("ticket")?.startsWith("ticket-")) return c.json(envelope(401, "UNAUTHORIZED", "ticket required"), 401);
        let own: ReadableStreamDefaultController<Uint8Array>;
        const body = new ReadableStream<Uint8Array>({
          start(controller) {
            own = controller;
            streams.add(controller);
            controller.enqueue(encoder.encode(': connected\n\ndata: {"line":"[Server] Done (1.2s)!"}\n\n'));
          },
          cancel() {
            streams.delete(own);
          },
        });
        return new Response(body, { headers: { "content-type": "text/event-stream", "cache-control": "no-cache" } });
      });
      app.post("/api/v1/services/:id/command", async (c) => {
        const { command } = await c.req.json();
        broadcast(`executed: ${command}`);
        return c.json({ ok: true });
      });
    });
  });
  after(() => server.close());

  test("streams output, posts a typed line as a command, and Ctrl-Q detaches with exit 0", async () => {
    const { home, dispose } = homeWithContext(server.url);
    const child = spawnCli(["instance", "console", "inst-1"], { home });
    try {
      const exited = waitForExit(child);
      let stdout = "";
      child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
      await until(() => stdout, /\[Server\] Done \(1\.2s\)!/);
      child.stdin.write("say hello there\n");
      await until(() => stdout, /executed: say hello there/);
      child.stdin.write("\x11");
      const result = await exited;
      assert.equal(result.code, 0, result.stderr);
      assert.match(result.stderr, /detached/);
      const commands = server.requests.filter((r) => r.path === "/api/v1/services/inst-1/command").map((r) => JSON.parse(r.body));
      assert.deepEqual(commands, [{ command: "say hello there" }]);
      const stream = server.requests.find((r) => r.path === "/api/v1/services/inst-1/console");
      assert.match(stream?.query.ticket ?? "", /^ticket-\d+$/);
    } finally {
      child.kill();
      dispose();
    }
  });

  test("lines before a Ctrl-Q in the same chunk are sent before detaching; an unknown instance exits 4; a refused stream exits 2", async () => {
    const { home, dispose } = homeWithContext(server.url);
    const child = spawnCli(["inst", "console", "inst-2"], { home });
    const missing = spawnCli(["instance", "console", "missing"], { home });
    const refused = spawnCli(["instance", "console", "refused"], { home });
    try {
      const exited = waitForExit(child);
      const missingExited = waitForExit(missing);
      const refusedExited = waitForExit(refused);
      missing.stdin.end();
      let stdout = "";
      child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
      await until(() => stdout, /Done/);
      child.stdin.write("list\nstop\x11ignored\n");
      const result = await exited;
      assert.equal(result.code, 0, result.stderr);
      const commands = server.requests.filter((r) => r.path === "/api/v1/services/inst-2/command").map((r) => JSON.parse(r.body).command);
      assert.deepEqual(commands, ["list"], "the partial line before Ctrl-Q is not sent, nothing after it is read");
      assert.equal((await missingExited).code, 4);
      const refusal = await refusedExited;
      assert.equal(refusal.code, 2, "event: error Unauthorized is an authentication failure");
      assert.match(refusal.stderr, /console stream refused: Unauthorized/);
    } finally {
      child.kill();
      missing.kill();
      refused.kill();
      dispose();
    }
  });
});

// The daemon's process spawner: a small helper process that starts instance processes for the
// daemon. spawn() forks the calling process, and forking copies its page tables: the larger the
// caller, the longer its event loop is blocked (about 14 ms per spawn for a daemon of 150 MB, 2 ms
// for this program). Here the blocking happens in a process that does nothing else.
//
// Protocol over the IPC channel of child_process.fork (JSON messages), see
// src/daemon/process-launcher.ts:
//   daemon -> spawner  { type: "spawn", id, file, args, cwd, env }
//   spawner -> daemon  { type: "spawned", id, pid } + stdin handle, then
//                      { type: "stdio", id, stream: "stdout" | "stderr" } + that pipe's handle;
//                      { type: "spawn-error", id, code, message } when it could not start;
//                      { type: "exit", id, code, signal } when it ended.
// The pipes themselves go to the daemon (sent handles); this process keeps no copy, so the
// daemon reads and writes them directly and sees them end when the instance exits. When the
// daemon goes away this program exits; the instances are left to the daemon's process-group
// handling, exactly as if the daemon had spawned them itself.
/* global require, process */
"use strict";
const { spawn } = require("node:child_process");

function send(message, handle) {
  if (!process.connected) return;
  try {
    process.send(message, handle);
  } catch {
    // The channel closed under us: the daemon is gone.
  }
}

function holdUnread(stream) {
  const handle = stream && stream._handle;
  if (handle && typeof handle.readStop === "function") {
    handle.reading = false;
    handle.readStop();
  }
}

function launch(request) {
  const { id } = request;
  let child;
  try {
    child = spawn(request.file, request.args, { cwd: request.cwd, env: request.env, detached: true, stdio: ["pipe", "pipe", "pipe"] });
  } catch (error) {
    send({ type: "spawn-error", id, code: (error && error.code) || "SPAWN_FAILED", message: error instanceof Error ? error.message : String(error) });
    return;
  }
  // A pipe wrapped in a socket starts reading at once; whatever this process read would be lost
  // (a handle being sent drops what it reads). Stop reading before the event loop runs: the
  // process's first lines stay in the pipe until the daemon reads them.
  holdUnread(child.stdout);
  holdUnread(child.stderr);
  let spawned = false;
  child.once("spawn", () => {
    spawned = true;
    send({ type: "spawned", id, pid: child.pid }, child.stdin);
    send({ type: "stdio", id, stream: "stdout" }, child.stdout);
    send({ type: "stdio", id, stream: "stderr" }, child.stderr);
  });
  child.once("error", (error) => {
    if (!spawned) send({ type: "spawn-error", id, code: error.code || "SPAWN_FAILED", message: error.message });
  });
  child.once("exit", (code, signal) => {
    if (spawned) send({ type: "exit", id, code, signal });
  });
}

process.on("message", (message) => {
  if (message && message.type === "spawn" && typeof message.id === "string") launch(message);
});
process.on("disconnect", () => process.exit(0));
// The daemon's terminal signals are the daemon's business; this process ends with its channel.
process.on("SIGINT", () => undefined);
process.on("SIGTERM", () => undefined);

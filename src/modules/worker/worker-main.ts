/**
 * The entry of a module's worker thread. It imports the module's backend (the manifest's
 * entrypoint), runs the lifecycle hooks its controller asks for, serves route calls, delivers
 * events and capability calls, and reports a heartbeat every `heartbeatIntervalMs` so that the
 * controller can tell a busy loop from a quiet one. On `shutdown` it lets go of its port: the
 * thread then ends by itself unless the module left something running (a timer, a socket), which
 * the controller reports as a leak (docs/decisions/modules.md, "Leaked loaders").
 */
import { getHeapStatistics } from "node:v8";
import { parentPort, workerData, type MessagePort } from "node:worker_threads";
import { pathToFileURL } from "node:url";
import { IllegalStateError } from "../../sdk/module/errors.js";
import { runModuleRoute } from "../../sdk/module/route-dispatch.js";
import { ModuleRouteTable, type RegisteredModuleRoute } from "../../sdk/module/route-registrar.js";
import type { CloudModule } from "../../sdk/module/types.js";
import type { HookName, HookResult, HostMessage, WorkerInit } from "./protocol.js";
import { WorkerContext } from "./worker-context.js";
import { WorkerRpc, wireError } from "./worker-rpc.js";

const init = workerData as WorkerInit;
const port = parentPort as MessagePort;
const rpc = new WorkerRpc(port);
const context = new WorkerContext(init, rpc);
let module: CloudModule | null = null;
let routes: readonly RegisteredModuleRoute[] = [];

// A throw outside a hook or a handler (a timer's callback, a stray promise) is logged; the module keeps running.
process.on("uncaughtException", (error) =>
  context.context.logger.error(`Uncaught: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`),
);
process.on("unhandledRejection", (error) =>
  context.context.logger.error(`Unhandled rejection: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`),
);

const beat = () => {
  const heap = getHeapStatistics();
  rpc.post({ t: "beat", heapUsedBytes: heap.used_heap_size, heapLimitBytes: heap.heap_size_limit });
};
// Unreferenced: a worker whose module left nothing running ends once its port is let go.
const heartbeat = setInterval(beat, init.heartbeatIntervalMs);
heartbeat.unref();
beat();

/** The module object of the entry's export: an object of hooks, or a class constructed without arguments. */
async function importModule(): Promise<CloudModule> {
  const namespace = (await import(pathToFileURL(init.entryFile).href)) as Record<string, unknown>;
  const exported = namespace[init.exportName];
  if (exported === undefined) throw new IllegalStateError(`${init.entryFile} has no export ${init.exportName}`);
  if (typeof exported === "function") {
    if (!/^class[\s{]/.test(Function.prototype.toString.call(exported)))
      throw new IllegalStateError(`export ${init.exportName} is a function; export a module object or a class`);
    return new (exported as new () => CloudModule)();
  }
  if (typeof exported !== "object" || exported === null) throw new IllegalStateError(`export ${init.exportName} is not a module object`);
  return exported as CloudModule;
}

async function runHook(hook: HookName, fromVersion: string | undefined): Promise<HookResult> {
  if (hook === "load") {
    module = await importModule();
    await module.load?.(context.context);
    context.markLoaded();
    const provided = context.providedIds();
    const missing = init.provides.filter((id) => !provided.includes(id));
    if (missing.length > 0)
      throw new IllegalStateError(`capabilities.provides: ${missing.join(", ")} has no handle (call context.capabilities.provide in the load hook)`);
    return { provided };
  }
  if (!module) throw new IllegalStateError(`hook ${hook} before load`);
  if (hook === "registerRoutes") {
    const table = new ModuleRouteTable((method, template) => context.context.logger.warn(`Route ${method} ${template} registered after start is ignored`));
    try {
      await module.registerRoutes?.(table, context.context);
    } finally {
      table.close();
    }
    routes = table.routes;
    return { routes: routes.map((route) => ({ method: route.method, template: route.template.text })) };
  }
  if (hook === "upgrade") await module.upgrade?.(context.context, fromVersion ?? "");
  else await module[hook]?.(context.context);
  return {};
}

port.on("message", (message: HostMessage) => {
  switch (message.t) {
    case "hook":
      runHook(message.hook, message.fromVersion).then(
        (result) => rpc.post({ t: "hook-done", id: message.id, ok: true, result }),
        (error: unknown) => rpc.post({ t: "hook-done", id: message.id, ok: false, error: wireError(error) }),
      );
      return;
    case "request": {
      const route = routes[message.route];
      if (!route) {
        rpc.post({ t: "response", id: message.id, response: { status: 404, headers: {}, body: "", sent: false } });
        return;
      }
      void runModuleRoute(route, message.request, (line) => context.context.logger.error(line)).then((response) =>
        rpc.post({ t: "response", id: message.id, response }),
      );
      return;
    }
    case "event":
      context.events.deliver(message.subscriptions, message.event);
      return;
    case "reply":
      if (message.ok) rpc.settle(message.id, true, message.value);
      else rpc.settle(message.id, false, undefined, message.error);
      return;
    case "capability-call":
      context.callProvided(message.capabilityId, message.method, message.args).then(
        (value) => rpc.post({ t: "capability-result", id: message.id, ok: true, value }),
        (error: unknown) => rpc.post({ t: "capability-result", id: message.id, ok: false, error: wireError(error) }),
      );
      return;
    case "rebind":
      context.rebind(message.capabilityId, message.provider);
      return;
    case "lease-granted":
      context.leaseGranted(message.run, message.name, message.fencingToken);
      return;
    case "lease-lost":
      context.leaseLost(message.run, message.reason);
      return;
    case "shutdown":
      clearInterval(heartbeat);
      port.removeAllListeners("message");
      port.close();
      return;
  }
});

/**
 * The example platform module: a network's message of the day. It keeps the current message and
 * its history in its documents, counts views in its key-value storage, publishes MOTD:CHANGED when
 * the message changes, offers the text as the capability `motd-text`, and lists the groups created
 * anywhere in the cluster since it started (the events of every controller reach it).
 *
 * In a project of your own, import from "cloud-control-plane/module" and bundle it the way build.ts does.
 */
import { defineModule, InvalidArgumentError, NotFoundError, type EventSubscription, type ModuleContext } from "../../../src/sdk/module/index.js";

interface Message {
  _id: string;
  text: string;
  setBy: string | null;
  setAt: string;
}

const DEFAULT_TEXT = "Welcome to the network!";
const TEXT_LENGTH_MAX = 256;
const HISTORY_LIMIT = 20;

let ctx: ModuleContext;
const subscriptions: EventSubscription[] = [];
const groupsSeen: string[] = [];

/** The typed body of PUT message: `{"text": "..."}`. */
function messageBody(value: unknown): { text: string } {
  const text = (value as { text?: unknown } | null)?.text;
  if (typeof text !== "string" || text.trim() === "") throw new Error("text must be a non-blank string");
  if (text.length > TEXT_LENGTH_MAX) throw new Error(`text is at most ${TEXT_LENGTH_MAX} characters`);
  return { text };
}

const messages = () => ctx.storage.documents().collection("messages");

async function current(): Promise<Message> {
  const stored = (await messages().get("current")) as Message | null;
  return stored ?? { _id: "current", text: DEFAULT_TEXT, setBy: null, setAt: new Date(0).toISOString() };
}

export const MotdModule = defineModule({
  load(context) {
    ctx = context;
    context.capabilities.provide("motd-text", { current: async () => (await current()).text });
  },

  registerRoutes(routes) {
    routes.get("message", async (_request, response) => {
      const message = await current();
      response.json({ text: message.text, setBy: message.setBy, setAt: message.setAt, version: ctx.version });
    });
    routes.put("message", messageBody, async (request, body, response) => {
      const previous = await current();
      const message: Message = { _id: "current", text: body.text, setBy: request.userId() ?? null, setAt: new Date().toISOString() };
      if (previous.setBy !== null || previous.text !== DEFAULT_TEXT) await messages().insert({ ...previous, _id: `history-${previous.setAt}` });
      await messages().put({ ...message });
      ctx.events.publish({ type: "MOTD:CHANGED", payload: { text: message.text, setBy: message.setBy } });
      response.json({ text: message.text, setBy: message.setBy, setAt: message.setAt });
    });
    routes.get("history", async (request, response) => {
      const limit = Number(request.queryParam("limit") ?? HISTORY_LIMIT);
      if (!Number.isInteger(limit) || limit < 1 || limit > 100) throw new InvalidArgumentError("limit must be an integer from 1 to 100");
      const history = await messages().find({ _id: { $gte: "history-", $lt: "history-~" } }, { sort: { field: "setAt", direction: -1 }, limit });
      response.json(history.map((m) => ({ id: m._id, text: m.text, setBy: m.setBy, setAt: m.setAt })));
    });
    routes.get("history/{id}", async (request, response) => {
      const message = (await messages().get(request.pathParam("id"))) as Message | null;
      if (!message || !message._id.startsWith("history-")) throw new NotFoundError(`No message ${request.pathParam("id")}`);
      response.json({ id: message._id, text: message.text, setBy: message.setBy, setAt: message.setAt });
    });
    routes.post("views", async (_request, response) => {
      response.json({ views: await ctx.storage.kv().increment("views") });
    });
    routes.get("groups-seen", (_request, response) => {
      response.json({ controllerId: ctx.cluster.controllerId, groups: groupsSeen });
    });
    routes.get("info", (_request, response) => {
      response.json({ id: ctx.moduleId, version: ctx.version, controllerId: ctx.cluster.controllerId });
    });
  },

  start(context) {
    subscriptions.push(context.events.on("GROUP_CREATED").subscribe((event) => void groupsSeen.push(String(event.data.groupName))));
    context.logger.info(`motd ${context.version} started`);
  },

  stop() {
    for (const subscription of subscriptions.splice(0)) subscription.unsubscribe();
  },

  upgrade(context, fromVersion) {
    context.logger.info(`motd upgraded from ${fromVersion} to ${context.version}`);
  },
});

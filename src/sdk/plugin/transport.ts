/**
 * The plugin API's HTTP client and its rules (spec document 3, "Client rules"): every request carries
 * the workload token and a `traceparent` of its own; mutating POSTs carry `X-Cloud-Sequence`, a
 * counter that only grows; a 401 triggers one token refresh shared by every request that got it
 * (single-flight) and one retry of each; nothing waits longer than the request timeout (10 s); GETs
 * expect 200; reporting POSTs are fire-and-forget. Built on `node:http` (not `fetch`, whose
 * implementation costs more to load than a small server's whole program).
 */
import { request as httpRequest, type ClientRequest, type IncomingMessage, type RequestOptions } from "node:http";
import { CloudApiError } from "./errors.js";
import { silentLogger, type SdkLogger } from "./types.js";

/** Spec document 3, "Limits": plugin request timeout. */
export const pluginRequestTimeoutMs = 10_000;
/** Attempts of a fire-and-forget report (network failure or 5xx: the controller did not take it). */
export const reportAttemptsMax = 3;
/** Pause before the second attempt of a report; doubles for each further one. */
export const reportRetryBaseMs = 200;
/** Reports in flight at once; one more is dropped (and counted) rather than queued without bound. */
export const reportsInFlightMax = 256;
/** Largest answer body read; a bigger one fails the call. */
export const responseBodyBytesMax = 8 * 1024 * 1024;

export const REFRESH_PATH = "/api/plugin/auth/refresh";
export const TICKET_PATH = "/api/plugin/events/ticket";
/** POSTs that change nothing in the cluster's records: no sequence number. */
const UNSEQUENCED_POSTS: ReadonlySet<string> = new Set([REFRESH_PATH, TICKET_PATH]);

export interface TransportOptions {
  /** Base URL of the plugin API (the daemon's relay: `CLOUD_CONTROLLER_URL`). */
  controllerUrl: string;
  /** The workload token (`CLOUD_WORKLOAD_TOKEN`). */
  token: string;
  /** Default 10 s (spec). */
  requestTimeoutMs?: number;
  reportAttempts?: number;
  reportRetryBaseMs?: number;
  logger?: SdkLogger;
  /** Called with every new token a refresh brought. */
  onTokenRefreshed?: (token: string) => void;
  /** Wall-clock milliseconds; the sequence counter starts from it. */
  nowMs?: () => number;
}

/** An answer of the controller. */
export interface ApiAnswer {
  status: number;
  body: unknown;
}

/** One request's headers beyond the defaults. */
type Method = "GET" | "POST";

/** A W3C trace context header starting a new trace: version 00, random ids, sampled. */
export function newTraceparent(): string {
  return `00-${randomHex(32)}-${randomHex(16)}-01`;
}

// Trace ids need to be unique, not secret: Math.random avoids loading node:crypto at boot.
function randomHex(length: number): string {
  let out = "";
  while (out.length < length)
    out += Math.floor(Math.random() * 0x100000000)
      .toString(16)
      .padStart(8, "0");
  out = out.slice(0, length);
  return /^0+$/.test(out) ? `${out.slice(0, -1)}1` : out;
}

/** The message of an error envelope `{"error":{"code","message","status"}}`, or null. */
function envelopeOf(body: unknown): { code: string; message: string } | null {
  const error = (body as { error?: { code?: unknown; message?: unknown } } | null)?.error;
  if (error && typeof error.code === "string") return { code: error.code, message: typeof error.message === "string" ? error.message : error.code };
  return null;
}

export class PluginTransport {
  private readonly baseUrl: string;
  private readonly requestTimeoutMs: number;
  private readonly reportAttempts: number;
  private readonly reportRetryBaseMs: number;
  private readonly logger: SdkLogger;
  private readonly nowMs: () => number;
  private currentToken: string;
  private refreshing: Promise<void> | null = null;
  private lastSequence = 0;
  private reportsInFlight = 0;
  private reportsDropped = 0;
  private refreshes = 0;

  constructor(private readonly options: TransportOptions) {
    this.baseUrl = options.controllerUrl.replace(/\/+$/, "");
    if (!/^https?:\/\//.test(this.baseUrl)) throw new TypeError(`controllerUrl must be an http or https URL, got "${options.controllerUrl}"`);
    if (!options.token) throw new TypeError("a workload token is required");
    this.currentToken = options.token;
    this.requestTimeoutMs = options.requestTimeoutMs ?? pluginRequestTimeoutMs;
    this.reportAttempts = options.reportAttempts ?? reportAttemptsMax;
    this.reportRetryBaseMs = options.reportRetryBaseMs ?? reportRetryBaseMs;
    this.logger = options.logger ?? silentLogger;
    this.nowMs = options.nowMs ?? Date.now;
  }

  /** The token requests are sent with now. */
  get token(): string {
    return this.currentToken;
  }

  /** Refreshes done so far, reports dropped because too many were in flight. */
  get stats(): { refreshes: number; reportsDropped: number; reportsInFlight: number } {
    return { refreshes: this.refreshes, reportsDropped: this.reportsDropped, reportsInFlight: this.reportsInFlight };
  }

  /**
   * The next `X-Cloud-Sequence`: one more than the last, and never below the wall clock in
   * microseconds, so a restarted server (same instance id, counter lost) still continues upwards.
   */
  nextSequence(): number {
    this.lastSequence = Math.max(this.lastSequence + 1, Math.floor(this.nowMs()) * 1000);
    return this.lastSequence;
  }

  /** GET that expects 200; the parsed JSON body. */
  async get<T>(path: string): Promise<T> {
    const answer = await this.call("GET", path, undefined);
    if (answer.status !== 200) throw this.failure(path, answer);
    return answer.body as T;
  }

  /** POST that expects a 2xx; the parsed JSON body (null when empty). */
  async post<T>(path: string, body?: unknown): Promise<T> {
    const answer = await this.call("POST", path, body);
    if (answer.status < 200 || answer.status > 299) throw this.failure(path, answer);
    return answer.body as T;
  }

  /**
   * A fire-and-forget POST: returns at once, never throws. A network failure or a 5xx is sent again
   * (bounded); what still fails is logged.
   */
  report(path: string, body: unknown): void {
    if (this.reportsInFlight >= reportsInFlightMax) {
      this.reportsDropped += 1;
      this.logger.warn(`Plugin API ${path.replace("/api/plugin/", "")} dropped: ${reportsInFlightMax} reports already in flight`);
      return;
    }
    this.reportsInFlight += 1;
    void this.reportWithRetries(path, body).finally(() => (this.reportsInFlight -= 1));
  }

  private async reportWithRetries(path: string, body: unknown): Promise<void> {
    const name = path.replace("/api/plugin/", "");
    for (let attempt = 1; attempt <= this.reportAttempts; attempt += 1) {
      try {
        await this.post(path, body);
        return;
      } catch (error) {
        const retriable = error instanceof CloudApiError && error.retriable;
        const status = error instanceof CloudApiError && error.status > 0 ? `answered ${error.status}` : `failed: ${(error as Error).message}`;
        this.logger.warn(`Plugin API ${name} ${status} (attempt ${attempt}/${this.reportAttempts})`);
        if (!retriable) return;
      }
      if (attempt < this.reportAttempts) await new Promise((resolve) => setTimeout(resolve, this.reportRetryBaseMs * 2 ** (attempt - 1)));
    }
  }

  /** One request with the 401 rule: refresh once (shared), then send once more with the new token. */
  async call(method: Method, path: string, body: unknown): Promise<ApiAnswer> {
    const usedToken = this.currentToken;
    const first = await this.send(method, path, body, usedToken);
    if (first.status !== 401 || path === REFRESH_PATH) return first;
    await this.refreshAfter(usedToken);
    return await this.send(method, path, body, this.currentToken);
  }

  /** Refreshes the token unless another request already replaced `usedToken`; concurrent callers share one refresh. */
  private refreshAfter(usedToken: string): Promise<void> {
    if (this.currentToken !== usedToken) return Promise.resolve();
    this.refreshing ??= this.refresh().finally(() => (this.refreshing = null));
    return this.refreshing;
  }

  private async refresh(): Promise<void> {
    const answer = await this.send("POST", REFRESH_PATH, undefined, this.currentToken);
    const token = (answer.body as { token?: unknown } | null)?.token;
    if (answer.status !== 200 || typeof token !== "string" || token === "") throw this.failure(REFRESH_PATH, answer);
    this.currentToken = token;
    this.refreshes += 1;
    this.options.onTokenRefreshed?.(token);
  }

  private failure(path: string, answer: ApiAnswer): CloudApiError {
    const envelope = envelopeOf(answer.body);
    if (envelope) return new CloudApiError(answer.status, envelope.code, envelope.message);
    return new CloudApiError(answer.status, "UNEXPECTED_STATUS", `${path} answered ${answer.status}`);
  }

  /** Opens a GET whose body is read by the caller (the event stream); rejects unless the answer is 200. */
  async openStream(pathAndQuery: string, signal: AbortSignal): Promise<IncomingMessage> {
    const request = await this.startRequest("GET", pathAndQuery, { accept: "text/event-stream", traceparent: newTraceparent() }, signal);
    return await new Promise<IncomingMessage>((resolve, reject) => {
      const timer = setTimeout(() => request.destroy(new CloudApiError(0, "TIMEOUT", `no answer within ${this.requestTimeoutMs} ms`)), this.requestTimeoutMs);
      request.on("response", (response) => {
        clearTimeout(timer);
        if (response.statusCode === 200) return resolve(response);
        response.resume();
        reject(new CloudApiError(response.statusCode ?? 0, "UNEXPECTED_STATUS", `${pathAndQuery.split("?")[0]} answered ${response.statusCode}`));
      });
      request.on("error", (error) => {
        clearTimeout(timer);
        reject(error instanceof CloudApiError ? error : new CloudApiError(0, "CONNECTION_FAILED", error.message));
      });
      request.end();
    });
  }

  private async startRequest(method: Method, path: string, headers: Record<string, string | number>, signal?: AbortSignal): Promise<ClientRequest> {
    const url = `${this.baseUrl}${path}`;
    // node:https (TLS) is loaded only for an https controller URL.
    const send = url.startsWith("https:") ? (await import("node:https")).request : httpRequest;
    const options: RequestOptions = { method, headers, ...(signal ? { signal } : {}) };
    return send(url, options);
  }

  /** One HTTP exchange, bounded by the request timeout; network failures become CloudApiError status 0. */
  private async send(method: Method, path: string, body: unknown, token: string): Promise<ApiAnswer> {
    const payload = method === "POST" && body !== undefined ? JSON.stringify(body) : "";
    const headers: Record<string, string | number> = {
      authorization: `Bearer ${token}`,
      accept: "application/json",
      traceparent: newTraceparent(),
    };
    if (method === "POST") {
      headers["content-length"] = Buffer.byteLength(payload);
      if (payload !== "") headers["content-type"] = "application/json";
      if (!UNSEQUENCED_POSTS.has(path)) headers["x-cloud-sequence"] = String(this.nextSequence());
    }
    const request = await this.startRequest(method, path, headers);
    return await new Promise<ApiAnswer>((resolve, reject) => {
      const timer = setTimeout(
        () => request.destroy(new CloudApiError(0, "TIMEOUT", `${path} got no answer within ${this.requestTimeoutMs} ms`)),
        this.requestTimeoutMs,
      );
      const fail = (error: Error) => {
        clearTimeout(timer);
        reject(error instanceof CloudApiError ? error : new CloudApiError(0, "CONNECTION_FAILED", `${path}: ${error.message}`));
      };
      request.on("error", fail);
      request.on("response", (response) => {
        const chunks: Buffer[] = [];
        let bytes = 0;
        response.on("data", (chunk: Buffer) => {
          bytes += chunk.length;
          if (bytes > responseBodyBytesMax)
            request.destroy(new CloudApiError(0, "CONNECTION_FAILED", `${path}: answer larger than ${responseBodyBytesMax} bytes`));
          else chunks.push(chunk);
        });
        response.on("error", fail);
        response.on("end", () => {
          clearTimeout(timer);
          const text = Buffer.concat(chunks).toString("utf8");
          let parsed: unknown = null;
          if (text !== "") {
            try {
              parsed = JSON.parse(text);
            } catch {
              parsed = text;
            }
          }
          resolve({ status: response.statusCode ?? 0, body: parsed });
        });
      });
      request.end(payload);
    });
  }
}

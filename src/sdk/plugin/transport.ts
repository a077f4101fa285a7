/**
 * The plugin API's HTTP client and its rules (spec document 3, "Client rules"): every request carries
 * the workload token and a `traceparent` of its own; mutating POSTs carry `X-Cloud-Sequence`, a
 * counter of this process counting from 1; a 401 triggers one token refresh shared by every request
 * that got it (single-flight) and one retry of each; the token is also renewed ahead of its expiry,
 * so the controller's short grace for a rotated token is never what a request depends on; nothing
 * waits longer than the request timeout (10 s); GETs expect 200; reporting POSTs are
 * fire-and-forget. Built on `node:http` (not `fetch`, whose implementation costs more to load than
 * a small server's whole program). Decisions: docs/decisions/plugin-sdk.md.
 */
import { request as httpRequest, type ClientRequest, type IncomingMessage, type RequestOptions } from "node:http";
import { CloudApiError } from "./errors.js";
import { silentLogger, type SdkLogger } from "./types.js";

/** Spec document 3, "Limits": plugin request timeout. */
export const pluginRequestTimeoutMs = 10_000;
/** Attempts of a fire-and-forget report (network failure or 5xx): 200 ms doubling, 6.2 s in all, longer than a controller failover. */
export const reportAttemptsMax = 6;
/** Pause before the second attempt of a report; doubles for each further one. */
export const reportRetryBaseMs = 200;
/** Reports in flight at once; one more is dropped (and counted) rather than queued without bound. */
export const reportsInFlightMax = 256;
/** Largest answer body read; a bigger one fails the call. */
export const responseBodyBytesMax = 8 * 1024 * 1024;
/**
 * Sequenced requests in flight at once; more wait their turn. The controller takes a number up to 64
 * below the highest it accepted (its replay window), so keeping at most half of that on the way keeps
 * overtaking requests inside the window.
 */
export const sequencedInFlightMax = 32;
/** The token is renewed this long before it expires (or halfway through its remaining life, when that is sooner). */
export const tokenRefreshAheadMs = 5 * 60_000;
/** Pause before trying a failed ahead-of-expiry renewal again. */
export const tokenRefreshRetryMs = 5_000;
/** Answers meaning the request may or may not have reached the controller: a retry keeps its sequence number. */
const UNKNOWN_OUTCOME_STATUSES: ReadonlySet<number> = new Set([0, 502, 503, 504]);

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
  /** Wall-clock milliseconds (token expiry). */
  nowMs?: () => number;
  /**
   * When `token` expires (epoch ms). Default: the `exp` claim when the token carries one (the
   * controller's `<kind>.<base64url JSON>.<signature>` format), else unknown until the first refresh.
   */
  tokenExpiresAtMs?: number | null;
  /** Default {@link tokenRefreshAheadMs}. */
  refreshAheadMs?: number;
}

/** What one POST carries beyond its body. */
interface SendOptions {
  /** The `X-Cloud-Sequence` to send; null for none. */
  sequence: number | null;
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
  // Flags 00: the plugin starts the trace but leaves sampling to the controller's samplerRatio
  // (docs/decisions/tracing.md); a plugin that wants a trace kept sends its own with flags 01.
  return `00-${randomHex(32)}-${randomHex(16)}-00`;
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

/** The `exp` claim (epoch ms) of a `<kind>.<base64url JSON>.<signature>` token, not verified; null when there is none. */
export function tokenExpiryOf(token: string): number | null {
  const parts = token.split(".");
  if (parts.length !== 3 || parts[1] === "" || parts[1].length > 4_096) return null;
  try {
    const claims = JSON.parse(Buffer.from(parts[1], "base64url").toString("utf8")) as { exp?: unknown };
    return typeof claims.exp === "number" && Number.isFinite(claims.exp) ? claims.exp : null;
  } catch {
    return null;
  }
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
  private readonly refreshAheadMs: number;
  private currentToken: string;
  private expiresAtMs: number | null;
  private refreshing: Promise<void> | null = null;
  private refreshTimer: ReturnType<typeof setTimeout> | null = null;
  private closed = false;
  private lastSequence = 0;
  private sequencedInFlight = 0;
  private readonly sequenceWaiters: (() => void)[] = [];
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
    this.refreshAheadMs = options.refreshAheadMs ?? tokenRefreshAheadMs;
    this.expiresAtMs = options.tokenExpiresAtMs === undefined ? tokenExpiryOf(options.token) : options.tokenExpiresAtMs;
    this.scheduleRefresh();
  }

  /** When the token in use expires (epoch ms); null when unknown. */
  get tokenExpiresAtMs(): number | null {
    return this.expiresAtMs;
  }

  /** Stops the ahead-of-expiry renewal (requests still work). */
  close(): void {
    this.closed = true;
    if (this.refreshTimer) clearTimeout(this.refreshTimer);
    this.refreshTimer = null;
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
   * The next `X-Cloud-Sequence`: one more than the last, from 1. The controller counts per start of
   * the instance (its workload token names the start), and a new process is a new start.
   */
  nextSequence(): number {
    this.lastSequence += 1;
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
    void this.reportSettled(path, body);
  }

  /**
   * {@link report}, with a promise that resolves once the report is settled: carried out, refused,
   * given up after its attempts, or dropped because too many were in flight. It never rejects.
   */
  reportSettled(path: string, body: unknown): Promise<void> {
    if (this.reportsInFlight >= reportsInFlightMax) {
      this.reportsDropped += 1;
      this.logger.warn(`Plugin API ${path.replace("/api/plugin/", "")} dropped: ${reportsInFlightMax} reports already in flight`);
      return Promise.resolve();
    }
    this.reportsInFlight += 1;
    return this.reportWithRetries(path, body)
      .catch((error: Error) => this.logger.warn(`Plugin API ${path.replace("/api/plugin/", "")} failed: ${error.message}`))
      .finally(() => (this.reportsInFlight -= 1));
  }

  /**
   * Sends a report up to `reportAttempts` times. A retry after no answer, or after a 502, 503 or
   * 504 (something between the plugin and the controller answered), keeps its sequence number: the
   * first attempt may have been carried out, and the controller then answers 409
   * `SEQUENCE_REPEATED`, which counts as done. After a 500 the controller used the number and
   * failed: the retry takes a new one.
   */
  private async reportWithRetries(path: string, body: unknown): Promise<void> {
    const name = path.replace("/api/plugin/", "");
    let sequence: number | null = null;
    for (let attempt = 1; attempt <= this.reportAttempts; attempt += 1) {
      try {
        const answer = await this.call("POST", path, body, sequence);
        if (answer.status >= 200 && answer.status <= 299) return;
        if (attempt > 1 && sequence !== null && answer.status === 409 && envelopeOf(answer.body)?.code === "SEQUENCE_REPEATED") return;
        this.logger.warn(`Plugin API ${name} answered ${answer.status} (attempt ${attempt}/${this.reportAttempts})`);
        if (answer.status < 500) return;
        sequence = UNKNOWN_OUTCOME_STATUSES.has(answer.status) ? answer.sequence : null;
      } catch (error) {
        this.logger.warn(`Plugin API ${name} failed: ${(error as Error).message} (attempt ${attempt}/${this.reportAttempts})`);
        const sent = (error as { sequence?: unknown }).sequence;
        sequence = typeof sent === "number" ? sent : null;
      }
      if (attempt < this.reportAttempts) await new Promise((resolve) => setTimeout(resolve, this.reportRetryBaseMs * 2 ** (attempt - 1)));
    }
  }

  /**
   * One request with the 401 rule: refresh once (shared), then send once more with the new token. A
   * mutating POST waits for a slot among {@link sequencedInFlightMax} and takes its number then
   * (`reuseSequence` sends a number again: the retry of a report whose outcome is unknown). The
   * retry after a 401 takes a new number: the controller refuses the token before it looks at the
   * sequence, so the first one was not used.
   */
  async call(method: Method, path: string, body: unknown, reuseSequence: number | null = null): Promise<ApiAnswer & { sequence: number | null }> {
    const sequenced = method === "POST" && !UNSEQUENCED_POSTS.has(path);
    if (!sequenced) return { ...(await this.callWithRefresh(method, path, body, () => null)), sequence: null };
    await this.acquireSequenceSlot();
    let sequence: number | null = null;
    try {
      const answer = await this.callWithRefresh(method, path, body, (attempt) => {
        sequence = attempt === 0 && reuseSequence !== null ? reuseSequence : this.nextSequence();
        return sequence;
      });
      return { ...answer, sequence };
    } catch (error) {
      if (error instanceof CloudApiError) Object.assign(error, { sequence });
      throw error;
    } finally {
      this.releaseSequenceSlot();
    }
  }

  private async callWithRefresh(method: Method, path: string, body: unknown, sequenceFor: (attempt: number) => number | null): Promise<ApiAnswer> {
    const usedToken = this.currentToken;
    const first = await this.send(method, path, body, usedToken, { sequence: sequenceFor(0) });
    if (first.status !== 401 || path === REFRESH_PATH) return first;
    await this.refreshAfter(usedToken);
    return await this.send(method, path, body, this.currentToken, { sequence: sequenceFor(1) });
  }

  private acquireSequenceSlot(): Promise<void> {
    if (this.sequencedInFlight < sequencedInFlightMax) {
      this.sequencedInFlight += 1;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.sequenceWaiters.push(resolve));
  }

  private releaseSequenceSlot(): void {
    const next = this.sequenceWaiters.shift();
    if (next) next();
    else this.sequencedInFlight -= 1;
  }

  /**
   * Rotates the token now (`POST /api/plugin/auth/refresh`), shared with any refresh under way. The
   * old token keeps working for the controller's grace (10 s), so requests already sent with it land.
   */
  refreshToken(): Promise<void> {
    this.refreshing ??= this.refresh().finally(() => (this.refreshing = null));
    return this.refreshing;
  }

  /** Refreshes the token unless another request already replaced `usedToken`; concurrent callers share one refresh. */
  private refreshAfter(usedToken: string): Promise<void> {
    if (this.currentToken !== usedToken) return Promise.resolve();
    return this.refreshToken();
  }

  private async refresh(): Promise<void> {
    const answer = await this.send("POST", REFRESH_PATH, undefined, this.currentToken, { sequence: null });
    const { token, expiresAt } = (answer.body as { token?: unknown; expiresAt?: unknown } | null) ?? {};
    if (answer.status !== 200 || typeof token !== "string" || token === "") throw this.failure(REFRESH_PATH, answer);
    this.currentToken = token;
    const expires = typeof expiresAt === "string" ? Date.parse(expiresAt) : NaN;
    this.expiresAtMs = Number.isFinite(expires) ? expires : tokenExpiryOf(token);
    this.refreshes += 1;
    this.scheduleRefresh();
    this.options.onTokenRefreshed?.(token);
  }

  /**
   * Arms the ahead-of-expiry renewal: {@link refreshAheadMs} before the expiry, or halfway through
   * the remaining life when that is sooner; a failed renewal is tried again every
   * {@link tokenRefreshRetryMs} while the token lasts. The timer does not keep the process alive.
   */
  private scheduleRefresh(delayMs?: number): void {
    if (this.refreshTimer) clearTimeout(this.refreshTimer);
    this.refreshTimer = null;
    if (this.closed || this.expiresAtMs === null) return;
    const remainingMs = this.expiresAtMs - this.nowMs();
    if (remainingMs <= 0) return;
    const waitMs = delayMs ?? Math.max(0, remainingMs - Math.min(this.refreshAheadMs, remainingMs / 2));
    this.refreshTimer = setTimeout(
      () => {
        this.refreshTimer = null;
        this.refreshToken().catch((error: Error) => {
          this.logger.warn(`Renewing the workload token failed: ${error.message}`);
          if (this.refreshTimer === null) this.scheduleRefresh(Math.min(tokenRefreshRetryMs, Math.max(0, (this.expiresAtMs ?? 0) - this.nowMs())));
        });
      },
      Math.min(waitMs, 2 ** 31 - 1),
    );
    this.refreshTimer.unref?.();
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
  private async send(method: Method, path: string, body: unknown, token: string, options: SendOptions = { sequence: null }): Promise<ApiAnswer> {
    const payload = method === "POST" && body !== undefined ? JSON.stringify(body) : "";
    const headers: Record<string, string | number> = {
      authorization: `Bearer ${token}`,
      accept: "application/json",
      traceparent: newTraceparent(),
    };
    if (method === "POST") {
      headers["content-length"] = Buffer.byteLength(payload);
      if (payload !== "") headers["content-type"] = "application/json";
      if (options.sequence !== null) headers["x-cloud-sequence"] = String(options.sequence);
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

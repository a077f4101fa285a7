/**
 * The REST client of cloudctl: JSON requests under `/api/v1`, bearer authentication, bounded
 * retries for idempotent requests and `--verbose` request/response lines with secrets redacted.
 */
import { CliError, ExitCode, exitCodeForStatus } from "./exit-codes.js";

/** Total attempts (first try included) for GET and HEAD. */
export const retryAttemptsMax = 3;
/** Backoff before the first retry; doubled for each further retry. */
export const retryBaseDelayMs = 200;
/** Upper bound of one backoff delay. */
export const retryDelayCapMs = 2_000;
/** Relative jitter applied to every backoff delay (±20 %). */
export const retryJitterRatio = 0.2;
/** Bound on one request, connection to last byte of the headers; a slow controller fails instead of hanging. */
export const requestTimeoutMs = 30_000;

const retryableMethods = new Set(["GET", "HEAD"]);

/** True for statuses a GET/HEAD is retried on: 408, 429 and every 5xx. */
export function isRetryableStatus(status: number): boolean {
  return status === 408 || status === 429 || status >= 500;
}

/**
 * Delay before retry number `retry` (1 for the first retry): 200 ms × 2^(retry−1) scaled by a
 * random factor in [0.8, 1.2] (`random` returns a value in [0, 1)), never above the 2 s cap.
 */
export function backoffDelayMs(retry: number, random: () => number = Math.random): number {
  const exponential = retryBaseDelayMs * 2 ** Math.min(retry - 1, 16);
  const factor = 1 + retryJitterRatio * (2 * random() - 1);
  return Math.min(retryDelayCapMs, Math.round(exponential * factor));
}

/** A non-2xx answer from the controller, carrying the error envelope's code and message. */
export class ApiRequestError extends CliError {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly body: string,
  ) {
    super(message, exitCodeForStatus(status));
    this.name = "ApiRequestError";
  }
}

/** The controller could not be reached (refused, DNS, reset, timeout). */
export class ConnectionError extends CliError {
  constructor(url: string, cause: string) {
    super(`cannot reach controller at ${url}: ${cause}`, ExitCode.connection);
    this.name = "ConnectionError";
  }
}

/** A successful response: the status, the raw body text (printed verbatim by `--json`) and the parsed JSON. */
export interface ApiResponse<T = unknown> {
  status: number;
  raw: string;
  data: T;
}

/** Options of one request. */
export interface RequestOptions {
  query?: Record<string, string | number | boolean | undefined>;
  body?: unknown;
  /** Send the bearer token (default true). */
  auth?: boolean;
}

/** Construction parameters of {@link HttpClient}. */
export interface HttpClientOptions {
  baseUrl: string;
  token?: string;
  /** Receives `--verbose` lines; undefined when not verbose. */
  verbose?: (line: string) => void;
  sleep?: (ms: number) => Promise<void>;
  random?: () => number;
  fetch?: typeof fetch;
}

const redactedKeys = /^(password|token|ticket|secret)$/i;

/** Replaces the values of secret query parameters by `<redacted>`. */
export function redactUrl(url: string): string {
  const parsed = new URL(url);
  for (const key of [...parsed.searchParams.keys()]) {
    if (redactedKeys.test(key)) parsed.searchParams.set(key, "<redacted>");
  }
  return parsed.toString().replace(/%3Credacted%3E/g, "<redacted>");
}

/** Builds the error for a non-2xx response from the `{"error":{code,message,status}}` envelope, or the flat `{"error": "..."}` form. */
export function errorFromResponse(status: number, statusText: string, raw: string): ApiRequestError {
  let code = `HTTP_${status}`;
  let message = statusText || `HTTP ${status}`;
  try {
    const body = JSON.parse(raw) as { error?: unknown; message?: unknown };
    if (body && typeof body.error === "object" && body.error !== null) {
      const envelope = body.error as { code?: unknown; message?: unknown };
      if (typeof envelope.code === "string") code = envelope.code;
      if (typeof envelope.message === "string") message = envelope.message;
    } else if (body && typeof body.error === "string") {
      message = body.error;
    } else if (body && typeof body.message === "string") {
      message = body.message;
    }
  } catch {
    // Not a JSON error body (a proxy's page, plain text): a short one is the message itself.
    if (raw.trim() !== "" && raw.length < 500) message = raw.trim();
  }
  return new ApiRequestError(status, code, message, raw);
}

function describeFetchError(error: unknown): string {
  const err = error as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  if (err?.name === "TimeoutError") return `no response within ${requestTimeoutMs} ms`;
  return err?.cause?.code ?? err?.cause?.message ?? err?.message ?? String(error);
}

/** REST client bound to one controller and token. */
export class HttpClient {
  readonly baseUrl: string;
  private readonly token: string | undefined;
  private readonly verbose: ((line: string) => void) | undefined;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly random: () => number;
  private readonly fetchFn: typeof fetch;

  constructor(options: HttpClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.token = options.token;
    this.verbose = options.verbose;
    this.sleep = options.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
    this.random = options.random ?? Math.random;
    this.fetchFn = options.fetch ?? fetch;
  }

  /** Absolute URL of an API path, with empty query values omitted. */
  url(path: string, query?: RequestOptions["query"]): string {
    const url = new URL(this.baseUrl + path);
    for (const [key, value] of Object.entries(query ?? {})) {
      if (value === undefined || value === "") continue;
      url.searchParams.set(key, String(value));
    }
    return url.toString();
  }

  /** Headers of an authenticated request (used by streaming requests too). */
  headers(auth = true, json = false): Record<string, string> {
    const headers: Record<string, string> = { accept: "application/json" };
    if (json) headers["content-type"] = "application/json";
    if (auth && this.token) headers.authorization = `Bearer ${this.token}`;
    return headers;
  }

  /** Prints a `--verbose` line about an outgoing request. */
  logRequest(method: string, url: string, headers: Record<string, string>): void {
    if (!this.verbose) return;
    this.verbose(`> ${method} ${redactUrl(url)}`);
    if (headers.authorization) this.verbose("> Authorization: Bearer <redacted>");
  }

  /** Sends one request; GET and HEAD are retried on connection errors, 408, 429 and 5xx. */
  async request<T = unknown>(method: string, path: string, options: RequestOptions = {}): Promise<ApiResponse<T>> {
    const upper = method.toUpperCase();
    const url = this.url(path, options.query);
    const hasBody = options.body !== undefined;
    const headers = this.headers(options.auth ?? true, hasBody);
    const attempts = retryableMethods.has(upper) ? retryAttemptsMax : 1;
    for (let attempt = 1; ; attempt++) {
      this.logRequest(upper, url, headers);
      const startedMs = Date.now();
      let response: Response;
      try {
        response = await this.fetchFn(url, {
          method: upper,
          headers,
          body: hasBody ? JSON.stringify(options.body) : undefined,
          signal: AbortSignal.timeout(requestTimeoutMs),
        });
      } catch (error) {
        const cause = describeFetchError(error);
        this.verbose?.(`< connection error: ${cause}`);
        if (attempt < attempts) {
          await this.backoff(attempt, attempts);
          continue;
        }
        throw new ConnectionError(this.baseUrl, cause);
      }
      const raw = upper === "HEAD" ? "" : await response.text();
      this.verbose?.(`< ${response.status} ${response.statusText} (${Date.now() - startedMs} ms)`);
      if (response.ok) return { status: response.status, raw, data: parseBody(raw) as T };
      if (attempt < attempts && isRetryableStatus(response.status)) {
        await this.backoff(attempt, attempts);
        continue;
      }
      throw errorFromResponse(response.status, response.statusText, raw);
    }
  }

  private async backoff(attempt: number, attempts: number): Promise<void> {
    const delayMs = backoffDelayMs(attempt, this.random);
    this.verbose?.(`retrying in ${delayMs} ms (attempt ${attempt + 1} of ${attempts})`);
    await this.sleep(delayMs);
  }

  /** GET with optional query (retried). */
  get<T = unknown>(path: string, query?: RequestOptions["query"]): Promise<ApiResponse<T>> {
    return this.request<T>("GET", path, { query });
  }

  /** POST with an optional JSON body (never retried). */
  post<T = unknown>(path: string, body?: unknown): Promise<ApiResponse<T>> {
    return this.request<T>("POST", path, { body });
  }

  /** PATCH with a JSON body (never retried). */
  patch<T = unknown>(path: string, body: unknown): Promise<ApiResponse<T>> {
    return this.request<T>("PATCH", path, { body });
  }

  /** DELETE with optional query (never retried). */
  delete<T = unknown>(path: string, query?: RequestOptions["query"]): Promise<ApiResponse<T>> {
    return this.request<T>("DELETE", path, { query });
  }
}

function parseBody(raw: string): unknown {
  if (raw.trim() === "") return null;
  try {
    return JSON.parse(raw);
  } catch {
    // Not every answer is JSON (metrics, plain text): the caller gets the text as it came.
    return raw;
  }
}

/** Accepts both list forms the spec allows: a bare array or an envelope with a `data` array. */
export function listOf<T>(data: unknown, key = "data"): T[] {
  if (Array.isArray(data)) return data as T[];
  if (data && typeof data === "object") {
    const value = (data as Record<string, unknown>)[key] ?? (data as Record<string, unknown>).data;
    if (Array.isArray(value)) return value as T[];
  }
  return [];
}

/** Percent-encodes one path segment. */
export function segment(value: string): string {
  return encodeURIComponent(value);
}

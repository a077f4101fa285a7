/**
 * The Request and Response objects of a module route (spec document 3, "Module REST API objects"),
 * built from plain values: the platform builds them in the module's worker for each call, and a
 * module's own tests build them with {@link moduleRequest} and {@link ModuleResponseRecorder}.
 */
import { IllegalStateError, InvalidArgumentError } from "./errors.js";
import type { BodyType, ModuleRequest, ModuleResponse } from "./types.js";

/** A request as plain values. */
export interface RequestData {
  method: string;
  path: string;
  pathParams?: Record<string, string>;
  /** First value per key. */
  query?: Record<string, string>;
  /** Names lower-cased. */
  headers?: Record<string, string>;
  body?: Uint8Array;
}

const utf8 = new TextDecoder("utf-8", { fatal: false });

/** Runs a body type (a parser function or an object with `parse`). */
export function applyBodyType<T>(type: BodyType<T>, value: unknown): T {
  return typeof type === "function" ? type(value) : type.parse(value);
}

/** The message of a thrown value, for `details` and 422 messages. */
export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** A {@link ModuleRequest} over plain values. */
export function moduleRequest(data: RequestData): ModuleRequest {
  const pathParams = Object.freeze({ ...data.pathParams });
  const query = Object.freeze({ ...data.query });
  const headers = Object.freeze(Object.fromEntries(Object.entries(data.headers ?? {}).map(([k, v]) => [k.toLowerCase(), v])));
  const body = data.body ?? new Uint8Array(0);
  return {
    method: () => data.method,
    path: () => data.path,
    pathParams: () => pathParams,
    queryParams: () => query,
    headers: () => headers,
    body: () => body,
    bodyText: () => utf8.decode(body),
    bodyAs<T>(type?: BodyType<T>): T {
      let parsed: unknown;
      try {
        parsed = JSON.parse(utf8.decode(body));
      } catch (error) {
        throw new InvalidArgumentError(`invalid json body: ${messageOf(error)}`);
      }
      if (!type) return parsed as T;
      try {
        return applyBodyType(type, parsed);
      } catch (error) {
        throw new InvalidArgumentError(messageOf(error));
      }
    },
    pathParam(name: string): string {
      const value = pathParams[name];
      if (value === undefined) throw new InvalidArgumentError(`Missing path parameter: ${name}`);
      return value;
    },
    queryParam: (name) => query[name],
    header: (name) => headers[name.toLowerCase()],
    userId: () => headers["x-user-id"],
  };
}

/** What a handler answered. */
export interface ResponseData {
  status: number;
  headers: Record<string, string>;
  /** The body; empty when the handler sent none. */
  body: string;
  /** Whether json() or text() was called. */
  sent: boolean;
}

/** A {@link ModuleResponse} that records what the handler answers. */
export class ModuleResponseRecorder implements ModuleResponse {
  private readonly data: ResponseData = { status: 200, headers: {}, body: "", sent: false };

  status(code: number): ModuleResponse {
    this.writable();
    if (!Number.isInteger(code) || code < 200 || code > 599) throw new IllegalStateError(`status ${code} is not an HTTP status between 200 and 599`);
    this.data.status = code;
    return this;
  }

  header(name: string, value: string): ModuleResponse {
    this.writable();
    this.data.headers[String(name).toLowerCase()] = String(value);
    return this;
  }

  json(value: unknown): void {
    this.writable();
    const text = JSON.stringify(value);
    this.data.body = text === undefined ? "null" : text;
    this.data.headers["content-type"] = "application/json";
    this.data.sent = true;
  }

  text(value: string): void {
    this.writable();
    this.data.body = String(value);
    this.data.headers["content-type"] ??= "text/plain; charset=utf-8";
    this.data.sent = true;
  }

  /** The recorded answer. */
  result(): ResponseData {
    return { ...this.data, headers: { ...this.data.headers } };
  }

  private writable(): void {
    if (this.data.sent) throw new IllegalStateError("the response was already sent (json and text are terminal)");
  }
}

/**
 * The REST client of the dashboard: bearer token on every request, JSON in and out, and the API's
 * error envelope turned into an {@link ApiError} whose message is the controller's own. A 401 on an
 * authenticated request signs the session out. A failure to reach the controller at all is status 0.
 */

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export type Query = Record<string, string | number | boolean | undefined | null>;

export interface ApiClientOptions {
  base: string;
  token(): string | null;
  onUnauthorized(): void;
}

export class ApiClient {
  constructor(private readonly options: ApiClientOptions) {}

  get base(): string {
    return this.options.base;
  }

  /** The absolute URL of an API path (`groups/lobby`) with a query. */
  url(path: string, query: Query = {}): string {
    const url = new URL(path.replace(/^\//, ""), this.options.base);
    for (const [key, value] of Object.entries(query)) if (value !== undefined && value !== null && value !== "") url.searchParams.set(key, String(value));
    return url.toString();
  }

  get<T>(path: string, query?: Query): Promise<T> {
    return this.json<T>("GET", path, undefined, query);
  }
  post<T>(path: string, body?: unknown, query?: Query): Promise<T> {
    return this.json<T>("POST", path, body, query);
  }
  put<T>(path: string, body?: unknown): Promise<T> {
    return this.json<T>("PUT", path, body);
  }
  patch<T>(path: string, body?: unknown): Promise<T> {
    return this.json<T>("PATCH", path, body);
  }
  delete<T>(path: string, query?: Query): Promise<T> {
    return this.json<T>("DELETE", path, undefined, query);
  }

  /** A request with any body (uploads); the response is checked, not parsed. */
  async send(method: string, path: string, body: BodyInit | null, query?: Query, headers: Record<string, string> = {}): Promise<Response> {
    const token = this.options.token();
    let res: Response;
    try {
      res = await fetch(this.url(path, query), {
        method,
        body,
        headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...headers },
      });
    } catch {
      throw new ApiError(0, "UNREACHABLE", "The controller cannot be reached");
    }
    if (!res.ok) throw await this.errorOf(res, token !== null);
    return res;
  }

  /**
   * Sends `body` as it is (a file: a backup bundle) and reports the bytes sent, which `fetch` cannot:
   * so this one request goes through XMLHttpRequest. The answer is parsed as JSON.
   */
  upload<T>(path: string, body: Blob, onProgress?: (sentBytes: number, totalBytes: number) => void, query?: Query): Promise<T> {
    const token = this.options.token();
    return new Promise<T>((resolve, reject) => {
      const xhr = new XMLHttpRequest();
      xhr.open("POST", this.url(path, query));
      if (token) xhr.setRequestHeader("authorization", `Bearer ${token}`);
      xhr.setRequestHeader("content-type", body.type || "application/octet-stream");
      xhr.upload.onprogress = (e) => onProgress?.(e.loaded, e.lengthComputable ? e.total : body.size);
      xhr.onerror = () => reject(new ApiError(0, "UNREACHABLE", "The controller cannot be reached"));
      xhr.onload = () => {
        const res = new Response(xhr.responseText || null, { status: xhr.status, statusText: xhr.statusText });
        if (xhr.status >= 200 && xhr.status < 300) resolve((xhr.responseText ? JSON.parse(xhr.responseText) : undefined) as T);
        else void this.errorOf(res, token !== null).then(reject);
      };
      xhr.send(body);
    });
  }

  private async json<T>(method: string, path: string, body: unknown, query?: Query): Promise<T> {
    const res = await this.send(
      method,
      path,
      body === undefined ? null : JSON.stringify(body),
      query,
      body === undefined ? {} : { "content-type": "application/json" },
    );
    if (res.status === 204) return undefined as T;
    const text = await res.text();
    return (text ? JSON.parse(text) : undefined) as T;
  }

  private async errorOf(res: Response, authenticated: boolean): Promise<ApiError> {
    let code = `HTTP_${res.status}`;
    let message = res.statusText || `HTTP ${res.status}`;
    try {
      const body = (await res.json()) as { error?: { code?: string; message?: string } | string };
      if (typeof body.error === "object" && body.error) {
        code = body.error.code ?? code;
        message = body.error.message ?? message;
      } else if (typeof body.error === "string") message = body.error;
    } catch {
      // Not JSON: keep the status line.
    }
    if (res.status === 401 && authenticated) this.options.onUnauthorized();
    return new ApiError(res.status, code, message);
  }
}

/** The message to show for any thrown value. */
export function errorMessage(err: unknown): string {
  if (err instanceof ApiError) return err.status === 0 ? err.message : `${err.message} (${err.code})`;
  return err instanceof Error ? err.message : String(err);
}

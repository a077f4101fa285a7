/**
 * Talks to a real controller's module routes for tests: multipart uploads of bundle files (with an
 * optional signature part), upgrades, and authenticated calls.
 */
import { readFile } from "node:fs/promises";
import { basename } from "node:path";

export interface Answer {
  status: number;
  json: any;
  text: string;
  headers: Headers;
}

async function answer(res: Response): Promise<Answer> {
  const text = await res.text();
  let json: unknown;
  try {
    json = text === "" ? undefined : JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, json, text, headers: res.headers };
}

/** A multipart form with the bundle at `path` and, when given, its signature sidecar text. */
export async function bundleForm(path: string, signature?: string | Uint8Array): Promise<FormData> {
  const form = new FormData();
  form.set("bundle", new Blob([await readFile(path)]), basename(path));
  if (signature !== undefined) form.set("signature", new Blob([signature]), `${basename(path)}.sig`);
  return form;
}

export async function uploadModule(baseUrl: string, token: string, path: string, signature?: string | Uint8Array): Promise<Answer> {
  return answer(
    await fetch(`${baseUrl}/api/v1/modules/platform/upload`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}` },
      body: await bundleForm(path, signature),
    }),
  );
}

export async function upgradeModule(baseUrl: string, token: string, id: string, path: string, signature?: string | Uint8Array): Promise<Answer> {
  return answer(
    await fetch(`${baseUrl}/api/v1/modules/platform/${id}/upgrade`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}` },
      body: await bundleForm(path, signature),
    }),
  );
}

export async function call(
  baseUrl: string,
  token: string | null,
  method: string,
  path: string,
  body?: string,
  headers: Record<string, string> = {},
): Promise<Answer> {
  return answer(
    await fetch(`${baseUrl}${path}`, {
      method,
      headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body !== undefined ? { "content-type": "application/json" } : {}), ...headers },
      body,
    }),
  );
}

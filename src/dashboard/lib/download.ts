/** Saves an authenticated download (the token is a header, so a plain link cannot fetch it). */
import type { ApiClient, Query } from "./api.js";

export async function download(api: ApiClient, path: string, fallbackName: string, query?: Query): Promise<void> {
  const res = await api.send("GET", path, null, query);
  const disposition = res.headers.get("content-disposition") ?? "";
  const named = /filename\*?=(?:UTF-8'')?"?([^";]+)"?/i.exec(disposition)?.[1];
  saveBlob(await res.blob(), named ? decodeURIComponent(named) : fallbackName);
}

export function saveBlob(blob: Blob, name: string): void {
  const url = URL.createObjectURL(blob);
  const link = document.createElement("a");
  link.href = url;
  link.download = name;
  document.body.append(link);
  link.click();
  link.remove();
  window.setTimeout(() => URL.revokeObjectURL(url), 30_000);
}

/** A multipart body with the files under the field `file` (template uploads and imports). */
export function fileForm(...files: File[]): FormData {
  const form = new FormData();
  for (const f of files) form.append("file", f, f.name);
  return form;
}

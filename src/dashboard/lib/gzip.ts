/** Gzip in the browser, through its CompressionStream (kept apart from tar.ts, which runs anywhere). */

/** True where the page can gzip by itself (CompressionStream: Chromium 80, Firefox 113, Safari 16.4). */
export const canGzip = (): boolean => typeof CompressionStream === "function";

/** `bytes` gzipped. */
export async function gzip(bytes: Uint8Array): Promise<Blob> {
  const stream = new Blob([bytes as BlobPart]).stream().pipeThrough(new CompressionStream("gzip"));
  return new Blob([await new Response(stream).arrayBuffer()], { type: "application/gzip" });
}

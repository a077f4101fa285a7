// The dashboard benchmark's measurements inside the page. Every time is taken in the page, on its
// own clock (`performance.now()`, from the navigation's start), so no figure mixes the page's clock
// with this process's, nor includes the round trips of the automation protocol:
//
// - `loadTimed`: a fresh tab opens a URL; an init script watches the document and notes the frame in
//   which what the test waits for is first on screen (a MutationObserver finds it, the next
//   requestAnimationFrame is the frame that shows it), with the page's resource timings;
// - `stateChange`: the page itself sends the REST write (as an operator's click would) and notes,
//   on the same clock, the frame in which the row shows the new state;
// - frame times (requestAnimationFrame intervals) and long tasks (the Long Tasks API) over a phase.
//
// Playwright runs these functions through the protocol, which the page's Content-Security-Policy
// does not apply to; the page itself still runs under it.
import type { BrowserContext, CDPSession, Page } from "playwright-core";

/** What a page load waits for: an element matching `selector`, with `text` in it when given. */
export interface Target {
  selector: string;
  text?: string;
}

export interface ResourceTiming {
  name: string;
  startMs: number;
  responseStartMs: number;
  endMs: number;
  transferBytes: number;
}

export interface LoadTiming {
  /** From the navigation's start to the frame that showed the target. */
  shownMs: number;
  /** The navigation's own timings. */
  responseEndMs: number;
  domContentLoadedMs: number;
  /** The document's bytes on the wire (headers and body; 0 when it came from the cache). */
  documentTransferBytes: number;
  resources: ResourceTiming[];
}

// The page's own types, as far as these functions use them (this project's TypeScript has no DOM library).
interface PageEntry {
  name: string;
  startTime: number;
  duration: number;
}
interface PageResourceTiming extends PageEntry {
  responseStart: number;
  responseEnd: number;
  transferSize: number;
}
interface PageNavigationTiming extends PageResourceTiming {
  domContentLoadedEventEnd: number;
}
interface PagePerformance {
  now(): number;
  getEntriesByType(type: string): PageEntry[];
}
interface PageGlobals {
  document: { querySelector(s: string): { textContent: string | null } | null; body: unknown };
  MutationObserver: new (cb: () => void) => { observe(n: unknown, o: unknown): void; disconnect(): void };
  requestAnimationFrame(cb: () => void): void;
  performance: PagePerformance;
}

/** In the page, before its scripts: note when the target is first on screen (in `__benchShownAt`). */
function watchForTarget({ selector, text }: Target): void {
  const w = globalThis as unknown as {
    document: { querySelector(s: string): { textContent: string | null } | null };
    MutationObserver: new (cb: () => void) => { observe(n: unknown, o: unknown): void; disconnect(): void };
    requestAnimationFrame(cb: () => void): void;
    performance: { now(): number };
    __benchShownAt?: number;
  };
  let found = false;
  const observer = new w.MutationObserver(() => {
    if (found) return;
    const element = w.document.querySelector(selector);
    if (!element || (text !== undefined && !(element.textContent ?? "").includes(text))) return;
    found = true;
    observer.disconnect();
    w.requestAnimationFrame(() => (w.__benchShownAt = w.performance.now()));
  });
  observer.observe(w.document, { subtree: true, childList: true, characterData: true });
}

/** Waits (polling from here, bounded) until the page noted the target; returns its load timing. */
async function readLoadTiming(page: Page, timeoutMs: number): Promise<LoadTiming> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const timing = await page.evaluate(() => {
      const w = globalThis as unknown as { __benchShownAt?: number; performance: PagePerformance };
      if (w.__benchShownAt === undefined) return null;
      const nav = w.performance.getEntriesByType("navigation")[0] as PageNavigationTiming | undefined;
      const resources = (w.performance.getEntriesByType("resource") as PageResourceTiming[]).map((r) => ({
        name: r.name,
        startMs: r.startTime,
        responseStartMs: r.responseStart,
        endMs: r.responseEnd,
        transferBytes: r.transferSize,
      }));
      return {
        shownMs: w.__benchShownAt,
        responseEndMs: nav?.responseEnd ?? 0,
        domContentLoadedMs: nav?.domContentLoadedEventEnd ?? 0,
        documentTransferBytes: nav?.transferSize ?? 0,
        resources,
      };
    });
    if (timing) return timing;
    if (Date.now() > deadline) throw new Error(`the page did not show its target within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * Opens `url` in a new tab of `context` and times it to `target`. With `profile`, the page's CPU is
 * sampled from the navigation to the target (the tab first loads `originUrl`, so the measured
 * navigation stays in the same renderer process as the profiler).
 */
export async function loadTimed(
  context: BrowserContext,
  url: string,
  target: Target,
  options: { timeoutMs: number; originUrl: string; profile?: boolean },
): Promise<{ timing: LoadTiming; profile: unknown; page: Page }> {
  const page = await context.newPage();
  let cdp: CDPSession | null = null;
  if (options.profile) {
    await page.goto(options.originUrl);
    cdp = await context.newCDPSession(page);
    await cdp.send("Profiler.enable");
    await cdp.send("Profiler.setSamplingInterval", { interval: 200 });
    await cdp.send("Profiler.start");
  }
  await page.addInitScript(watchForTarget, target);
  await page.goto(url);
  const timing = await readLoadTiming(page, options.timeoutMs);
  const profile = cdp ? (await cdp.send("Profiler.stop")).profile : null;
  await cdp?.detach();
  return { timing, profile, page };
}

/** Starts counting frame intervals and long tasks in the page. */
export async function startFrameWatch(page: Page): Promise<void> {
  await page.evaluate(() => {
    const w = globalThis as unknown as Record<string, unknown> & {
      performance: PagePerformance;
      requestAnimationFrame(cb: (t: number) => void): void;
      PerformanceObserver: new (cb: (list: { getEntries(): { duration: number }[] }) => void) => { observe(o: { type: string }): void };
    };
    const frames: number[] = [];
    const longTasks: number[] = [];
    w.__benchFrames = frames;
    w.__benchLongTasks = longTasks;
    let last = w.performance.now();
    const loop = (t: number) => {
      frames.push(t - last);
      last = t;
      if (!w.__benchStopFrames) w.requestAnimationFrame(loop);
    };
    w.requestAnimationFrame(loop);
    try {
      new w.PerformanceObserver((list) => {
        for (const entry of list.getEntries()) longTasks.push(entry.duration);
      }).observe({ type: "longtask" });
    } catch {
      // No Long Tasks API: frames only.
    }
  });
}

export async function stopFrameWatch(page: Page): Promise<{ frames: number[]; longTasks: number[] }> {
  return page.evaluate(() => {
    const w = globalThis as unknown as Record<string, unknown>;
    w.__benchStopFrames = true;
    return { frames: w.__benchFrames as number[], longTasks: w.__benchLongTasks as number[] };
  });
}

export interface StateChangeInput {
  /** `tr[data-key=…]` of the row that changes. */
  rowKey: string;
  /** The status the row shows before the write, and after it. */
  from: string;
  to: string;
  method: string;
  url: string;
  token: string;
  body: unknown;
  timeoutMs: number;
}

export type StateChangeResult = { ms: number } | { failed: string };

/**
 * In the page: waits until the row shows `from` (a previous write's change may still be on its way;
 * a sample never starts from the state it waits for), then sends the write and resolves with the
 * time from just before the request to the frame that shows `to`.
 */
export function stateChange(page: Page, input: StateChangeInput): Promise<StateChangeResult> {
  return page.evaluate(
    (i) =>
      new Promise<StateChangeResult>((resolve) => {
        const { document: d, MutationObserver, requestAnimationFrame, performance } = globalThis as unknown as PageGlobals;
        const status = () => d.querySelector(`tr[data-key="${i.rowKey}"] td[data-label="Status"]`)?.textContent ?? null;
        const waitFor = (want: string, then: () => void, fail: string) => {
          if (status() === want) return then();
          const observer = new MutationObserver(() => {
            if (status() !== want) return;
            observer.disconnect();
            clearTimeout(timer);
            then();
          });
          observer.observe(d.body, { subtree: true, childList: true, characterData: true });
          const timer = setTimeout(() => {
            observer.disconnect();
            resolve({ failed: `${fail} (the row shows ${status()})` });
          }, i.timeoutMs);
        };
        waitFor(
          i.from,
          () => {
            const startedAt = performance.now();
            waitFor(i.to, () => requestAnimationFrame(() => resolve({ ms: performance.now() - startedAt })), `not ${i.to} within ${i.timeoutMs} ms`);
            void fetch(i.url, {
              method: i.method,
              headers: { authorization: `Bearer ${i.token}`, "content-type": "application/json" },
              body: JSON.stringify(i.body),
            }).then(
              (res) => (res.ok ? undefined : resolve({ failed: `the write answered ${res.status}` })),
              (err: unknown) => resolve({ failed: `the write failed: ${String(err)}` }),
            );
          },
          `not ${i.from} before the write`,
        );
      }),
    input,
  );
}

/** Notifications at the bottom of the screen, announced to screen readers. */
import type { ToastKind } from "../lib/app-context.js";

export interface Toast {
  id: number;
  message: string;
  kind: ToastKind;
}

export function Toasts({ toasts }: { toasts: Toast[] }) {
  return (
    <div class="toasts" role="status" aria-live="polite">
      {toasts.map((t) => (
        <div key={t.id} class={`toast toast-${t.kind}`}>
          {t.message}
        </div>
      ))}
    </div>
  );
}

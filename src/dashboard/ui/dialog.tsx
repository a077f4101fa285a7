/**
 * Modal dialogs on the native `<dialog>` (focus is trapped and Escape closes it, by the browser);
 * `useConfirm()`: `await confirm({...})` resolves true when the user confirms; with `typed`, the
 * confirm button stays disabled until that exact text is typed (deleting a group, restoring a backup);
 * and `usePrompt()`: `await ask({...})` resolves the text entered (trimmed), or null when cancelled.
 * Neither uses the browser's own `prompt()`/`confirm()`, which block the page and cannot be styled.
 */
import type { ComponentChildren } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";

export function Dialog({
  open,
  title,
  onClose,
  children,
  wide,
}: {
  open: boolean;
  title: string;
  onClose(): void;
  children: ComponentChildren;
  wide?: boolean;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const dialog = ref.current;
    if (!dialog) return;
    if (open && !dialog.open) dialog.showModal();
    if (!open && dialog.open) dialog.close();
  }, [open]);
  return (
    <dialog ref={ref} class={wide ? "dialog wide" : "dialog"} onClose={onClose} aria-label={title}>
      {open ? (
        <>
          <header class="dialog-head">
            <h2>{title}</h2>
            <button type="button" class="btn btn-plain icon" aria-label="Close" onClick={onClose}>
              ×
            </button>
          </header>
          <div class="dialog-body">{children}</div>
        </>
      ) : null}
    </dialog>
  );
}

export interface ConfirmRequest {
  title: string;
  message: ComponentChildren;
  confirmLabel?: string;
  danger?: boolean;
  /** Text the user must type to enable the confirm button. */
  typed?: string;
}

export function useConfirm(): [(request: ConfirmRequest) => Promise<boolean>, ComponentChildren] {
  const [request, setRequest] = useState<(ConfirmRequest & { resolve(ok: boolean): void }) | null>(null);
  const [text, setText] = useState("");
  const confirm = (r: ConfirmRequest) =>
    new Promise<boolean>((resolve) => {
      setText("");
      setRequest({ ...r, resolve });
    });
  const finish = (ok: boolean) => {
    request?.resolve(ok);
    setRequest(null);
  };
  const ready = !request?.typed || text === request.typed;
  const dialog = (
    <Dialog open={request !== null} title={request?.title ?? ""} onClose={() => finish(false)}>
      {request ? (
        <form
          onSubmit={(e) => {
            e.preventDefault();
            if (ready) finish(true);
          }}
        >
          <div class="confirm-message">{request.message}</div>
          {request.typed ? (
            <label class="field">
              <span class="field-label">
                Type <code>{request.typed}</code> to confirm
              </span>
              <input name="confirmation" value={text} onInput={(e) => setText(e.currentTarget.value)} autocomplete="off" autoFocus />
            </label>
          ) : null}
          <div class="actions end">
            <button type="button" class="btn btn-plain" onClick={() => finish(false)}>
              Cancel
            </button>
            <button type="submit" class={`btn ${request.danger ? "btn-danger" : "btn-primary"}`} disabled={!ready} autoFocus={!request.typed}>
              {request.confirmLabel ?? "Confirm"}
            </button>
          </div>
        </form>
      ) : null}
    </Dialog>
  );
  return [confirm, dialog];
}

export interface PromptRequest {
  title: string;
  label: string;
  initial?: string;
  confirmLabel?: string;
  hint?: ComponentChildren;
  /** An empty answer may be submitted (resolves ""). */
  optional?: boolean;
  /** An error to show for this answer, or null when it may be submitted. */
  check?(answer: string): string | null;
}

export function usePrompt(): [(request: PromptRequest) => Promise<string | null>, ComponentChildren] {
  const [request, setRequest] = useState<(PromptRequest & { resolve(answer: string | null): void }) | null>(null);
  const [text, setText] = useState("");
  const ask = (r: PromptRequest) =>
    new Promise<string | null>((resolve) => {
      setText(r.initial ?? "");
      setRequest({ ...r, resolve });
    });
  const finish = (answer: string | null) => {
    request?.resolve(answer);
    setRequest(null);
  };
  const answer = text.trim();
  const problem = request && answer ? (request.check?.(answer) ?? null) : null;
  const dialog = (
    <Dialog open={request !== null} title={request?.title ?? ""} onClose={() => finish(null)}>
      {request ? (
        <form
          aria-label={request.title}
          onSubmit={(e) => {
            e.preventDefault();
            if ((answer || request.optional) && !problem) finish(answer);
          }}
        >
          <label class="field">
            <span class="field-label">{request.label}</span>
            <input name="answer" value={text} onInput={(e) => setText(e.currentTarget.value)} autocomplete="off" autoFocus />
            {problem ? <span class="field-hint error-text">{problem}</span> : request.hint ? <span class="field-hint">{request.hint}</span> : null}
          </label>
          <div class="actions end">
            <button type="button" class="btn btn-plain" onClick={() => finish(null)}>
              Cancel
            </button>
            <button type="submit" class="btn btn-primary" disabled={(!answer && !request.optional) || problem !== null}>
              {request.confirmLabel ?? "OK"}
            </button>
          </div>
        </form>
      ) : null}
    </Dialog>
  );
  return [ask, dialog];
}

/** Shows a secret once (a join token), with a copy button and the warning that it is not shown again. */
export function SecretOnce({ label, value, onClose }: { label: string; value: string | null; onClose(): void }) {
  const [copied, setCopied] = useState(false);
  return (
    <Dialog open={value !== null} title={label} onClose={onClose}>
      <p>This is shown only now; the controller keeps no copy you can read again.</p>
      <textarea class="secret" readOnly rows={4} value={value ?? ""} onFocus={(e) => e.currentTarget.select()} />
      <div class="actions end">
        <button
          type="button"
          class="btn btn-plain"
          onClick={() => {
            void navigator.clipboard?.writeText(value ?? "").then(() => setCopied(true));
          }}
        >
          {copied ? "Copied" : "Copy"}
        </button>
        <button type="button" class="btn btn-primary" onClick={onClose}>
          Done
        </button>
      </div>
    </Dialog>
  );
}

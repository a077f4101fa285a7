/** Small building blocks every page uses: buttons that follow permissions, fields, badges, boxes. */
import type { ButtonHTMLAttributes, ComponentChildren } from "preact";
import { useApp } from "../lib/app-context.js";
import { errorMessage } from "../lib/api.js";

type ButtonProps = Omit<ButtonHTMLAttributes<HTMLButtonElement>, "type"> & {
  kind?: "primary" | "danger" | "plain";
  /** Shown only to users holding this permission (the API refuses the others anyway). */
  perm?: string;
  busy?: boolean;
  disabled?: boolean;
  type?: "button" | "submit";
};

export function Button({ kind = "plain", perm, busy, children, className, disabled, type = "button", ...rest }: ButtonProps) {
  const { can } = useApp();
  if (perm && !can(perm)) return null;
  return (
    <button
      {...rest}
      type={type}
      class={`btn btn-${kind}${className ? ` ${String(className)}` : ""}`}
      disabled={disabled || busy}
      aria-busy={busy ? "true" : undefined}
    >
      {children}
    </button>
  );
}

/** Renders its children only for users holding `perm`. */
export function Can({ perm, children }: { perm: string; children: ComponentChildren }) {
  const { can } = useApp();
  return can(perm) ? <>{children}</> : null;
}

export function Field({ label, hint, children }: { label: string; hint?: ComponentChildren; children: ComponentChildren }) {
  return (
    <label class="field">
      <span class="field-label">{label}</span>
      {children}
      {hint ? <span class="field-hint">{hint}</span> : null}
    </label>
  );
}

const STATE_TONES: Record<string, string> = {
  RUNNING: "ok",
  ONLINE: "ok",
  UP: "ok",
  READY: "ok",
  COMPLETED: "ok",
  ACTIVE: "ok",
  STARTING: "warn",
  PREPARING: "warn",
  SCHEDULED: "warn",
  DRAINING: "warn",
  STOPPING: "warn",
  DRAIN: "warn",
  PAUSED: "warn",
  IN_PROGRESS: "info",
  CRASHED: "bad",
  DOWN: "bad",
  UNREACHABLE: "bad",
  FAILED: "bad",
  NOT_READY: "bad",
  ROLLED_BACK: "warn",
  OFFLINE: "muted",
  STOPPED: "muted",
  REVOKED: "muted",
  EXPIRED: "muted",
  USED: "muted",
};

export function Badge({ tone, children, title }: { tone?: string; children: ComponentChildren; title?: string }) {
  return (
    <span class={`badge badge-${tone ?? "muted"}`} title={title}>
      {children}
    </span>
  );
}

export function StateBadge({ state }: { state: string }) {
  return <Badge tone={STATE_TONES[state] ?? "muted"}>{state}</Badge>;
}

export function Loading({ what = "Loading" }: { what?: string }) {
  return (
    <p class="muted" role="status">
      {what}…
    </p>
  );
}

export function ErrorBox({ error }: { error: unknown }) {
  if (!error) return null;
  return (
    <p class="error-box" role="alert">
      {errorMessage(error)}
    </p>
  );
}

/** Loading, error or content for one query's state. */
export function QueryView<T>({
  state,
  children,
}: {
  state: { data: T | undefined; error: unknown; loading: boolean };
  children: (data: T) => ComponentChildren;
}) {
  if (state.data === undefined) return state.error ? <ErrorBox error={state.error} /> : <Loading />;
  return (
    <>
      {state.error ? <ErrorBox error={state.error} /> : null}
      {children(state.data)}
    </>
  );
}

export function Card({
  title,
  actions,
  children,
  className,
}: {
  title?: ComponentChildren;
  actions?: ComponentChildren;
  children: ComponentChildren;
  className?: string;
}) {
  return (
    <section class={`card${className ? ` ${className}` : ""}`}>
      {title || actions ? (
        <header class="card-head">
          {title ? <h2>{title}</h2> : <span />}
          {actions ? <div class="actions">{actions}</div> : null}
        </header>
      ) : null}
      {children}
    </section>
  );
}

export function PageHeader({ title, actions, children }: { title: ComponentChildren; actions?: ComponentChildren; children?: ComponentChildren }) {
  return (
    <header class="page-head">
      <div>
        <h1>{title}</h1>
        {children}
      </div>
      {actions ? <div class="actions">{actions}</div> : null}
    </header>
  );
}

/** A definition list of label/value pairs. */
export function Facts({ items }: { items: [string, ComponentChildren][] }) {
  return (
    <dl class="facts">
      {items.map(([label, value]) => (
        <div key={label}>
          <dt>{label}</dt>
          <dd>{value ?? "–"}</dd>
        </div>
      ))}
    </dl>
  );
}

export function Tabs({ tabs, current, onSelect }: { tabs: [string, string][]; current: string; onSelect(id: string): void }) {
  return (
    <div class="tabs" role="tablist">
      {tabs.map(([id, label]) => (
        <button key={id} type="button" role="tab" aria-selected={id === current} class={id === current ? "tab active" : "tab"} onClick={() => onSelect(id)}>
          {label}
        </button>
      ))}
    </div>
  );
}

/** A bar showing used of total. */
export function Meter({ used, total, label }: { used: number; total: number; label: string }) {
  const ratio = total > 0 ? Math.min(1, used / total) : 0;
  return (
    <span class="meter" role="meter" aria-label={label} aria-valuemin={0} aria-valuemax={total} aria-valuenow={used} title={label}>
      <span class={`meter-fill${ratio > 0.9 ? " bad" : ratio > 0.75 ? " warn" : ""}`} style={{ width: `${Math.round(ratio * 100)}%` }} />
    </span>
  );
}

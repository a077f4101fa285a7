/**
 * The group forms: create (every field POST accepts) and edit (every field PATCH accepts). The
 * start fields (platform version, jar file, templates, and memory for running instances) change
 * through a deployment, which the edit form links to.
 */
import { useState } from "preact/hooks";
import { useApp } from "../lib/app-context.js";
import { errorMessage } from "../lib/api.js";
import { href } from "../lib/router.js";
import type { Group } from "../lib/types.js";
import { Field } from "../ui/controls.js";

const SCALING = ["DYNAMIC", "STATIC", "MANUAL"];
const ROUTING = ["LOWEST_PLAYERS", "HIGHEST_PLAYERS", "RANDOM", "ROUND_ROBIN"];

type Values = Record<string, string | boolean>;
const num = (v: string | boolean | undefined) => (v === "" || v === undefined || typeof v === "boolean" ? undefined : Number(v));

function useValues(initial: Values) {
  const [values, setValues] = useState(initial);
  const text = (name: string) => ({
    name,
    value: String(values[name] ?? ""),
    onInput: (e: Event) => setValues({ ...values, [name]: (e.currentTarget as HTMLInputElement).value }),
  });
  const check = (name: string) => ({
    name,
    type: "checkbox" as const,
    checked: values[name] === true,
    onChange: (e: Event) => setValues({ ...values, [name]: (e.currentTarget as HTMLInputElement).checked }),
  });
  return { values, text, check };
}

function LoadScalingFields({ text }: { text: ReturnType<typeof useValues>["text"] }) {
  return (
    <fieldset class="form-grid">
      <legend>Load scaling (optional: scale up when servers are loaded)</legend>
      <Field label="Minimum TPS">
        <input type="number" step="0.1" min="0" {...text("minTps")} />
      </Field>
      <Field label="Maximum average MSPT">
        <input type="number" step="0.1" min="0" {...text("maxMsptAvg")} />
      </Field>
      <Field label="Sustain (s)">
        <input type="number" min="1" {...text("sustainSeconds")} />
      </Field>
      <Field label="Cooldown (s)">
        <input type="number" min="1" {...text("cooldownSeconds")} />
      </Field>
    </fieldset>
  );
}

function loadScalingOf(values: Values) {
  const fields = {
    minTps: num(values.minTps),
    maxMsptAvg: num(values.maxMsptAvg),
    sustainSeconds: num(values.sustainSeconds),
    cooldownSeconds: num(values.cooldownSeconds),
  };
  if (fields.minTps === undefined && fields.maxMsptAvg === undefined) return null;
  return Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined));
}

export function CreateGroupForm({ onDone }: { onDone(name: string | null): void }) {
  const { api, toast } = useApp();
  const { values, text, check } = useValues({
    name: "",
    platform: "simulated",
    platformVersion: "",
    jarFile: "server.jar",
    templates: "",
    scalingMode: "DYNAMIC",
    minInstances: "1",
    maxInstances: "10",
    maxPlayers: "",
    memoryMb: "1024",
    routing: "LOWEST_PLAYERS",
    portStart: "30000",
    portEnd: "30100",
    priority: "",
    maintenance: false,
  });
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    const body = {
      name: values.name,
      platform: values.platform,
      platformVersion: values.platformVersion || undefined,
      jarFile: values.jarFile || undefined,
      templates: String(values.templates)
        .split(",")
        .map((t) => t.trim())
        .filter(Boolean),
      scalingMode: values.scalingMode,
      minInstances: num(values.minInstances),
      maxInstances: num(values.maxInstances),
      maxPlayers: num(values.maxPlayers),
      memoryMb: num(values.memoryMb),
      routing: values.routing,
      portRange: { start: num(values.portStart), end: num(values.portEnd) },
      priority: num(values.priority),
      maintenance: values.maintenance === true,
      loadScaling: loadScalingOf(values) ?? undefined,
    };
    try {
      await api.post("groups", body);
      toast(`Group ${String(values.name)} created`, "success");
      onDone(String(values.name));
    } catch (err) {
      setError(errorMessage(err));
      setBusy(false);
    }
  };
  return (
    <form onSubmit={submit} aria-label="Create group">
      <div class="form-grid">
        <Field label="Name">
          <input required pattern="[A-Za-z0-9][A-Za-z0-9_\-]*" {...text("name")} autoFocus />
        </Field>
        <Field label="Platform" hint="e.g. simulated, paper, velocity">
          <input required list="platforms" {...text("platform")} />
        </Field>
        <Field label="Platform version">
          <input {...text("platformVersion")} />
        </Field>
        <Field label="Jar file">
          <input {...text("jarFile")} />
        </Field>
        <Field label="Templates" hint="comma-separated, applied in order">
          <input {...text("templates")} />
        </Field>
        <Field label="Scaling mode">
          <select {...text("scalingMode")}>
            {SCALING.map((s) => (
              <option key={s}>{s}</option>
            ))}
          </select>
        </Field>
        <Field label="Minimum instances">
          <input type="number" min="0" {...text("minInstances")} />
        </Field>
        <Field label="Maximum instances">
          <input type="number" min="0" {...text("maxInstances")} />
        </Field>
        <Field label="Max players per instance">
          <input type="number" min="0" {...text("maxPlayers")} />
        </Field>
        <Field label="Memory (MB)">
          <input type="number" min="1" {...text("memoryMb")} />
        </Field>
        <Field label="Routing">
          <select {...text("routing")}>
            {ROUTING.map((s) => (
              <option key={s}>{s}</option>
            ))}
          </select>
        </Field>
        <Field label="Port range start">
          <input type="number" min="1" max="65535" {...text("portStart")} />
        </Field>
        <Field label="Port range end">
          <input type="number" min="1" max="65535" {...text("portEnd")} />
        </Field>
        <Field label="Priority">
          <input type="number" {...text("priority")} />
        </Field>
      </div>
      <label class="check">
        <input {...check("maintenance")} /> Start in maintenance (no instances are scheduled)
      </label>
      <LoadScalingFields text={text} />
      <datalist id="platforms">
        {["simulated", "simulated-proxy", "paper", "velocity"].map((p) => (
          <option key={p} value={p} />
        ))}
      </datalist>
      {error ? (
        <p class="error-box" role="alert">
          {error}
        </p>
      ) : null}
      <div class="actions end">
        <button type="button" class="btn btn-plain" onClick={() => onDone(null)}>
          Cancel
        </button>
        <button type="submit" class="btn btn-primary" disabled={busy}>
          Create group
        </button>
      </div>
    </form>
  );
}

export function EditGroupForm({ group, onDone }: { group: Group; onDone(changed: boolean): void }) {
  const { api, toast } = useApp();
  const ls = group.loadScaling ?? {};
  const { values, text, check } = useValues({
    minInstances: String(group.minInstances),
    maxInstances: String(group.maxInstances),
    memoryMb: String(group.memoryMb),
    routing: group.routing,
    scalingMode: group.scalingMode,
    maintenance: group.maintenance,
    minTps: ls.minTps === undefined ? "" : String(ls.minTps),
    maxMsptAvg: ls.maxMsptAvg === undefined ? "" : String(ls.maxMsptAvg),
    sustainSeconds: ls.sustainSeconds === undefined ? "" : String(ls.sustainSeconds),
    cooldownSeconds: ls.cooldownSeconds === undefined ? "" : String(ls.cooldownSeconds),
  });
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await api.patch(`groups/${encodeURIComponent(group.name)}`, {
        minInstances: num(values.minInstances),
        maxInstances: num(values.maxInstances),
        memoryMb: num(values.memoryMb),
        routing: values.routing,
        scalingMode: values.scalingMode,
        maintenance: values.maintenance === true,
        loadScaling: loadScalingOf(values),
      });
      toast(`Group ${group.name} updated`, "success");
      onDone(true);
    } catch (err) {
      setError(errorMessage(err));
      setBusy(false);
    }
  };
  return (
    <form onSubmit={submit} aria-label="Edit group">
      <p class="notice">
        Platform version, jar file and templates of running instances change through a deployment:{" "}
        <a href={href(["deployments", group.name], { new: 1 })}>start a deployment of {group.name}</a>.
      </p>
      <div class="form-grid">
        <Field label="Minimum instances">
          <input type="number" min="0" {...text("minInstances")} />
        </Field>
        <Field label="Maximum instances">
          <input type="number" min="0" {...text("maxInstances")} />
        </Field>
        <Field label="Memory (MB)" hint="new instances; running ones keep theirs">
          <input type="number" min="1" {...text("memoryMb")} />
        </Field>
        <Field label="Routing">
          <select {...text("routing")}>
            {ROUTING.map((s) => (
              <option key={s}>{s}</option>
            ))}
          </select>
        </Field>
        <Field label="Scaling mode">
          <select {...text("scalingMode")}>
            {SCALING.map((s) => (
              <option key={s}>{s}</option>
            ))}
          </select>
        </Field>
      </div>
      <label class="check">
        <input {...check("maintenance")} /> Maintenance (the scheduler skips the group; no new players)
      </label>
      <LoadScalingFields text={text} />
      {error ? (
        <p class="error-box" role="alert">
          {error}
        </p>
      ) : null}
      <div class="actions end">
        <button type="button" class="btn btn-plain" onClick={() => onDone(false)}>
          Cancel
        </button>
        <button type="submit" class="btn btn-primary" disabled={busy}>
          Save
        </button>
      </div>
    </form>
  );
}

/**
 * Roles (permission roles.manage, as every `/api/v1/roles` route): the built-in roles with their
 * permissions (read only: the controller defines them), custom roles to create, change (description
 * and permissions, chosen from `GET /api/v1/permissions`) and delete (the controller refuses a role
 * someone holds). Who holds a role is shown when the user may also list users (users.manage).
 */
import { useState } from "preact/hooks";
import { useApp, useQuery } from "../lib/app-context.js";
import { errorMessage } from "../lib/api.js";
import { permissionSections, ROLE_NAME_PATTERN, type Permission, type Role, type User } from "../lib/users.js";
import { Badge, Button, Field, PageHeader, QueryView } from "../ui/controls.js";
import { Dialog, useConfirm } from "../ui/dialog.js";
import { DataTable } from "../ui/table.js";

type Editing = { kind: "create" } | { kind: "edit"; role: Role } | { kind: "view"; role: Role };

export function RolesPage() {
  const { api, can, toast } = useApp();
  const roles = useQuery<Role[]>("roles", { load: () => api.get("roles"), pollMs: 30_000 });
  const catalog = useQuery<Permission[]>("permissions", { load: () => api.get("permissions") });
  const users = useQuery<User[]>(can("users.manage") ? "users" : null, { load: () => api.get("users"), pollMs: 30_000 });
  const [editing, setEditing] = useState<Editing | null>(null);
  const [confirm, confirmDialog] = useConfirm();
  const holders = (role: string) => (users.data ?? []).filter((u) => u.roles.includes(role)).length;
  const remove = async (role: Role) => {
    const ok = await confirm({ title: `Delete role ${role.name}`, message: "The role is deleted.", danger: true, confirmLabel: "Delete" });
    if (!ok) return;
    try {
      await api.delete(`roles/${encodeURIComponent(role.name)}`);
      toast(`Role ${role.name} deleted`, "success");
      roles.refresh();
    } catch (err) {
      toast(`Delete: ${errorMessage(err)}`, "error");
    }
  };
  const done = (message: string) => {
    setEditing(null);
    toast(message, "success");
    roles.refresh();
  };
  return (
    <>
      <PageHeader
        title="Roles"
        actions={
          <Button kind="primary" perm="roles.manage" onClick={() => setEditing({ kind: "create" })}>
            Create role
          </Button>
        }
      >
        <p class="muted">A user holds the permissions of all their roles. ADMIN, OPERATOR and VIEWER are built in and cannot be changed.</p>
      </PageHeader>
      <QueryView state={roles}>
        {(list) => (
          <DataTable
            label="Roles"
            rows={list}
            rowKey={(r) => r.name}
            columns={[
              {
                title: "Name",
                render: (r) => (
                  <>
                    {r.name} {r.builtIn ? <Badge>built in</Badge> : null}
                  </>
                ),
              },
              { title: "Description", render: (r) => r.description || <span class="muted">none</span> },
              { title: "Permissions", className: "num", render: (r) => r.permissions.length },
              ...(users.data ? [{ title: "Users", className: "num", render: (r: Role) => holders(r.name) }] : []),
              {
                title: "Actions",
                render: (r) => (
                  <div class="actions">
                    <button type="button" class="btn btn-plain" onClick={() => setEditing({ kind: "view", role: r })}>
                      Permissions
                    </button>
                    {r.builtIn ? null : (
                      <>
                        <Button perm="roles.manage" onClick={() => setEditing({ kind: "edit", role: r })}>
                          Edit
                        </Button>
                        <Button perm="roles.manage" kind="danger" onClick={() => void remove(r)}>
                          Delete
                        </Button>
                      </>
                    )}
                  </div>
                ),
              },
            ]}
          />
        )}
      </QueryView>
      <Dialog open={editing !== null} title={dialogTitle(editing)} onClose={() => setEditing(null)} wide>
        {editing?.kind === "view" ? <PermissionList role={editing.role} catalog={catalog.data ?? []} /> : null}
        {editing?.kind === "create" || editing?.kind === "edit" ? (
          <RoleForm
            role={editing.kind === "edit" ? editing.role : null}
            catalog={catalog.data ?? []}
            onDone={(name) => done(editing.kind === "edit" ? `Role ${name} changed` : `Role ${name} created`)}
          />
        ) : null}
      </Dialog>
      {confirmDialog}
    </>
  );
}

function dialogTitle(editing: Editing | null): string {
  if (!editing) return "";
  if (editing.kind === "create") return "Create role";
  return editing.kind === "edit" ? `Edit role ${editing.role.name}` : `Permissions of ${editing.role.name}`;
}

function PermissionList({ role, catalog }: { role: Role; catalog: Permission[] }) {
  const describe = new Map(catalog.map((p) => [p.name, p.description]));
  if (role.permissions.length === 0) return <p class="muted">No permission.</p>;
  return (
    <ul aria-label={`Permissions of ${role.name}`}>
      {role.permissions.map((p) => (
        <li key={p}>
          <code>{p}</code> <span class="muted">{describe.get(p) ?? ""}</span>
        </li>
      ))}
    </ul>
  );
}

function RoleForm({ role, catalog, onDone }: { role: Role | null; catalog: Permission[]; onDone(name: string): void }) {
  const { api } = useApp();
  const [name, setName] = useState(role?.name ?? "");
  const [description, setDescription] = useState(role?.description ?? "");
  const [chosen, setChosen] = useState<string[]>(role?.permissions ?? []);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const toggle = (permission: string, on: boolean) => setChosen(on ? [...chosen, permission] : chosen.filter((p) => p !== permission));
  return (
    <form
      aria-label={role ? "Edit role" : "Create role"}
      onSubmit={async (e) => {
        e.preventDefault();
        setBusy(true);
        setError(null);
        try {
          if (role) await api.patch(`roles/${encodeURIComponent(role.name)}`, { description, permissions: chosen });
          else await api.post("roles", { name, description, permissions: chosen });
          onDone(name);
        } catch (err) {
          setError(errorMessage(err));
        } finally {
          setBusy(false);
        }
      }}
    >
      {role ? null : (
        <Field label="Name" hint="a letter, then letters, digits, _ . and -">
          <input name="name" required pattern={ROLE_NAME_PATTERN} autocomplete="off" value={name} onInput={(e) => setName(e.currentTarget.value)} />
        </Field>
      )}
      <Field label="Description">
        <input name="description" maxLength={1024} value={description} onInput={(e) => setDescription(e.currentTarget.value)} />
      </Field>
      <div class="permission-grid">
        {permissionSections(catalog).map(([section, permissions]) => (
          <fieldset key={section}>
            <legend>{section}</legend>
            {permissions.map((p) => (
              <label key={p.name} class="check" title={p.description}>
                <input
                  type="checkbox"
                  name="permission"
                  value={p.name}
                  checked={chosen.includes(p.name)}
                  onChange={(e) => toggle(p.name, e.currentTarget.checked)}
                />
                <code>{p.name}</code>
              </label>
            ))}
          </fieldset>
        ))}
      </div>
      {error ? <p class="error-box">{error}</p> : null}
      <div class="actions end">
        <span class="muted">{chosen.length} chosen</span>
        <Button type="submit" kind="primary" busy={busy}>
          {role ? "Save role" : "Create role"}
        </Button>
      </div>
    </form>
  );
}

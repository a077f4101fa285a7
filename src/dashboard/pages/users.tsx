/**
 * Users (permission users.manage, as every `/api/v1/users` route): the list with roles, create with
 * a password and roles, change roles, set a password (which signs that user out everywhere: the
 * controller revokes their tokens) and delete, not oneself (the API refuses that and the last ADMIN).
 * The roles offered come from `GET /api/v1/roles` when the user may read them (roles.manage), else
 * the built-in ones and those already held.
 */
import { useState } from "preact/hooks";
import { useApp, useQuery } from "../lib/app-context.js";
import { errorMessage } from "../lib/api.js";
import { time } from "../lib/format.js";
import { BUILT_IN_ROLE_NAMES, PASSWORD_LENGTH_MIN, passwordProblem, type Role, type User, USERNAME_PATTERN } from "../lib/users.js";
import { Badge, Button, Field, PageHeader, QueryView } from "../ui/controls.js";
import { Dialog, useConfirm } from "../ui/dialog.js";
import { DataTable } from "../ui/table.js";

type Editing = { kind: "create" } | { kind: "roles"; user: User } | { kind: "password"; user: User };

export function UsersPage() {
  const { api, me, can, toast, signOut } = useApp();
  const users = useQuery<User[]>("users", { load: () => api.get("users"), pollMs: 30_000 });
  const roles = useQuery<Role[]>(can("roles.manage") ? "roles" : null, { load: () => api.get("roles"), pollMs: 30_000 });
  const [editing, setEditing] = useState<Editing | null>(null);
  const [confirm, confirmDialog] = useConfirm();
  const roleNames = roles.data ? roles.data.map((r) => r.name) : [...new Set([...BUILT_IN_ROLE_NAMES, ...(users.data ?? []).flatMap((u) => u.roles)])].sort();
  const remove = async (user: User) => {
    const ok = await confirm({
      title: `Delete user ${user.username}`,
      message: "The user can no longer sign in; tokens already issued to them stop working.",
      typed: user.username,
      danger: true,
      confirmLabel: "Delete",
    });
    if (!ok) return;
    try {
      await api.delete(`users/${encodeURIComponent(user.username)}`);
      toast(`User ${user.username} deleted`, "success");
      users.refresh();
    } catch (err) {
      toast(`Delete: ${errorMessage(err)}`, "error");
    }
  };
  const done = (message: string, self: boolean) => {
    setEditing(null);
    toast(message, "success");
    users.refresh();
    // A new password revokes the user's tokens, this page's included when it is our own.
    if (self) window.setTimeout(signOut, 1_500);
  };
  return (
    <>
      <PageHeader
        title="Users"
        actions={
          <Button kind="primary" perm="users.manage" onClick={() => setEditing({ kind: "create" })}>
            Create user
          </Button>
        }
      />
      <QueryView state={users}>
        {(list) => (
          <DataTable
            label="Users"
            rows={list}
            rowKey={(u) => u.username}
            empty="No user."
            columns={[
              {
                title: "Username",
                render: (u) => (
                  <>
                    {u.username} {u.username === me.username ? <Badge tone="info">you</Badge> : null}
                  </>
                ),
              },
              {
                title: "Roles",
                render: (u) =>
                  u.roles.length === 0 ? (
                    <span class="muted">none</span>
                  ) : (
                    u.roles.map((r) => (
                      <span key={r}>
                        <Badge tone={r === "ADMIN" ? "warn" : "muted"}>{r}</Badge>{" "}
                      </span>
                    ))
                  ),
              },
              { title: "Created", render: (u) => time(u.createdAt) },
              { title: "Changed", render: (u) => time(u.updatedAt) },
              {
                title: "Actions",
                render: (u) => (
                  <div class="actions">
                    <Button perm="users.manage" onClick={() => setEditing({ kind: "roles", user: u })}>
                      Change roles
                    </Button>
                    <Button perm="users.manage" onClick={() => setEditing({ kind: "password", user: u })}>
                      Set password
                    </Button>
                    {u.username === me.username ? null : (
                      <Button perm="users.manage" kind="danger" onClick={() => void remove(u)}>
                        Delete
                      </Button>
                    )}
                  </div>
                ),
              },
            ]}
          />
        )}
      </QueryView>
      <Dialog open={editing?.kind === "create"} title="Create user" onClose={() => setEditing(null)}>
        {editing?.kind === "create" ? <CreateUserForm roleNames={roleNames} onDone={(name) => done(`User ${name} created`, false)} /> : null}
      </Dialog>
      <Dialog open={editing?.kind === "roles"} title={editing?.kind === "roles" ? `Roles of ${editing.user.username}` : ""} onClose={() => setEditing(null)}>
        {editing?.kind === "roles" ? (
          <RolesForm user={editing.user} roleNames={roleNames} onDone={() => done(`Roles of ${editing.user.username} changed`, false)} />
        ) : null}
      </Dialog>
      <Dialog
        open={editing?.kind === "password"}
        title={editing?.kind === "password" ? `Password of ${editing.user.username}` : ""}
        onClose={() => setEditing(null)}
      >
        {editing?.kind === "password" ? (
          <PasswordForm
            user={editing.user}
            self={editing.user.username === me.username}
            onDone={() => done(`Password of ${editing.user.username} changed`, editing.user.username === me.username)}
          />
        ) : null}
      </Dialog>
      {confirmDialog}
    </>
  );
}

function RoleChoice({ roleNames, chosen, onChange }: { roleNames: string[]; chosen: string[]; onChange(roles: string[]): void }) {
  return (
    <fieldset>
      <legend>Roles</legend>
      {roleNames.map((name) => (
        <label key={name} class="check">
          <input
            type="checkbox"
            name="role"
            value={name}
            checked={chosen.includes(name)}
            onChange={(e) => onChange(e.currentTarget.checked ? [...chosen, name] : chosen.filter((r) => r !== name))}
          />
          {name}
        </label>
      ))}
    </fieldset>
  );
}

function CreateUserForm({ roleNames, onDone }: { roleNames: string[]; onDone(username: string): void }) {
  const { api } = useApp();
  const [username, setUsername] = useState("");
  const [password, setPassword] = useState("");
  const [repeat, setRepeat] = useState("");
  const [roles, setRoles] = useState<string[]>(["VIEWER"]);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  return (
    <form
      aria-label="Create user"
      onSubmit={async (e) => {
        e.preventDefault();
        const problem = passwordProblem(password, repeat);
        if (problem) return setError(problem);
        setBusy(true);
        setError(null);
        try {
          await api.post("users", { username, password, roles });
          onDone(username);
        } catch (err) {
          setError(errorMessage(err));
        } finally {
          setBusy(false);
        }
      }}
    >
      <Field label="Username" hint="letters, digits, _ . and -; at most 64">
        <input name="username" required pattern={USERNAME_PATTERN} autocomplete="off" value={username} onInput={(e) => setUsername(e.currentTarget.value)} />
      </Field>
      <Field label="Password" hint={`at least ${PASSWORD_LENGTH_MIN} characters`}>
        <input
          name="password"
          type="password"
          required
          minLength={PASSWORD_LENGTH_MIN}
          autocomplete="new-password"
          value={password}
          onInput={(e) => setPassword(e.currentTarget.value)}
        />
      </Field>
      <Field label="Repeat the password">
        <input name="repeat" type="password" required autocomplete="new-password" value={repeat} onInput={(e) => setRepeat(e.currentTarget.value)} />
      </Field>
      <RoleChoice roleNames={roleNames} chosen={roles} onChange={setRoles} />
      {error ? <p class="error-box">{error}</p> : null}
      <div class="actions end">
        <Button type="submit" kind="primary" busy={busy}>
          Create user
        </Button>
      </div>
    </form>
  );
}

function RolesForm({ user, roleNames, onDone }: { user: User; roleNames: string[]; onDone(): void }) {
  const { api } = useApp();
  const [roles, setRoles] = useState(user.roles);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  // Roles held but not offered (a role this page cannot list) stay visible and can be removed.
  const offered = [...new Set([...roleNames, ...user.roles])];
  return (
    <form
      aria-label="Change roles"
      onSubmit={async (e) => {
        e.preventDefault();
        setBusy(true);
        setError(null);
        try {
          await api.patch(`users/${encodeURIComponent(user.username)}`, { roles });
          onDone();
        } catch (err) {
          setError(errorMessage(err));
        } finally {
          setBusy(false);
        }
      }}
    >
      <RoleChoice roleNames={offered} chosen={roles} onChange={setRoles} />
      <p class="muted">A role change applies to the user's next request; their sign-in stays valid.</p>
      {error ? <p class="error-box">{error}</p> : null}
      <div class="actions end">
        <Button type="submit" kind="primary" busy={busy}>
          Save roles
        </Button>
      </div>
    </form>
  );
}

function PasswordForm({ user, self, onDone }: { user: User; self: boolean; onDone(): void }) {
  const { api } = useApp();
  const [password, setPassword] = useState("");
  const [repeat, setRepeat] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  return (
    <form
      aria-label="Set password"
      onSubmit={async (e) => {
        e.preventDefault();
        const problem = passwordProblem(password, repeat);
        if (problem) return setError(problem);
        setBusy(true);
        setError(null);
        try {
          await api.patch(`users/${encodeURIComponent(user.username)}`, { password });
          onDone();
        } catch (err) {
          setError(errorMessage(err));
        } finally {
          setBusy(false);
        }
      }}
    >
      <p>
        {self
          ? "Every sign-in of yours ends, this one too: sign in again with the new password."
          : `Every sign-in of ${user.username} ends; they sign in again with the new password.`}
      </p>
      <Field label="New password" hint={`at least ${PASSWORD_LENGTH_MIN} characters`}>
        <input
          name="password"
          type="password"
          required
          minLength={PASSWORD_LENGTH_MIN}
          autocomplete="new-password"
          value={password}
          onInput={(e) => setPassword(e.currentTarget.value)}
        />
      </Field>
      <Field label="Repeat the password">
        <input name="repeat" type="password" required autocomplete="new-password" value={repeat} onInput={(e) => setRepeat(e.currentTarget.value)} />
      </Field>
      {error ? <p class="error-box">{error}</p> : null}
      <div class="actions end">
        <Button type="submit" kind="primary" busy={busy}>
          Set password
        </Button>
      </div>
    </form>
  );
}

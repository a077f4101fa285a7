/** Sign-in: username and password to `POST /api/v1/auth/login`; the token goes to this tab only. */
import { useState } from "preact/hooks";
import { ApiClient, errorMessage } from "../lib/api.js";

export function SignIn({ apiBase, onSignedIn }: { apiBase: string; onSignedIn(token: string): void }) {
  const [username, setUsername] = useState("");
  const [password, setPassword] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const api = new ApiClient({ base: apiBase, token: () => null, onUnauthorized: () => undefined });
      const { token } = await api.post<{ token: string }>("auth/login", { username, password });
      onSignedIn(token);
    } catch (err) {
      setError(errorMessage(err));
      setBusy(false);
    }
  };
  return (
    <main class="center">
      <form class="card sign-in" onSubmit={submit} aria-labelledby="sign-in-title">
        <h1 id="sign-in-title">Sign in</h1>
        <p class="muted">
          Sign in with a controller user. On a new install that is <code>admin</code>, with the password from the controller's first start.
        </p>
        <label class="field">
          <span class="field-label">Username</span>
          <input name="username" autocomplete="username" required value={username} onInput={(e) => setUsername(e.currentTarget.value)} autoFocus />
        </label>
        <label class="field">
          <span class="field-label">Password</span>
          <input
            name="password"
            type="password"
            autocomplete="current-password"
            required
            value={password}
            onInput={(e) => setPassword(e.currentTarget.value)}
          />
        </label>
        {error ? (
          <p class="error-box" role="alert">
            {error}
          </p>
        ) : null}
        <button type="submit" class="btn btn-primary" disabled={busy}>
          {busy ? "Signing in…" : "Sign in"}
        </button>
      </form>
    </main>
  );
}

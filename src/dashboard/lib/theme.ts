/** Light, dark, or the system's choice; remembered in localStorage (a preference, not a secret). */
export type ThemeChoice = "system" | "light" | "dark";

const KEY = "cloud.dashboard.theme";

export function loadTheme(): ThemeChoice {
  try {
    const value = localStorage.getItem(KEY);
    return value === "light" || value === "dark" ? value : "system";
  } catch {
    return "system";
  }
}

export function applyTheme(choice: ThemeChoice): void {
  if (choice === "system") document.documentElement.removeAttribute("data-theme");
  else document.documentElement.setAttribute("data-theme", choice);
  try {
    if (choice === "system") localStorage.removeItem(KEY);
    else localStorage.setItem(KEY, choice);
  } catch {
    // Not remembered.
  }
}

export const nextTheme = (choice: ThemeChoice): ThemeChoice => (choice === "system" ? "dark" : choice === "dark" ? "light" : "system");

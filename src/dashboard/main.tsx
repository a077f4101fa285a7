/**
 * Entry point: finds the API relative to the page, takes a failover handoff out of the address,
 * applies the theme, starts loading the code of the page asked for, and renders the app.
 */
import { render } from "preact";
import "uplot/dist/uPlot.min.css";
import "./styles/app.css";
import { App } from "./app.js";
import { apiBase, dashboardBase } from "./lib/base.js";
import { saveToken } from "./lib/session.js";
import { takeHandoff } from "./lib/handoff.js";
import { applyTheme, loadTheme } from "./lib/theme.js";
import { parseRoute } from "./lib/route-parse.js";
import { PAGES } from "./pages/registry.js";

const api = apiBase(dashboardBase(location.href));
const { handoff, hash } = takeHandoff(location.hash);
if (handoff) {
  saveToken(api, handoff.token);
  history.replaceState(null, "", `${location.pathname}${location.search}${hash}`);
}
applyTheme(loadTheme());
// The code of the page asked for is fetched while the sign-in is checked.
void PAGES.find((p) => p.id === parseRoute(location.hash).parts[0])
  ?.load()
  .catch(() => undefined);
render(<App apiBase={api} lastSequence={handoff?.lastSequence ?? null} />, document.getElementById("app")!);

/**
 * Entry point: finds the API relative to the page, takes a failover handoff out of the address,
 * applies the theme and renders the app.
 */
import { render } from "preact";
import "uplot/dist/uPlot.min.css";
import "./styles/app.css";
import { App } from "./app.js";
import { apiBase, dashboardBase } from "./lib/base.js";
import { saveToken } from "./lib/session.js";
import { takeHandoff } from "./lib/handoff.js";
import { applyTheme, loadTheme } from "./lib/theme.js";

const api = apiBase(dashboardBase(location.href));
const { handoff, hash } = takeHandoff(location.hash);
if (handoff) {
  saveToken(api, handoff.token);
  history.replaceState(null, "", `${location.pathname}${location.search}${hash}`);
}
applyTheme(loadTheme());
render(<App apiBase={api} lastSequence={handoff?.lastSequence ?? null} />, document.getElementById("app")!);

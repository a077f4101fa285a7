// `npm run dev:ui`: Vite's dev server for the dashboard with hot module replacement, against a
// running controller: /api is proxied to CLOUD_CONTROLLER (http://127.0.0.1:8080 by default), so the
// page talks to the controller as it does when the controller serves it. Open the printed URL
// (http://127.0.0.1:5173/ui/); edits under src/dashboard/ show at once. VITE_PORT changes the port.
import { createServer } from "vite";
import { dashboardViteConfig } from "./dashboard.js";

const target = process.env.CLOUD_CONTROLLER ?? "http://127.0.0.1:8080";
const port = Number(process.env.VITE_PORT ?? 5173);
const server = await createServer(
  dashboardViteConfig({
    base: "/ui/",
    logLevel: "info",
    server: {
      host: "127.0.0.1",
      port,
      strictPort: true,
      // Server-sent event streams pass through the proxy unbuffered.
      proxy: { "/api": { target, changeOrigin: true } },
    },
  }),
);
await server.listen();
server.printUrls();
process.stdout.write(`dev:ui: /api is proxied to ${target} (set CLOUD_CONTROLLER to change it)\n`);

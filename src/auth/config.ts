/** The `auth` block of controller.yml, as the auth service reads it. */
import type { ControllerConfig } from "../config/schema.js";

export type AuthConfig = ControllerConfig["auth"];

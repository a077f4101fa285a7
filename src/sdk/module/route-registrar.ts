/**
 * Route registration of a module (spec document 3, rules 4 and 5): routes keep their registration
 * order (the first match wins); typed bodies exist for post, put, patch and delete; a missing body
 * type or handler fails at once; once closed (the module started) registrations are ignored and
 * reported through `onIgnored`.
 */
import { IllegalStateError } from "./errors.js";
import { parseRouteTemplate, type RouteTemplate } from "./route-template.js";
import type { BodyType, Handler, RouteMethod, RouteRegistrar, TypedHandler } from "./types.js";

/** One registered route. */
export interface RegisteredModuleRoute {
  readonly method: RouteMethod;
  readonly template: RouteTemplate;
  readonly handler: Handler | TypedHandler<unknown>;
  /** Present for a typed route. */
  readonly bodyType?: BodyType<unknown>;
}

/** Collects routes in order; see the module comment. */
export class ModuleRouteTable implements RouteRegistrar {
  readonly routes: RegisteredModuleRoute[] = [];
  private closed = false;

  constructor(private readonly onIgnored: (method: RouteMethod, template: string) => void = () => {}) {}

  /** Later registrations are ignored. */
  close(): void {
    this.closed = true;
  }

  get(template: string, handler: Handler): RouteRegistrar {
    if (arguments.length > 2) throw new IllegalStateError("a typed body exists for post, put, patch and delete only");
    return this.add("GET", template, [handler]);
  }

  post(template: string, handler: Handler): RouteRegistrar;
  post<T>(template: string, bodyType: BodyType<T>, handler: TypedHandler<T>): RouteRegistrar;
  post(template: string, ...rest: unknown[]): RouteRegistrar {
    return this.add("POST", template, rest);
  }

  put(template: string, handler: Handler): RouteRegistrar;
  put<T>(template: string, bodyType: BodyType<T>, handler: TypedHandler<T>): RouteRegistrar;
  put(template: string, ...rest: unknown[]): RouteRegistrar {
    return this.add("PUT", template, rest);
  }

  patch(template: string, handler: Handler): RouteRegistrar;
  patch<T>(template: string, bodyType: BodyType<T>, handler: TypedHandler<T>): RouteRegistrar;
  patch(template: string, ...rest: unknown[]): RouteRegistrar {
    return this.add("PATCH", template, rest);
  }

  delete(template: string, handler: Handler): RouteRegistrar;
  delete<T>(template: string, bodyType: BodyType<T>, handler: TypedHandler<T>): RouteRegistrar;
  delete(template: string, ...rest: unknown[]): RouteRegistrar {
    return this.add("DELETE", template, rest);
  }

  private add(method: RouteMethod, template: string, rest: unknown[]): RouteRegistrar {
    if (this.closed) {
      this.onIgnored(method, String(template));
      return this;
    }
    const parsed = parseRouteTemplate(template);
    if (rest.length >= 2) {
      const [bodyType, handler] = rest;
      const validType =
        typeof bodyType === "function" || (typeof bodyType === "object" && bodyType !== null && typeof (bodyType as { parse?: unknown }).parse === "function");
      if (!validType) throw new IllegalStateError(`${method} ${parsed.text}: the body type must be a parser function or an object with parse()`);
      if (typeof handler !== "function") throw new IllegalStateError(`${method} ${parsed.text}: the handler must be a function`);
      this.routes.push({ method, template: parsed, handler: handler as TypedHandler<unknown>, bodyType: bodyType as BodyType<unknown> });
    } else {
      const [handler] = rest;
      if (typeof handler !== "function") throw new IllegalStateError(`${method} ${parsed.text}: the handler must be a function`);
      this.routes.push({ method, template: parsed, handler: handler as Handler });
    }
    return this;
  }
}

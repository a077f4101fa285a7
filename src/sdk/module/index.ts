/**
 * The platform module SDK (`cloud-control-plane/module`): what a controller module builds against
 * (spec document 3). It imports nothing from the rest of the package, so a module bundles it (with
 * esbuild, as examples/motd-module/build.ts does) and runs it inside its own worker thread of the
 * controller. Errors are told apart by `kind`, so use the `is…` helpers rather than `instanceof`.
 */
export type {
  BodyType,
  CapabilityClient,
  CapabilityHandle,
  CloudModule,
  CustomCloudEvent,
  DocumentFilter,
  DocumentFindOptions,
  DocumentStorage,
  EventFilter,
  EventSubscription,
  Handler,
  KeyValueStorage,
  ModuleCapabilities,
  ModuleCluster,
  ModuleCollection,
  ModuleContext,
  ModuleDocument,
  ModuleEvent,
  ModuleEventBus,
  ModuleEventHandler,
  ModuleLogger,
  ModuleRequest,
  ModuleResponse,
  ModuleStorage,
  RouteMethod,
  RouteRegistrar,
  SingletonLease,
  TypedHandler,
} from "./types.js";
export { defineModule } from "./types.js";
export {
  CapabilityUnavailableError,
  IllegalStateError,
  InvalidArgumentError,
  ModuleError,
  NotFoundError,
  StorageQuotaError,
  UndeclaredStorageError,
  errorKindOf,
  isCapabilityUnavailable,
  isInvalidArgument,
  isNotFound,
  isStorageQuotaExceeded,
  isUndeclaredStorage,
  moduleErrorOf,
  type ModuleErrorKind,
} from "./errors.js";
export { matchRouteTemplate, parseRouteTemplate, pathSegmentsOf, type RouteTemplate, type TemplateSegment } from "./route-template.js";
export { ModuleRouteTable, type RegisteredModuleRoute } from "./route-registrar.js";
export { moduleRequest, ModuleResponseRecorder, applyBodyType, messageOf, type RequestData, type ResponseData } from "./request.js";
export { findModuleRoute, responseForError, runModuleRoute } from "./route-dispatch.js";
export { startModuleHarness, type HarnessOptions, type ModuleHarness } from "./testing.js";

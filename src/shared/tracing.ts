/**
 * Tracing with OpenTelemetry (spec document 2, "Tracing"; docs/decisions/tracing.md), shared by the
 * controller and the daemon. Each process builds one {@link Tracing} from its telemetry settings: a
 * tracer provider of its own (nothing is registered globally, so several controllers in one process
 * keep apart), a parent-based head sampler with `samplerRatio` for root spans, and a batching OTLP
 * exporter over HTTP (JSON) to `otlpEndpoint`. The active span lives in an AsyncLocalStorage of the
 * instance, so it follows a request through every await. Trace context crosses processes as a W3C
 * `traceparent` string: in HTTP headers from plugins, in the daemon stream's ControllerMessage and
 * in commands forwarded between controllers. Disabled, nothing is recorded or exported and
 * {@link Tracing.traceparent} is empty.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type Span, type Tracer } from "@opentelemetry/api";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BasicTracerProvider, BatchSpanProcessor, ParentBasedSampler, TraceIdRatioBasedSampler } from "@opentelemetry/sdk-trace-base";
import { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from "@opentelemetry/semantic-conventions";

export { SpanKind, SpanStatusCode, type Attributes, type Span };

/** The telemetry settings both processes read (controller.yml and daemon.yml `telemetry`). */
export interface TelemetrySettings {
  enabled: boolean;
  /** OTLP/HTTP base URL (e.g. `http://collector:4318`); spans go to `<base>/v1/traces`. */
  otlpEndpoint: string;
  /** Head sampling ratio of root spans in [0, 1]; a span with a parent follows the parent's decision. */
  samplerRatio: number;
}

/** How long the exporter batches spans before it sends them. */
export const SPAN_EXPORT_DELAY_MS = 1_000;
/** Spans waiting for export at most; beyond, new spans are dropped (the exporter's own bound). */
export const SPANS_QUEUED_MAX = 2_048;
/** How long one export request may take. */
export const SPAN_EXPORT_TIMEOUT_MS = 10_000;

export interface SpanOptions {
  kind?: SpanKind;
  /** A W3C traceparent to continue; when empty or invalid, the active span (if any) is the parent. */
  traceparent?: string;
  attributes?: Attributes;
}

/** One process's tracer. */
export interface Tracing {
  readonly enabled: boolean;
  /** Runs `fn` inside a new span that ends when `fn` settles; a throw marks the span as an error. */
  inSpan<T>(name: string, options: SpanOptions, fn: (span: Span) => Promise<T> | T): Promise<T>;
  /** The W3C traceparent of the active span; empty when there is none or tracing is off. */
  traceparent(): string;
  /** Exports what is queued. */
  flush(): Promise<void>;
  /** Exports what is queued and stops the exporter. */
  shutdown(): Promise<void>;
}

/** The spans' URL for an OTLP/HTTP base endpoint (a URL already ending in /v1/traces is kept). */
export function otlpTracesUrl(endpoint: string): string {
  const trimmed = endpoint.trim().replace(/\/+$/, "");
  return trimmed.endsWith("/v1/traces") ? trimmed : `${trimmed}/v1/traces`;
}

const propagator = new W3CTraceContextPropagator();
const getter = { get: (carrier: Record<string, string>, key: string) => carrier[key], keys: (carrier: Record<string, string>) => Object.keys(carrier) };
const setter = { set: (carrier: Record<string, string>, key: string, value: string) => void (carrier[key] = value) };

/** The context a traceparent names; null when it is not a valid one. */
function contextOf(traceparent: string | undefined): Context | null {
  if (!traceparent) return null;
  const context = propagator.extract(ROOT_CONTEXT, { traceparent }, getter);
  return trace.getSpanContext(context) ? context : null;
}

const disabled: Tracing = {
  enabled: false,
  inSpan: async (_name, _options, fn) => fn(trace.wrapSpanContext({ traceId: "0".repeat(32), spanId: "0".repeat(16), traceFlags: 0 })),
  traceparent: () => "",
  flush: async () => undefined,
  shutdown: async () => undefined,
};

/** Builds the tracer of one process (`serviceName` is `cloud-controller` or `cloud-daemon`). */
export function createTracing(settings: TelemetrySettings, service: { name: string; version?: string; instanceId?: string }): Tracing {
  if (!settings.enabled || settings.otlpEndpoint.trim() === "") return disabled;
  const ratio = Math.min(1, Math.max(0, settings.samplerRatio));
  const exporter = new OTLPTraceExporter({ url: otlpTracesUrl(settings.otlpEndpoint), timeoutMillis: SPAN_EXPORT_TIMEOUT_MS });
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({
      [ATTR_SERVICE_NAME]: service.name,
      ...(service.version ? { [ATTR_SERVICE_VERSION]: service.version } : {}),
      ...(service.instanceId ? { "service.instance.id": service.instanceId } : {}),
    }),
    sampler: new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio), remoteParentNotSampled: new TraceIdRatioBasedSampler(ratio) }),
    spanProcessors: [new BatchSpanProcessor(exporter, { scheduledDelayMillis: SPAN_EXPORT_DELAY_MS, maxQueueSize: SPANS_QUEUED_MAX })],
  });
  const tracer: Tracer = provider.getTracer("cloud-control-plane");
  const active = new AsyncLocalStorage<Context>();

  return {
    enabled: true,
    async inSpan(name, options, fn) {
      const parent = contextOf(options.traceparent) ?? active.getStore() ?? ROOT_CONTEXT;
      const span = tracer.startSpan(name, { kind: options.kind ?? SpanKind.INTERNAL, attributes: options.attributes }, parent);
      try {
        return await active.run(trace.setSpan(parent, span), () => fn(span));
      } catch (err) {
        span.recordException(err as Error);
        span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error).message });
        throw err;
      } finally {
        span.end();
      }
    },
    traceparent() {
      const context = active.getStore();
      if (!context) return "";
      const carrier: Record<string, string> = {};
      propagator.inject(context, carrier, setter);
      return carrier.traceparent ?? "";
    },
    flush: () => provider.forceFlush(),
    shutdown: () => provider.shutdown(),
  };
}

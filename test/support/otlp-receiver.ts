// An OTLP/HTTP trace receiver on 127.0.0.1 for the tracing tests: it accepts JSON bodies (gzip or
// not), answers 200, and keeps every span it decoded with its resource's attributes, so a test can
// tell the processes (and the controllers of one cluster) apart and follow the parent links.
import { createServer, type Server } from "node:http";
import { promisify } from "node:util";
import { gunzip } from "node:zlib";

/** One received span. Ids are lower-case hex; `parentSpanId` is empty for a root span. */
export interface ReceivedSpan {
  /** The resource's `service.name`. */
  service: string;
  /** The resource's `service.instance.id` (empty when absent). */
  serviceInstanceId: string;
  /** Every string, number or boolean attribute of the resource. */
  resource: Record<string, string | number | boolean>;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  /** Every string, number or boolean attribute of the span. */
  attributes: Record<string, string | number | boolean>;
}

export interface OtlpReceiver {
  /** The base URL to configure as `telemetry.otlpEndpoint`. */
  url: string;
  spans: ReceivedSpan[];
  requests: { path: string; contentType: string }[];
  close(): Promise<void>;
}

/** OTLP span kinds. */
export const SpanKinds = { INTERNAL: 1, SERVER: 2, CLIENT: 3 } as const;

interface AnyValue {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  boolValue?: boolean;
}
interface KeyValue {
  key: string;
  value: AnyValue;
}

/** OTLP JSON ids are hex; base64 is accepted too (the protobuf-JSON mapping). */
const hexId = (id: string | undefined) => (!id ? "" : /^[0-9a-f]+$/i.test(id) ? id.toLowerCase() : Buffer.from(id, "base64").toString("hex"));

function attributesOf(list: KeyValue[] | undefined): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (const { key, value } of list ?? []) {
    if (value.stringValue !== undefined) out[key] = value.stringValue;
    else if (value.intValue !== undefined) out[key] = Number(value.intValue);
    else if (value.doubleValue !== undefined) out[key] = value.doubleValue;
    else if (value.boolValue !== undefined) out[key] = value.boolValue;
  }
  return out;
}

/** Starts a receiver on an ephemeral port of 127.0.0.1; `close` stops it. */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const requests: { path: string; contentType: string }[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", async () => {
      requests.push({ path: req.url ?? "", contentType: req.headers["content-type"] ?? "" });
      try {
        let body = Buffer.concat(chunks);
        if (req.headers["content-encoding"] === "gzip") body = await promisify(gunzip)(body);
        const decoded = JSON.parse(body.toString("utf8")) as {
          resourceSpans?: {
            resource?: { attributes?: KeyValue[] };
            scopeSpans?: { spans?: { traceId: string; spanId: string; parentSpanId?: string; name: string; kind: number; attributes?: KeyValue[] }[] }[];
          }[];
        };
        for (const resourceSpans of decoded.resourceSpans ?? []) {
          const resource = attributesOf(resourceSpans.resource?.attributes);
          for (const scope of resourceSpans.scopeSpans ?? []) {
            for (const span of scope.spans ?? []) {
              spans.push({
                service: String(resource["service.name"] ?? ""),
                serviceInstanceId: String(resource["service.instance.id"] ?? ""),
                resource,
                traceId: hexId(span.traceId),
                spanId: hexId(span.spanId),
                parentSpanId: hexId(span.parentSpanId),
                name: span.name,
                kind: span.kind,
                attributes: attributesOf(span.attributes),
              });
            }
          }
        }
        res.writeHead(200, { "content-type": "application/json" }).end("{}");
      } catch (err) {
        res.writeHead(400).end(String(err));
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

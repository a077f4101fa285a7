/**
 * The sharing metrics of spec document 2's list (`cloud_share_*`), registered on the metrics
 * service's own registry: uploads, upstream failures, upload sizes and revocations
 * (docs/decisions/logs.md). When metrics are disabled every handle is a no-op and nothing is
 * registered.
 */
import { Counter, Histogram } from "prom-client";
import type { MetricsService } from "./metrics.js";

/** What a share upload records. */
export interface ShareMetrics {
  /** One upload attempt of `kind` (logs, diagnostics, crash) ending in `outcome`. */
  attempt(kind: string, outcome: "success" | "error"): void;
  /** An upstream failure: the paste service's HTTP status, or `network`. */
  upstreamError(status: string): void;
  /** Size in bytes of a redacted upload. */
  uploadBytes(bytes: number): void;
  /** One revoke attempt ending in `outcome`. */
  revocation(outcome: ShareRevocationOutcome): void;
}

/** The spec's outcomes of a revoke attempt: deleted, the service failed, or no delete token to send. */
export type ShareRevocationOutcome = "success" | "error" | "missing-token";

const noop: ShareMetrics = { attempt: () => {}, upstreamError: () => {}, uploadBytes: () => {}, revocation: () => {} };

/** Registers the `cloud_share_*` metrics on `metrics.registry`. */
export function createShareMetrics(metrics: Pick<MetricsService, "enabled" | "registry">): ShareMetrics {
  if (!metrics.enabled) return noop;
  const registers = [metrics.registry];
  const attempts = new Counter({
    name: "cloud_share_attempts_total",
    help: "Share upload attempts by kind and outcome (success, error)",
    labelNames: ["kind", "outcome"] as const,
    registers,
  });
  const upstreamErrors = new Counter({
    name: "cloud_share_upstream_errors_total",
    help: "Paste service failures by HTTP status (or network)",
    labelNames: ["status"] as const,
    registers,
  });
  // A spec "summary" is exposed with _bucket{le}, _sum and _count (docs/decisions/metrics.md): a histogram.
  const uploadBytes = new Histogram({
    name: "cloud_share_upload_bytes",
    help: "Size of redacted uploads in bytes",
    buckets: [1_024, 16_384, 65_536, 262_144, 1_048_576, 4_194_304, 16_777_216],
    registers,
  });
  const revocations = new Counter({
    name: "cloud_share_revocations_total",
    help: "Share revoke attempts by outcome (success, error, missing-token)",
    labelNames: ["outcome"] as const,
    registers,
  });
  return {
    attempt: (kind, outcome) => attempts.inc({ kind, outcome }),
    upstreamError: (status) => upstreamErrors.inc({ status }),
    uploadBytes: (bytes) => uploadBytes.observe(bytes),
    revocation: (outcome) => revocations.inc({ outcome }),
  };
}

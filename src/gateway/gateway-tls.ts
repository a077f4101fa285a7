/** The gateway server's TLS material as grpc-js takes it. */
import * as grpc from "@grpc/grpc-js";
import type { CertificateAndKey } from "../cluster/identity/ca.js";

/**
 * A certificate provider that serves fixed PEM material (the CA and this controller's certificate).
 * Listeners are called on a microtask: grpc-js registers the server's watcher only after adding
 * the listeners, so a synchronous first update would never reach the server.
 */
export function staticCertificateProvider(caPem: string, identity: CertificateAndKey): grpc.experimental.CertificateProvider {
  const ca = { caCertificate: Buffer.from(caPem) };
  const id = { certificate: Buffer.from(identity.certPem), privateKey: Buffer.from(identity.keyPem) };
  return {
    addCaCertificateListener: (listener) => queueMicrotask(() => listener(ca)),
    removeCaCertificateListener: () => undefined,
    addIdentityCertificateListener: (listener) => queueMicrotask(() => listener(id)),
    removeIdentityCertificateListener: () => undefined,
  };
}

/**
 * Server credentials over the cluster CA and this controller's certificate. Client certificates
 * are requested and verified against the CA but not required by TLS: Join has none yet. Connect
 * checks that one was presented and verified.
 */
export function gatewayServerCredentials(caPem: string, identity: CertificateAndKey): grpc.ServerCredentials {
  const provider = staticCertificateProvider(caPem, identity);
  return grpc.experimental.createCertificateProviderServerCredentials(provider, provider, false);
}

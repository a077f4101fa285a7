/**
 * Names in the certificates of the daemon stream, checked by both ends: a daemon accepts a
 * controller only when its gateway certificate carries {@link CONTROLLER_CERTIFICATE_NAME}, and the
 * controller never issues a node certificate under that name.
 */

/** Common name (and DNS name) of every controller's gateway certificate; daemons check it. */
export const CONTROLLER_CERTIFICATE_NAME = "cloud-controller";

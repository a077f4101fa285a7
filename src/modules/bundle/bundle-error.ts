/**
 * Why a bundle is refused, before the install or upgrade route decides the code it answers with
 * (422 PLATFORM_INSTALL_FAILED or PLATFORM_UPGRADE_FAILED; a signature problem is always 422
 * SIGNATURE_VERIFICATION_FAILED).
 */
export class BundleRejected extends Error {
  constructor(
    message: string,
    readonly signature = false,
  ) {
    super(message);
    this.name = "BundleRejected";
  }
}

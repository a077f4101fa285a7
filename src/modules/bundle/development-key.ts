/**
 * The development signing key's public half. Its private half ships in the repository
 * (`examples/motd-module/signing/development-key.pem`) so that the example module can be signed by
 * anyone: the development profile trusts it out of the box (`modules.signing.required` defaults to
 * true), the production profile never does.
 */
export const DEVELOPMENT_MODULE_PUBLIC_KEY_PEM = `-----BEGIN PUBLIC KEY-----
MCowBQYDK2VwAyEA+M0trpWL5b+SkIfsTU7bezNsMJ6F2q5C9oEl2YWu15M=
-----END PUBLIC KEY-----
`;

/**
 * Authentication: first-start admin bootstrap, password login issuing HS256 JWTs (jose), and token
 * verification into a {@link Principal}. Users and roles are managed through {@link users} and
 * {@link roles}; this service and those directories are the only code touching their collections.
 */
import { KeyedMutex, type KeyedLock } from "../domain/shared/keyed-mutex.js";
import { randomBytes, randomUUID, webcrypto } from "node:crypto";
import { errors as joseErrors, jwtVerify, SignJWT } from "jose";
import type { AuthConfig } from "./config.js";
import type { Clock } from "../shared/clock.js";
import { unauthorized } from "../shared/errors.js";
import type { DocumentStore } from "../store/ports.js";
import type { Logger } from "../logs/types.js";
import type { Principal } from "./principal.js";
import { hashPassword, verifyPassword, type ScryptParams } from "./password.js";
import { ADMIN_ROLE } from "./permissions.js";
import { RoleDirectory } from "./role-directory.js";
import { loadOrCreateSigningSecret } from "./signing-key.js";
import { UserDirectory, type UserDoc } from "./user-directory.js";
import { MinecraftLinks } from "./minecraft-links.js";

export const JWT_ISSUER = "cloud-controller";
/** Length of a generated first-start admin password. */
export const GENERATED_PASSWORD_LENGTH = 24;
/** How long a resolved principal is reused before the user and roles are read again. */
export const PRINCIPAL_CACHE_TTL_MS = 2_000;
/** Principals cached at once; the least recently added is dropped beyond this. */
export const PRINCIPAL_CACHE_ENTRIES_MAX = 1_000;
/**
 * Tokens whose signature was already checked, kept so a busy client does not pay for an HMAC
 * verification (a WebCrypto round trip) on every request. Expiry is still checked on every use.
 */
export const VERIFIED_TOKENS_MAX = 10_000;
const PASSWORD_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789";
const INVALID_TOKEN = "Invalid or expired token";

/** Resolves workload (instance) tokens; plugged in by the issue that introduces them. */
export type WorkloadTokenVerifier = (token: string) => Promise<Principal | null>;

export interface LoginResult {
  token: string;
  /** ISO 8601 expiry of the token. */
  expiresAt: string;
}

export interface AuthServiceDeps {
  documents: DocumentStore;
  config: AuthConfig;
  clock: Clock;
  logger: Logger;
  /** Source of CLOUD_ADMIN_PASSWORD; defaults to process.env. */
  env?: Readonly<Record<string, string | undefined>>;
  /** scrypt parameters for new hashes; defaults to {@link SCRYPT_DEFAULTS}. */
  passwordParams?: ScryptParams;
  /** Called after a revocation entry is written: a user's token version moved, so its earlier tokens stop verifying. */
  tokensRevoked?: () => void;
  /** Serialises the user and role directories' writes; cluster-wide when the controller passes a key-value lock. */
  directoryLock?: KeyedLock;
}

interface VerifiedClaims {
  sub: string;
  ver: number;
  expiresMs: number;
}

interface CachedPrincipal {
  principal: Principal;
  tokenVersion: number;
  expiresMs: number;
}

/** A password made of 24 characters from an unambiguous 56-letter alphabet (about 139 bits). */
export function generatePassword(length = GENERATED_PASSWORD_LENGTH): string {
  const bytes = randomBytes(length * 2);
  let out = "";
  // Rejection sampling keeps the distribution uniform.
  for (let i = 0; i < bytes.length && out.length < length; i++) {
    if (bytes[i] < 224) out += PASSWORD_ALPHABET[bytes[i] % PASSWORD_ALPHABET.length];
  }
  return out.length === length ? out : generatePassword(length);
}

/** Login, token verification and the user and role directories. Call {@link start} once before use. */
export class AuthService {
  readonly users: UserDirectory;
  readonly roles: RoleDirectory;
  /** Minecraft accounts linked to users: in-game commands act with the user's roles. */
  readonly links: MinecraftLinks;
  /** Verifies non-user (workload) tokens when set. */
  verifyWorkloadToken: WorkloadTokenVerifier | null = null;
  /** The shared secret imported once: jose would otherwise import the raw bytes on every call. */
  private signingKey: webcrypto.CryptoKey | null = null;
  private dummyHash: Promise<string> | null = null;
  private readonly cache = new Map<string, CachedPrincipal>();
  private readonly verifiedTokens = new Map<string, VerifiedClaims>();

  constructor(private readonly deps: AuthServiceDeps) {
    const lock = deps.directoryLock ?? new KeyedMutex();
    this.roles = new RoleDirectory(deps.documents, deps.clock, lock);
    this.users = new UserDirectory(deps.documents, this.roles, deps.clock, deps.passwordParams, deps.tokensRevoked, lock);
    this.links = new MinecraftLinks(deps.documents, this.users, this.roles, deps.clock, lock);
  }

  /** Loads (or creates) the shared signing secret and creates the first admin when no user exists. */
  async start(): Promise<void> {
    const secret = await loadOrCreateSigningSecret(this.deps.documents, this.deps.clock);
    this.signingKey = await webcrypto.subtle.importKey("raw", secret, { name: "HMAC", hash: "SHA-256" }, false, ["sign", "verify"]);
    if ((await this.users.count()) === 0) await this.bootstrapAdmin();
  }

  /** Drops cached principals; called after any user or role change. */
  invalidate(): void {
    this.cache.clear();
  }

  /**
   * Checks a username and password and issues a token. Unknown users cost the same scrypt work as
   * known ones. @throws ApiError 401 UNAUTHORIZED for bad credentials.
   */
  async login(username: string, password: string, clientIp: string): Promise<LoginResult> {
    const user = await this.users.findByUsername(username);
    const valid = await verifyPassword(password, user?.passwordHash ?? (await this.dummyPasswordHash()));
    if (!user || !valid) {
      this.deps.logger.info(`Login failed for user '${username.slice(0, 64)}' from ${clientIp}`);
      throw unauthorized("Invalid username or password");
    }
    const nowSeconds = Math.floor(this.deps.clock.nowMs() / 1000);
    const expSeconds = nowSeconds + this.deps.config.tokenTtlSeconds;
    const token = await new SignJWT({ name: user.username, ver: user.tokenVersion })
      .setProtectedHeader({ alg: "HS256", typ: "JWT" })
      .setIssuer(JWT_ISSUER)
      .setSubject(user._id)
      .setJti(randomUUID())
      .setIssuedAt(nowSeconds)
      .setExpirationTime(expSeconds)
      .sign(this.signingSecret());
    this.deps.logger.info(`Login succeeded for user '${user.username}' from ${clientIp}`);
    return { token, expiresAt: new Date(expSeconds * 1000).toISOString() };
  }

  /** Resolves a bearer token to a principal. @throws ApiError 401 when it is not valid. */
  async authenticate(token: string): Promise<Principal> {
    const claims = await this.verifyUserToken(token);
    if (claims) {
      const principal = await this.principalOf(claims.sub, claims.ver);
      if (principal) return principal;
      throw unauthorized(INVALID_TOKEN);
    }
    if (this.verifyWorkloadToken) {
      const workload = await this.verifyWorkloadToken(token);
      if (workload) return workload;
    }
    throw unauthorized(INVALID_TOKEN);
  }

  /**
   * The permissions `username` holds now, read from the directories (no cache); null when no such
   * user exists. Streams opened with a ticket check their user with it.
   */
  async permissionsOfUser(username: string): Promise<ReadonlySet<string> | null> {
    const user = await this.users.findByUsername(username);
    return user ? this.roles.permissionsOf(user.roles) : null;
  }

  private async verifyUserToken(token: string): Promise<VerifiedClaims | null> {
    const now = this.deps.clock.nowMs();
    const known = this.verifiedTokens.get(token);
    if (known) {
      if (known.expiresMs > now) return known;
      this.verifiedTokens.delete(token);
      return null;
    }
    let claims: VerifiedClaims;
    try {
      const { payload } = await jwtVerify(token, this.signingSecret(), {
        issuer: JWT_ISSUER,
        algorithms: ["HS256"],
        currentDate: new Date(now),
      });
      if (typeof payload.sub !== "string" || typeof payload.ver !== "number" || typeof payload.exp !== "number") return null;
      claims = { sub: payload.sub, ver: payload.ver, expiresMs: payload.exp * 1000 };
    } catch (err) {
      if (err instanceof joseErrors.JOSEError || err instanceof TypeError) return null;
      throw err;
    }
    if (this.verifiedTokens.size >= VERIFIED_TOKENS_MAX) this.verifiedTokens.delete(this.verifiedTokens.keys().next().value as string);
    this.verifiedTokens.set(token, claims);
    return claims;
  }

  private async principalOf(userId: string, tokenVersion: number): Promise<Principal | null> {
    const now = this.deps.clock.nowMs();
    const cached = this.cache.get(userId);
    if (cached && cached.expiresMs > now && cached.tokenVersion === tokenVersion) return cached.principal;
    const user = await this.users.findById(userId);
    if (!user) return null;
    const principal: Principal = {
      kind: "user",
      username: user.username,
      roles: [...user.roles],
      permissions: await this.roles.permissionsOf(user.roles),
    };
    this.cache.delete(userId);
    if (this.cache.size >= PRINCIPAL_CACHE_ENTRIES_MAX) this.cache.delete(this.cache.keys().next().value as string);
    this.cache.set(userId, { principal, tokenVersion: user.tokenVersion, expiresMs: now + PRINCIPAL_CACHE_TTL_MS });
    return user.tokenVersion === tokenVersion ? principal : null;
  }

  private async bootstrapAdmin(): Promise<void> {
    const { adminUsername } = this.deps.config;
    const env = this.deps.env ?? process.env;
    const configured = env.CLOUD_ADMIN_PASSWORD || this.deps.config.adminPassword;
    const password = configured || generatePassword();
    const now = new Date(this.deps.clock.nowMs()).toISOString();
    const doc: UserDoc = {
      _id: randomUUID(),
      username: adminUsername,
      passwordHash: await hashPassword(password, this.deps.passwordParams),
      roles: [ADMIN_ROLE],
      tokenVersion: 1,
      createdAt: now,
      updatedAt: now,
    };
    // Another controller may bootstrap at the same moment: the unique username decides the winner.
    if (!(await this.users.insertIfAbsent(doc))) return;
    if (configured) {
      this.deps.logger.info(`Created initial admin user '${adminUsername}' with the configured password`);
    } else {
      this.deps.logger.warn(
        `Created initial admin user '${adminUsername}' with generated password: ${password} ` +
          "(shown only once; set auth.adminPassword or CLOUD_ADMIN_PASSWORD, or change it after signing in: cloudctl user passwd)",
      );
    }
  }

  private dummyPasswordHash(): Promise<string> {
    this.dummyHash ??= hashPassword(randomUUID(), this.deps.passwordParams);
    return this.dummyHash;
  }

  private signingSecret(): webcrypto.CryptoKey {
    if (!this.signingKey) throw new Error("AuthService.start() has not run");
    return this.signingKey;
  }
}

/**
 * Fencing tokens that never go backwards, even when the key-value store loses its data.
 *
 * Tokens are counted in the key-value store (`cloud:v1:lease-token:<resource>`, kv-leases.ts), which
 * a Redis without persistence, a FLUSHALL or a failover to a replica that missed the last INCR can
 * take back to 1; a controller granted a token below one the daemons have already seen would have
 * every command refused as STALE_EPOCH, and worse, an older owner's commands would be accepted
 * again. So the highest token granted per resource is also kept in the shared document database
 * (collection `fencing_tokens`, `{_id: <resource>, token, grantedAt}`), which is durable: every
 * grant takes max(counter, high-water mark + 1) and records it with a compare-and-set before the
 * grant is written. Two grants of one resource never record the same mark, so tokens strictly
 * increase from holder to holder whatever the key-value store forgot.
 *
 * The collection is not part of backups (bundle-format.ts): a restore must never lower it.
 */
import { updateDocument } from "../domain/shared/conditional-update.js";
import { assert } from "../shared/errors.js";
import type { Collection, Doc, DocumentStore } from "../store/ports.js";

/** Collection holding the highest fencing token granted per lease resource. */
export const FENCING_TOKENS_COLLECTION = "fencing_tokens";

type StoredMark = Doc & { token: number; grantedAt: string };

/** Where grants record their tokens (see the module comment). */
export interface FencingHighWater {
  /**
   * The token to grant for `resource`: `counted` (the key-value counter's answer) unless the mark
   * is already there or above, then the mark + 1; recorded as the new mark before it is answered.
   */
  next(resource: string, counted: number): Promise<number>;
  /** The highest token granted for `resource` so far (0 when none was recorded). */
  highest(resource: string): Promise<number>;
}

/** {@link FencingHighWater} in the shared document database. */
export class DocumentFencingHighWater implements FencingHighWater {
  private readonly marks: Collection<StoredMark>;

  constructor(
    store: DocumentStore,
    private readonly nowIso: () => string = () => new Date().toISOString(),
  ) {
    this.marks = store.collection<StoredMark>(FENCING_TOKENS_COLLECTION);
  }

  next(resource: string, counted: number): Promise<number> {
    assert(Number.isSafeInteger(counted) && counted >= 1, `fencing token counter of ${resource} returned ${counted}`);
    return updateDocument(this.marks, resource, (current) => {
      const token = Math.max(counted, (current?.token ?? 0) + 1);
      assert(Number.isSafeInteger(token), `fencing token of ${resource} overflows`);
      return { next: { _id: resource, token, grantedAt: this.nowIso() }, result: token };
    });
  }

  async highest(resource: string): Promise<number> {
    return (await this.marks.get(resource))?.token ?? 0;
  }
}

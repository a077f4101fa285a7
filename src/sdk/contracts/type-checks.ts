/**
 * Compile-time checks that keep two declarations of one contract from drifting: a type that is
 * `never` when they agree, and fails to compile otherwise. Nothing here exists at run time.
 */

/** Compiles only when `T` is `never`; use it on the difference of two declarations. */
export type AssertNever<T extends never> = T;

/** Keys of `A` that `B` lacks, and keys of `B` that `A` lacks: `never` when both have the same keys. */
export type KeysDiffer<A, B> = Exclude<keyof A, keyof B> | Exclude<keyof B, keyof A>;

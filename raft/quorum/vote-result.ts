/** The outcome of counting votes (or acknowledgements) against a configuration. */
export const VoteResult = {
  /** Not decided yet: enough voters have not answered either way. */
  Pending: "pending",
  Lost: "lost",
  Won: "won",
} as const;
/** One of the {@link VoteResult} values. */
export type VoteResult = (typeof VoteResult)[keyof typeof VoteResult];

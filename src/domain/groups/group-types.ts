/** The stored shape of a group, shared by the group service and the validation it runs. */
import type { Doc } from "../../store/ports.js";
import type { Group, LoadScaling, SchedulingIssue } from "./group-schemas.js";

/** The stored document: the group without its computed aggregates, keyed by name. */
export type StoredGroup = Omit<Group, "runningInstances" | "totalPlayers" | "paused" | "schedulingIssue" | "stoppedInstances" | "loadScaling"> &
  Doc & {
    /** Absent on groups stored before the scheduler wrote it: read as false / null / []. */
    paused?: boolean;
    schedulingIssue?: SchedulingIssue | null;
    stoppedInstances?: string[];
    /** Absent on groups stored before load scaling existed: read as null. */
    loadScaling?: LoadScaling | null;
  };

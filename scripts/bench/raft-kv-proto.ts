/** Location of the raft-kv client protocol, loaded at runtime by @grpc/proto-loader. */
import { fileURLToPath } from "node:url";

export const raftKvProtoPath = fileURLToPath(new URL("../../proto/raftkv.proto", import.meta.url));

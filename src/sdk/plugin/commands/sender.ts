/** Who runs a command (spec document 3, "Plugin-side objects": CloudCommandSender). */
export interface CloudCommandSender {
  name(): string;
  isPlayer(): boolean;
  isConsole(): boolean;
  sendMessage(text: string): void;
  hasPermission(node: string): boolean;
}

/** The server console: every permission, messages to `write`. */
export function consoleSender(write: (text: string) => void): CloudCommandSender {
  return {
    name: () => "CONSOLE",
    isPlayer: () => false,
    isConsole: () => true,
    sendMessage: write,
    hasPermission: () => true,
  };
}

/** A player as a command sender needs it. */
export interface SendingPlayer {
  uuid: string;
  name: string;
  sendMessage(text: string): void;
}

/**
 * A player running a command, with the permissions the controller granted its account when the
 * command started (`permissions.permissions`: the linked user's; none when not linked). The check
 * is synchronous, as the spec's `hasPermission(node)` is; make one sender per command, so an unlink
 * takes effect at the next command ({@link linkedPlayerSender}).
 */
export function playerSender(player: SendingPlayer, permissions: { readonly permissions: ReadonlySet<string> }): CloudCommandSender {
  return {
    name: () => player.name,
    isPlayer: () => true,
    isConsole: () => false,
    sendMessage: (text) => player.sendMessage(text),
    hasPermission: (node) => permissions.permissions.has(node),
  };
}

/**
 * Asks the controller for the permissions of `player`'s linked user (`CloudClient.fetchPlayerPermissions`)
 * and makes its command sender. When the controller cannot answer, the player holds no permission
 * for this command (a permission is never granted on doubt); `onError` hears why.
 */
export async function linkedPlayerSender(
  client: { fetchPlayerPermissions(uuid: string): Promise<{ readonly permissions: ReadonlySet<string> }> },
  player: SendingPlayer,
  onError: (error: unknown) => void = () => undefined,
): Promise<CloudCommandSender> {
  try {
    return playerSender(player, await client.fetchPlayerPermissions(player.uuid));
  } catch (error) {
    onError(error);
    return playerSender(player, { permissions: new Set() });
  }
}

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

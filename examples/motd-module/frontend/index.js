// The dashboard panel of the example module: shows the current message and lets an operator set it.
export function mount(element, api) {
  const render = async () => {
    const message = await api.get("/api/v1/modules/motd/message");
    element.textContent = message.text;
  };
  void render();
  return { refresh: render };
}

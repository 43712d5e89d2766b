// The request/reply loop every load-generator child runs: the parent sends
// {probe: name, id, ...args} and gets {probeReply: id, result | error}.
export function serve(handlers) {
  process.on('message', (msg) => {
    const handler = msg && typeof msg === 'object' ? handlers[msg.probe] : undefined;
    if (!handler) return;
    Promise.resolve()
      .then(() => handler(msg))
      .then(
        (result) => process.send({ probeReply: msg.id, result }),
        (err) => process.send({ probeReply: msg.id, error: err?.stack ?? String(err) }),
      );
  });
  process.on('disconnect', () => process.exit(0));
}

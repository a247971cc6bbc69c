// Inside a sandbox without a network: 127.0.0.1:PORT forwarded to the bridge's unix
// socket (argv: socket, port, a file created once it listens).
"use strict";
const fs = require("fs");
const net = require("net");
const [socket, port, ready] = process.argv.slice(2);
net
  .createServer((client) => {
    const bridge = net.connect(socket);
    client.pipe(bridge);
    bridge.pipe(client);
    client.on("error", () => bridge.destroy());
    bridge.on("error", () => client.destroy());
  })
  .listen(Number(port), "127.0.0.1", () => fs.writeFileSync(ready, ""));

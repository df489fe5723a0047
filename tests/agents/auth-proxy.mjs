// A loopback HTTP proxy that adds `Authorization: Bearer <token>` to every request it passes on,
// for clients that cannot send a header of their own: the MCP conformance suite's server mode
// (`conformance server --url`) connects with a bare URL. Everything else passes unchanged both
// ways, streamed (a held call's SSE stream stays open), Host and Origin included, so the server's
// DNS-rebinding checks see what the client sent.
//
//   node auth-proxy.mjs <target url> <token>
//
// Prints the proxy's URL (the target's path on the proxy's port) as its first stdout line, then
// serves until killed.
import http from "node:http";

const [target, token] = process.argv.slice(2);
if (!target || !token) {
  console.error("usage: node auth-proxy.mjs <target url> <token>");
  process.exit(2);
}
const upstream = new URL(target);

const server = http.createServer((req, res) => {
  const headers = { ...req.headers, authorization: `Bearer ${token}` };
  const forward = http.request(
    {
      host: upstream.hostname,
      port: upstream.port,
      method: req.method,
      path: req.url,
      headers,
    },
    (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.rawHeaders);
      answer.pipe(res);
    },
  );
  forward.on("error", (e) => {
    if (!res.headersSent) res.writeHead(502, { "content-type": "text/plain" });
    res.end(`auth-proxy: ${e.message}`);
  });
  // The client going away closes the request upstream too, so the server sees it leave.
  res.on("close", () => forward.destroy());
  req.pipe(forward);
});

server.listen(0, "127.0.0.1", () => {
  const { port } = server.address();
  process.stdout.write(`http://127.0.0.1:${port}${upstream.pathname}\n`);
});

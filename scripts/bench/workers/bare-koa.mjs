// The HTTP ceiling reference: a bare Koa app answering {} to every request.
// With HOLD=1 it never answers (an idle-connection reference for scenario 4).
import http from 'node:http';
import Koa from 'koa';

const app = new Koa();
if (process.env.HOLD === '1') {
  app.use((ctx) => {
    ctx.respond = false;
  });
} else {
  app.use((ctx) => {
    ctx.body = {};
  });
}
const server = http.createServer(app.callback());
server.requestTimeout = 0;
server.headersTimeout = 20_000;
server.keepAliveTimeout = 65_000;
server.timeout = 0;
// The API's own listen backlog (HTTP_LISTEN_BACKLOG), so both accept 13,000 connections arriving at once alike.
server.listen({ port: Number(process.env.PORT), host: '127.0.0.1', backlog: 4096 });
process.on('SIGTERM', () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
});

// A real ACP client on the official TypeScript SDK (@agentclientprotocol/sdk), driven by
// the Python tests over this process's stdin/stdout (one JSON object per line):
//
//   tests -> here   {"id", "op": "request" | "notify", "method", "params"}
//                   {"op": "permission", "rid", "result"}      (answer a permission request)
//                   {"op": "close"}
//   here -> tests   {"id", "result"} | {"id", "error": {code, message, data}}
//                   {"event": "update", "params"}              (session/update, as parsed by the SDK)
//                   {"event": "permission", "rid", "params"}   (session/request_permission)
//
// The SDK spawns nothing: we start `dshd acp` and hand its pipes to ndJsonStream, so
// framing, ids, schema validation of what the agent sends, and errors are the SDK's.
import { spawn } from "node:child_process";
import readline from "node:readline";
import { Readable, Writable } from "node:stream";

const acp = await import(process.env.ACP_SDK_ENTRY);
const [command, ...args] = JSON.parse(process.env.ACP_AGENT_COMMAND);
const agent = spawn(command, args, { cwd: process.env.ACP_AGENT_CWD, stdio: ["pipe", "pipe", "inherit"] });

const emit = (message) => process.stdout.write(JSON.stringify(message) + "\n");
const errorOf = (e) => ({ code: e?.code ?? null, message: String(e?.message ?? e), data: e?.data ?? null });

const permissions = new Map();
let nextPermission = 0;

const app = acp
  .client({ name: "dshd-tests" })
  .onNotification(acp.methods.client.session.update, ({ params }) => emit({ event: "update", params }))
  .onRequest(acp.methods.client.session.requestPermission, ({ params }) =>
    new Promise((resolve, reject) => {
      const rid = ++nextPermission;
      permissions.set(rid, { resolve, reject });
      emit({ event: "permission", rid, params });
    }),
  );

const stream = acp.ndJsonStream(Writable.toWeb(agent.stdin), Readable.toWeb(agent.stdout));

await app.connectWith(stream, async (ctx) => {
  const lines = readline.createInterface({ input: process.stdin });
  for await (const line of lines) {
    if (!line.trim()) continue;
    const cmd = JSON.parse(line);
    if (cmd.op === "close") break;
    if (cmd.op === "permission") {
      const waiting = permissions.get(cmd.rid);
      permissions.delete(cmd.rid);
      if (waiting && "error" in cmd) waiting.reject(new acp.RequestError(-32603, cmd.error));
      else if (waiting) waiting.resolve(cmd.result);
      continue;
    }
    const call = cmd.op === "notify" ? ctx.notify(cmd.method, cmd.params) : ctx.request(cmd.method, cmd.params);
    Promise.resolve(call).then(
      (result) => emit({ id: cmd.id, result: result ?? null }),
      (error) => emit({ id: cmd.id, error: errorOf(error) }),
    );
  }
});

agent.stdin.end();
const code = await new Promise((resolve) => (agent.exitCode !== null ? resolve(agent.exitCode) : agent.on("exit", resolve)));
process.exit(code ?? 0); // stdin would keep Node alive

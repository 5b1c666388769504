// Drives a stdio MCP server with the TypeScript SDK's client: node client.mjs COMMAND [ARGS...]
// Prints {"tools": <tools/list result>, "calls": [<six create_ticket results>]} as JSON.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [command, ...args] = process.argv.slice(2);
const transport = new StdioClientTransport({ command, args, env: process.env, stderr: "inherit" });
const client = new Client({ name: "ts-client", version: "1.0.0" });
await client.connect(transport);

const tools = await client.listTools();
const summaries = [
  "Order 4411 arrived damaged",
  "Customer reports order 4411 was damaged in transit",
  "Damaged delivery for order 4411",
  "Please open a ticket: order 4411 damaged",
  "Order 4411: box crushed, items broken",
  "Ticket for the damaged order 4411",
];
const calls = [];
for (const summary of summaries) {
  calls.push(
    await client.callTool({
      name: "create_ticket",
      arguments: { customer_id: "C-1042", order_id: "4411", summary },
    }),
  );
}
await client.close();
process.stdout.write(JSON.stringify({ tools, calls }) + "\n");

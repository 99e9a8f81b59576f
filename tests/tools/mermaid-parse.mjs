// Parses Mermaid diagrams with Mermaid's own parser (the mermaid package pinned in package-lock.json):
// reads a JSON array of diagram sources on stdin, writes a JSON array of the same length: for each,
// {"error": null or the parser's message, and for a flowchart that parses what the parser made of it:
// "vertices": [[id, label], ...], "subgraphs": [[id, title, [member ids]], ...], "edges": [[from, to], ...]}.
// Exit 0 when every diagram parses, 1 when one does not, 2 when the input is not such an array.
//
// @mermaid-js/parser alone (1.2.1, mermaid's dependency) has grammars for info, packet, pie, architecture,
// gitGraph, radar, treemap and a few more, not flowchart: the flowchart grammar is in mermaid itself.
// mermaid.parse() sanitizes labels with DOMPurify, which needs a DOM: without one it throws
// "DOMPurify.addHook is not a function" on any label. jsdom gives it one (no browser is needed).
import { JSDOM } from "jsdom";

const dom = new JSDOM("<!doctype html><html><body></body></html>");
globalThis.window = dom.window;
globalThis.document = dom.window.document;

const { default: mermaid } = await import("mermaid");
mermaid.initialize({ startOnLoad: false, securityLevel: "strict" });

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
let sources;
try {
  sources = JSON.parse(Buffer.concat(chunks).toString("utf8"));
  if (!Array.isArray(sources) || !sources.every((s) => typeof s === "string")) throw new Error("not an array of strings");
} catch (err) {
  process.stderr.write(`mermaid-parse: stdin must be a JSON array of diagram sources: ${err.message}\n`);
  process.exit(2);
}

const results = [];
for (const source of sources) {
  try {
    await mermaid.parse(source);
    const result = { error: null };
    const diagram = await mermaid.mermaidAPI.getDiagramFromText(source);
    const db = diagram.db;
    if (typeof db.getVertices === "function") {
      result.vertices = [...db.getVertices().values()].map((v) => [v.id, v.text]);
      result.subgraphs = db.getSubGraphs().map((s) => [s.id, s.title, [...s.nodes]]);
      result.edges = db.getEdges().map((e) => [e.start, e.end]);
    }
    results.push(result);
  } catch (err) {
    results.push({ error: String(err && err.message ? err.message : err) });
  }
}
process.stdout.write(JSON.stringify(results) + "\n");
process.exit(results.every((r) => r.error === null) ? 0 : 1);

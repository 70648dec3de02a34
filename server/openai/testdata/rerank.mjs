// Rerank run of oengine's /v2/rerank with Cohere's official npm SDK
// (cohere-ai), a client nobody here wrote: TestRerankCohereSDK starts a
// server with a reranker and runs `node rerank.mjs BASE MODEL`. The SDK
// must send its request and parse the reply; the checks here are the
// contract of docs/api.md ("Reranking"). It prints the results as JSON.
import { CohereClientV2 } from "cohere-ai";

const [base, model] = process.argv.slice(2);
const co = new CohereClientV2({ token: "unused", environment: base });
const documents = [
  "Paris is the capital and largest city of France.",
  "The Eiffel Tower was completed in 1889.",
  "Photosynthesis converts light energy into chemical energy.",
];
const res = await co.rerank({ model, query: "What is the capital of France?", documents, topN: 2 });
const fail = (msg) => {
  console.error(msg, JSON.stringify(res));
  process.exit(1);
};
if (!Array.isArray(res.results) || res.results.length !== 2) fail("want 2 results (topN)");
const seen = new Set();
let prev = Infinity;
for (const r of res.results) {
  if (!Number.isInteger(r.index) || r.index < 0 || r.index >= documents.length || seen.has(r.index)) fail("bad index");
  if (!(r.relevanceScore > 0 && r.relevanceScore < 1)) fail("relevance score outside (0, 1)");
  if (r.relevanceScore > prev) fail("results not sorted by relevance");
  prev = r.relevanceScore;
  seen.add(r.index);
}
// A bad request comes back as the SDK's error with the HTTP status.
try {
  await co.rerank({ model, query: "", documents });
  fail("an empty query was accepted");
} catch (e) {
  if (e?.statusCode !== 400) fail(`empty query: ${e}`);
}
console.log(JSON.stringify(res.results));

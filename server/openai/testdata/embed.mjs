// Embed run of oengine's /v2/embed with Cohere's official npm SDK
// (cohere-ai), a client nobody here wrote: TestCohereEmbedSDK starts a
// server with an encoder and runs `node embed.mjs BASE MODEL LONGTEXT`.
// The SDK must send its request and parse the reply; the checks here are
// the contract of docs/api.md ("Embeddings"). It prints the vectors of
// the two texts, then the token count of the truncated long text, as JSON.
import { CohereClientV2 } from "cohere-ai";

const [base, model, long] = process.argv.slice(2);
const co = new CohereClientV2({ token: "unused", environment: base });
const texts = ["The capital of France is", "Once upon a time, there was a little girl named Lily."];
const fail = (msg, res) => {
  console.error(msg, JSON.stringify(res ?? null));
  process.exit(1);
};
const res = await co.embed({ model, texts, inputType: "search_document", embeddingTypes: ["float"] });
const vecs = res.embeddings?.float;
if (!Array.isArray(vecs) || vecs.length !== texts.length) fail("want one float vector per text", res);
for (const v of vecs) {
  const norm = Math.sqrt(v.reduce((s, x) => s + x * x, 0));
  if (!(Math.abs(norm - 1) < 1e-4)) fail(`vector of length ${norm}, want 1`, res);
}
if (!(res.meta?.billedUnits?.inputTokens > 0)) fail("no billed input tokens", res);
// A text over the context: cut by default (truncate END), refused with NONE.
const cut = await co.embed({ model, texts: [long], inputType: "search_query", embeddingTypes: ["float"] });
if (cut.embeddings?.float?.length !== 1) fail("the long text was not embedded", cut);
for (const [what, req] of [
  ["truncate NONE", { model, texts: [long], inputType: "search_query", embeddingTypes: ["float"], truncate: "NONE" }],
  ["an image input", { model, texts, inputType: "image", embeddingTypes: ["float"] }],
  ["int8 embeddings", { model, texts, inputType: "search_query", embeddingTypes: ["int8"] }],
]) {
  try {
    await co.embed(req);
    fail(`${what} was accepted`);
  } catch (e) {
    if (e?.statusCode !== 400) fail(`${what}: ${e}`);
  }
}
console.log(JSON.stringify(vecs));
console.log(JSON.stringify(cut.meta.billedUnits.inputTokens));

// Runs of oengine's text-embeddings-inference routes with Hugging Face's
// official JavaScript client (@huggingface/inference), a client nobody here
// wrote: TestTEISDK starts a server and runs `node tei.mjs BASE`. The
// client posts to /embed, / and /similarity as it posts to a TEI endpoint and
// checks the reply's shape; it prints the vectors, the similarities and an
// empty input's error message as JSON for the Go test to compare with the
// engine's own.
import { InferenceClient } from "@huggingface/inference";

const [base] = process.argv.slice(2);
const client = new InferenceClient();
const texts = ["Embeddings from a client nobody here wrote.", "A second input."];
const vectors = await client.featureExtraction({ endpointUrl: `${base}/embed`, inputs: texts });
// Given the base URL alone the client posts to /, as to a TEI server.
const root = await client.featureExtraction({ endpointUrl: base, inputs: texts });
const similarities = await client.sentenceSimilarity({
  endpointUrl: `${base}/similarity`,
  inputs: { source_sentence: texts[0], sentences: texts },
});
let refusal = "";
try {
  await client.featureExtraction({ endpointUrl: `${base}/embed`, inputs: [""] });
  console.error("an empty input was accepted");
  process.exit(1);
} catch (e) {
  refusal = String(e?.message ?? e);
}
console.log(JSON.stringify({ vectors, root, similarities, refusal }));

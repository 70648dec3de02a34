// Smoke run of oengine's OpenAI-compatible API with the official `openai`
// npm package. Usage: node smoke.mjs BASE_URL MODEL (BASE_URL ends in /v1).
// TestOpenAINodeSDK (server/openai) starts a server and runs it; it fails
// on the first unmet expectation with a message and exit status 1.
import OpenAI from "openai";

const [baseURL, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0 });

function expect(cond, what, got) {
	if (!cond) {
		console.error(`FAIL: ${what}: ${JSON.stringify(got)}`);
		process.exit(1);
	}
}

async function expectStatus(promise, status, code, what) {
	try {
		await promise;
	} catch (e) {
		expect(e instanceof OpenAI.APIError && e.status === status && e.code === code, what, {
			status: e.status,
			code: e.code,
			message: e.message,
		});
		return;
	}
	expect(false, what + " succeeded", null);
}

const models = await client.models.list();
const ids = models.data.map((m) => m.id);
expect(ids.includes(model), "models list", ids);

const prompt = "Once upon a time, in a land far away, there lived";
const c1 = await client.completions.create({ model, prompt, max_tokens: 8, temperature: 0, ignore_eos: true });
expect(c1.choices.length === 1 && c1.choices[0].text.length > 0 && c1.choices[0].finish_reason === "length", "completion", c1);
expect(c1.usage.completion_tokens === 8 && c1.usage.prompt_tokens > 0, "completion usage", c1.usage);

let streamed = "";
let streamUsage = null;
const cs = await client.completions.create({
	model, prompt, max_tokens: 8, temperature: 0, ignore_eos: true, stream: true, stream_options: { include_usage: true },
});
for await (const chunk of cs) {
	for (const ch of chunk.choices) streamed += ch.text;
	if (chunk.usage) streamUsage = chunk.usage;
}
expect(streamed === c1.choices[0].text, "streamed completion equals the whole one", { streamed, whole: c1.choices[0].text });
expect(streamUsage && streamUsage.completion_tokens === 8, "stream usage", streamUsage);

const long = "The quick brown fox jumps over the lazy dog. ".repeat(8);
await client.completions.create({ model, prompt: long, max_tokens: 1, temperature: 0 });
const again = await client.completions.create({ model, prompt: long, max_tokens: 1, temperature: 0 });
expect(again.usage.prompt_tokens_details?.cached_tokens >= 48, "cached tokens on a repeated prefix", again.usage);

const messages = [
	{ role: "system", content: "Be brief." },
	{ role: "user", content: "Tell me a story." },
];
const chat = await client.chat.completions.create({ model, messages, max_completion_tokens: 8, temperature: 0, ignore_eos: true });
const text = chat.choices[0].message.content;
expect(chat.choices[0].message.role === "assistant" && text.length > 0 && chat.choices[0].finish_reason === "length", "chat", chat);

let deltas = "";
const chatStream = await client.chat.completions.create({
	model, messages, max_completion_tokens: 8, temperature: 0, ignore_eos: true, stream: true,
});
for await (const chunk of chatStream) {
	for (const ch of chunk.choices) deltas += ch.delta.content ?? "";
}
expect(deltas === text, "streamed chat equals the whole one", { deltas, text });

const seeded = async (seed) =>
	(await client.chat.completions.create({ model, messages, max_completion_tokens: 6, temperature: 1, seed, n: 2, ignore_eos: true }))
		.choices.map((c) => c.message.content);
const a = await seeded(7);
const b = await seeded(7);
expect(a.length === 2 && JSON.stringify(a) === JSON.stringify(b), "n=2 with a seed reproduces", { a, b });

const lp = await client.chat.completions.create({
	model, messages, max_completion_tokens: 3, temperature: 0, logprobs: true, top_logprobs: 2, ignore_eos: true,
});
const entries = lp.choices[0].logprobs.content;
expect(entries.length === 3 && entries.every((e) => e.top_logprobs.length === 2 && e.logprob <= 0), "chat logprobs", entries);

const first = text.slice(0, Math.max(1, Math.floor(text.length / 2)));
const stop = text.slice(first.length, first.length + 2);
if (stop.length === 2 && !first.includes(stop)) {
	const stopped = await client.chat.completions.create({ model, messages, max_completion_tokens: 8, temperature: 0, stop: [stop], ignore_eos: true });
	expect(stopped.choices[0].message.content === first && stopped.choices[0].finish_reason === "stop", "stop", stopped.choices[0]);
}

const schema = {
	type: "object",
	properties: { n: { type: "integer", minimum: 0, maximum: 9 }, ok: { type: "boolean" } },
	required: ["n", "ok"],
	additionalProperties: false,
};
const rf = await client.chat.completions.create({
	model, messages, max_completion_tokens: 40, temperature: 1, seed: 3,
	response_format: { type: "json_schema", json_schema: { name: "r", schema, strict: true } },
});
const parsed = JSON.parse(rf.choices[0].message.content);
expect(
	Number.isInteger(parsed.n) && parsed.n >= 0 && parsed.n <= 9 && typeof parsed.ok === "boolean" &&
		Object.keys(parsed).length === 2 && rf.choices[0].finish_reason === "stop",
	"response_format json_schema", rf.choices[0],
);

// Responses API: the same conversation as chat gets the same text and
// token counts, whole and as the typed event stream.
const plain = await client.chat.completions.create({ model, messages, max_completion_tokens: 8, temperature: 0 });
const rsp = await client.responses.create({
	model, instructions: messages[0].content, input: messages[1].content, max_output_tokens: 8, temperature: 0,
});
expect(
	rsp.object === "response" && rsp.output_text === plain.choices[0].message.content &&
		rsp.usage.input_tokens === plain.usage.prompt_tokens && rsp.usage.output_tokens === plain.usage.completion_tokens &&
		rsp.status === (plain.choices[0].finish_reason === "length" ? "incomplete" : "completed"),
	"responses equals chat", { rsp, plain },
);
let rdeltas = "";
const rtypes = [];
let rfinal = null;
const rstream = await client.responses.create({
	model, instructions: messages[0].content, input: messages[1].content, max_output_tokens: 8, temperature: 0, stream: true,
});
for await (const ev of rstream) {
	expect(ev.sequence_number === rtypes.length, "event numbering", ev);
	rtypes.push(ev.type);
	if (ev.type === "response.output_text.delta") rdeltas += ev.delta;
	if (ev.type === "response.completed" || ev.type === "response.incomplete") rfinal = ev.response;
}
expect(rtypes[0] === "response.created" && rfinal && rdeltas === rsp.output_text && rfinal.status === rsp.status, "streamed response", { rtypes, rdeltas });
await expectStatus(client.responses.create({ model, input: "a", previous_response_id: "resp_x" }), 400, "unsupported_feature", "previous_response_id");

// Embeddings: the SDK asks for base64 unless told otherwise and decodes it
// itself; the float form must carry the same float32 values.
const inputs = ["The capital of France is", "Once upon a time"];
const eb = await client.embeddings.create({ model, input: inputs });
const ef = await client.embeddings.create({ model, input: inputs, encoding_format: "float" });
expect(eb.data.length === 2 && ef.data.length === 2 && eb.usage.prompt_tokens > 0 && eb.usage.total_tokens === eb.usage.prompt_tokens, "embeddings", eb.usage);
for (let i = 0; i < 2; i++) {
	const b = eb.data[i].embedding, f = ef.data[i].embedding;
	expect(eb.data[i].index === i && b.length === f.length && b.length > 0, "embedding shape", { index: eb.data[i].index, lengths: [b.length, f.length] });
	expect(b.every((x, j) => x === Math.fround(f[j])), "base64 and float embeddings agree", i);
	const norm = Math.sqrt(b.reduce((s, x) => s + x * x, 0));
	expect(Math.abs(norm - 1) < 1e-5, "unit-length embedding", norm);
}
expect(eb.data[0].embedding.some((x, j) => x !== eb.data[1].embedding[j]), "different inputs, different embeddings", null);
const e8 = await client.embeddings.create({ model, input: inputs[0], dimensions: 8 });
expect(e8.data[0].embedding.length === 8, "embedding dimensions", e8.data[0].embedding.length);
await expectStatus(client.embeddings.create({ model, input: "" }), 400, "invalid_request", "empty embedding input");

await expectStatus(client.chat.completions.create({ model: "no-such-model", messages }), 404, "model_not_found", "unknown model");
await expectStatus(client.chat.completions.create({ model, messages, temperature: -1 }), 400, "invalid_request", "invalid temperature");
await expectStatus(
	client.chat.completions.create({ model, messages, tools: [{ type: "function", function: { name: "f" } }] }),
	400, "unsupported_feature", "tools",
);

console.log("ok");

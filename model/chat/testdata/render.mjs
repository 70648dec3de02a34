// Renders every chat template in templates/ for every case of
// conversations.json with @huggingface/jinja (the reference renderer of
// Hugging Face's JavaScript libraries) and prints the results as JSON:
// { "<template file>": { "<case>": {"text": "..."} or {"error": "..."} } }.
//
// Regenerate expected.json (from the repository root):
//   (cd model/chat/testdata && npm ci && node render.mjs > expected.json)
// The Go test TestTemplatesMatchReference compares chat.Template with
// expected.json; TestReferenceScriptUpToDate re-runs this script.
//
// Messages map to template variables as model/chat does (docs/api.md, "Chat
// templates"): content is always a string ("" when null or absent), optional
// fields are present only when non-empty, and tool-call
// arguments given as a JSON object text are passed as that object.
import { readFileSync } from "node:fs";
import { Template } from "@huggingface/jinja";

const here = new URL(".", import.meta.url);
const spec = JSON.parse(readFileSync(new URL("conversations.json", here), "utf8"));

function templateMessage(m) {
	const out = { role: m.role };
	const calls = m.tool_calls ?? [];
	out.content = m.content ?? "";
	if (m.reasoning_content) out.reasoning_content = m.reasoning_content;
	if (m.name) out.name = m.name;
	if (m.tool_call_id) out.tool_call_id = m.tool_call_id;
	if (calls.length > 0) {
		out.tool_calls = calls.map((c) => {
			const call = {};
			if (c.id) call.id = c.id;
			call.type = "function";
			let args = c.function.arguments;
			try {
				const parsed = JSON.parse(args);
				if (parsed !== null && typeof parsed === "object" && !Array.isArray(parsed)) args = parsed;
			} catch {
				// not JSON: passed as the string
			}
			call.function = { name: c.function.name, arguments: args };
			return call;
		});
	}
	return out;
}

// @huggingface/jinja provides strftime_now (as Hugging Face's and
// llama.cpp's renderers do) from the current time: renders are made
// reproducible by fixing the clock to one day (the date_string of
// conversations.json); the Go test fixes chat.Template's clock to the same.
const RealDate = Date;
globalThis.Date = class extends RealDate {
	constructor(...args) {
		super(...(args.length ? args : [RealDate.UTC(2024, 6, 26, 12, 0, 0)]));
	}
	static now() {
		return RealDate.UTC(2024, 6, 26, 12, 0, 0);
	}
};

const result = {};
for (const [file, specials] of Object.entries(spec.templates)) {
	const source = readFileSync(new URL("templates/" + file, here), "utf8");
	const tmpl = new Template(source);
	result[file] = {};
	for (const c of spec.cases) {
		const vars = {
			...spec.common_kwargs,
			...(c.kwargs ?? {}),
			messages: c.messages.map(templateMessage),
			add_generation_prompt: c.add_generation_prompt,
			bos_token: specials.bos_token,
			eos_token: specials.eos_token,
		};
		if (c.tools) vars.tools = c.tools;
		try {
			result[file][c.name] = { text: tmpl.render(vars) };
		} catch (e) {
			result[file][c.name] = { error: String(e.message ?? e) };
		}
	}
}
process.stdout.write(JSON.stringify(result, null, 1) + "\n");

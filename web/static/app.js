// oengine console (docs/web.md). Plain ES module, no dependencies.
//
// A chat over one generation session: the session is opened over HTTP
// (POST /v1/sessions) and every turn is a streamed chat completion that
// continues it (the `session` extension field, APPEND). Completed thinking
// blocks can be translated through POST /session/{id}/generate, read with
// fetch (EventSource cannot POST). The API key, when the server needs one,
// lives in this module's memory only; the conversation (not the key, not
// the translations) is kept in sessionStorage so a refresh resumes it.
// For a reranker (a model with a classification head) a Rerank panel ranks
// documents against a query (POST /v1/rerank); for an encoder, which
// generates nothing, it replaces the chat.

const $ = (id) => document.getElementById(id);
const STORE = 'oengine.console.v1';

const state = {
  key: null,            // API key: memory only
  info: null,
  skewMs: 0,            // server clock - browser clock
  model: '',
  sid: '',              // session id ('' when none)
  session: null,        // last GenerationSession (protojson)
  messages: [],         // {id, role, content, reasoning}
  nextId: 1,
  chatAbort: null,
  // Completed translations, keyed by (language, message, content). Page
  // memory only: a refresh clears it.
  cache: new Map(),
  pop: null,            // the open popover's translation
};

// ---------- HTTP ----------

class HttpError extends Error {
  constructor(status, code, message, retryable) {
    super(message || `HTTP ${status}`);
    this.status = status; this.code = code || ''; this.retryable = !!retryable;
  }
}

function request(method, path, body, signal) {
  const headers = {};
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (state.key) headers['Authorization'] = 'Bearer ' + state.key;
  return fetch(path, { method, headers, signal, cache: 'no-store',
    body: body === undefined ? undefined : JSON.stringify(body) });
}

async function errorOf(resp) {
  let code = '', message = '';
  try {
    const b = await resp.json();
    code = b?.error?.code || ''; message = b?.error?.message || '';
  } catch { /* not JSON */ }
  const retryable = resp.status === 429 || resp.status === 503 || resp.headers.has('Retry-After');
  if (resp.status === 401) needKey(state.key ? 'The server refused the key.' : '');
  return new HttpError(resp.status, code, message, retryable);
}

async function json(method, path, body) {
  const resp = await request(method, path, body);
  if (!resp.ok) throw await errorOf(resp);
  return resp.json();
}

// sse yields the events of a text/event-stream body: {event, data, id}.
async function* sse(resp) {
  const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value.replace(/\r\n?/g, '\n');
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const raw = buf.slice(0, i);
      buf = buf.slice(i + 2);
      const ev = { event: 'message', data: '', id: '' };
      let has = false;
      for (const line of raw.split('\n')) {
        if (line === '' || line.startsWith(':')) continue; // keep-alive comments
        const c = line.indexOf(':');
        const field = c < 0 ? line : line.slice(0, c);
        let v = c < 0 ? '' : line.slice(c + 1);
        if (v.startsWith(' ')) v = v.slice(1);
        if (field === 'event') ev.event = v;
        else if (field === 'data') ev.data += (ev.data ? '\n' : '') + v;
        else if (field === 'id') ev.id = v;
        has = true;
      }
      if (has) yield ev;
    }
  }
}

// sessionGone: the session can serve no request any more (retrying is
// pointless; a new session is needed).
const sessionGone = (e) => e.status === 404 || e.status === 410 ||
  ['session_not_found', 'session_expired', 'session_closed'].includes(e.code);

// plain turns a route error into words a person can act on.
function plain(err) {
  const code = err.code || '';
  if (code === 'session_expired') return 'This session has expired: its lease ran out before it was renewed. Open a new session to continue.';
  if (code === 'session_closed') return 'This session was closed. Open a new session to continue.';
  if (code === 'session_not_found' || err.status === 404)
    return 'The server does not know this session (it ended long ago, or the server restarted). Open a new session.';
  if (code === 'payload_too_large' || err.status === 413)
    return 'This text is too long to send in one request (the translation route accepts up to 32 KiB).';
  if (code === 'overloaded' || err.status === 429)
    return 'The server is busy right now (its queue or memory budget is full). Try again in a moment.';
  if (code === 'draining' || err.status === 503)
    return 'The server is shutting down and takes no new work. Try again when it is back.';
  if (code === 'unauthenticated' || err.status === 401) return 'The API key is missing or wrong.';
  if (code === 'context_length_exceeded') return 'The text is too long for the model\'s context.';
  if (code === 'session_busy') return 'The session is busy with another turn. Wait for it to finish.';
  if (err.status === 0) return 'The server could not be reached.';
  return `The server answered ${err.status ? err.status + ' ' : ''}${code || 'an error'}: ${err.message}`;
}

// ---------- API key ----------

let keyWaiters = [];
function needKey(why) {
  const f = $('key-form');
  $('key-why').textContent = (why ? why + ' ' : '') +
    'This server needs an API key. It is kept in this page\'s memory only: a refresh forgets it.';
  if (f.hidden) { f.hidden = false; $('key-input').focus(); }
  return new Promise((resolve) => keyWaiters.push(resolve));
}
$('key-form').addEventListener('submit', (e) => {
  e.preventDefault();
  state.key = $('key-input').value.trim() || null;
  $('key-input').value = '';
  $('key-form').hidden = true;
  const w = keyWaiters; keyWaiters = [];
  w.forEach((r) => r());
  start();
});

// ---------- server info and load ----------

async function refreshInfo() {
  try {
    const info = await json('GET', '/web/api/info');
    state.info = info;
    state.skewMs = info.now_unix_ms - Date.now();
    const m = info.models[0];
    $('f-model').textContent = info.models.map((x) => x.name).join(', ');
    $('f-context').textContent = m ? `${m.context_len} tokens` : '–';
    $('f-version').textContent = info.version || '–';
    $('f-instance').textContent = info.instance_id;
    const l = info.load;
    $('l-running').textContent = l.running;
    $('l-waiting').textContent = l.waiting;
    $('l-kv').textContent = `${l.kv_pages_used} / ${l.kv_pages_total}` + (l.kv_pages_pinned ? ` (${l.kv_pages_pinned} pinned)` : '');
    $('l-kv-meter').value = l.kv_pages_total ? l.kv_pages_used / l.kv_pages_total : 0;
    $('l-sessions').textContent = l.live_sessions;
    fillModels(info);
    return true;
  } catch (e) {
    if (!(e instanceof HttpError && e.status === 401)) $('l-running').textContent = '?';
    return false;
  }
}

function fillModels(info) {
  fillRank(info);
  const sel = $('model-select');
  if (sel.options.length === 0) {
    for (const m of info.models.filter((x) => !x.auxiliary)) {
      for (const n of [m.name, ...m.aliases]) sel.add(new Option(n, n));
    }
    const m = info.models[0];
    if (m && m.default_lease_ms && !$('lease-input').value) $('lease-input').value = Math.round(m.default_lease_ms / 1000);
    if (m && m.max_lease_ms) $('lease-input').max = Math.round(m.max_lease_ms / 1000);
  }
  $('open-btn').disabled = !info.sessions;
  if (!info.sessions) sessionMsg('Generation sessions are not enabled on this server.', true);
}

// ---------- rerank ----------

function fillRank(info) {
  const models = info.models.filter((x) => !x.auxiliary);
  const rankers = models.filter((x) => x.rerank);
  const sel = $('rank-model');
  if (sel.options.length === 0) {
    for (const m of rankers) for (const n of [m.name, ...m.aliases]) sel.add(new Option(n, n));
  }
  $('rank-panel').hidden = rankers.length === 0;
  // Every model an encoder: no chat to offer.
  const encoders = models.length > 0 && models.every((x) => x.embeddings_only);
  $('encoder-msg').hidden = !encoders;
  document.querySelector('.session').hidden = encoders;
  document.querySelector('.chat').hidden = encoders;
}

function rankMsg(text, error) {
  const p = $('rank-msg');
  p.textContent = text || '';
  p.classList.toggle('error', !!error);
}

$('rank-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  const documents = $('rank-docs').value.split('\n').map((d) => d.trim()).filter((d) => d);
  const query = $('rank-query').value.trim();
  if (!query || documents.length === 0) { rankMsg('A query and at least one document are needed.', true); return; }
  $('rank-btn').disabled = true;
  rankMsg('Ranking…');
  try {
    const r = await json('POST', '/v1/rerank', { model: $('rank-model').value, query, documents, return_documents: true });
    const ol = $('rank-results');
    ol.replaceChildren();
    for (const res of r.results) {
      const li = document.createElement('li');
      li.dataset.index = res.index;
      const score = document.createElement('span');
      score.className = 'score';
      score.textContent = res.relevance_score.toFixed(4);
      const bar = document.createElement('meter');
      bar.min = 0; bar.max = 1; bar.value = res.relevance_score;
      bar.setAttribute('aria-label', 'relevance');
      const text = document.createElement('span');
      text.className = 'doc';
      text.textContent = res.document?.text ?? documents[res.index];
      li.append(score, bar, text);
      ol.append(li);
    }
    rankMsg(`${r.results.length} documents ranked (${r.usage.prompt_tokens} tokens).`);
  } catch (err) {
    rankMsg(plain(err), true);
  } finally {
    $('rank-btn').disabled = false;
  }
});

// ---------- session ----------

function save() {
  try {
    sessionStorage.setItem(STORE, JSON.stringify({ sid: state.sid, model: state.model,
      messages: state.messages, nextId: state.nextId }));
  } catch { /* storage full or off: the chat is just not resumable */ }
}

function sessionMsg(text, error) {
  const p = $('session-msg');
  p.textContent = text || '';
  p.classList.toggle('error', !!error);
}

const live = (s) => s && (s.state === 'GENERATION_SESSION_STATE_IDLE' || s.state === 'GENERATION_SESSION_STATE_RUNNING' ||
  s.state === 'GENERATION_SESSION_STATE_EVICTED');
const stateWord = (s) => (s?.state || '').replace('GENERATION_SESSION_STATE_', '').toLowerCase() || '–';

function showSession(s) {
  state.session = s;
  const open = !!state.sid;
  $('session-closed-view').hidden = open;
  $('session-open-view').hidden = !open;
  if (!open) { setComposer(false); return; }
  $('s-id').textContent = state.sid;
  $('s-state').textContent = stateWord(s);
  $('s-retained').textContent = s ? Number(s.retained_tokens) : '–';
  $('s-pinned').textContent = s ? Number(s.pinned_kv_blocks) : '–';
  const ok = live(s);
  $('renew-btn').hidden = !ok;
  $('close-btn').hidden = !ok;
  $('new-btn').hidden = ok;
  setComposer(ok && !state.chatAbort);
  tick();
}

function tick() {
  const s = state.session;
  const el = $('s-countdown');
  if (!s || !live(s)) { el.textContent = '–'; return; }
  if (s.state === 'GENERATION_SESSION_STATE_RUNNING') { el.textContent = 'paused while a turn runs'; return; }
  const left = Number(s.expires_at_unix_nanos) / 1e6 - (Date.now() + state.skewMs);
  if (left <= 0) {
    el.textContent = 'expired';
    if (!tick.checking) { tick.checking = true; refreshSession().finally(() => { tick.checking = false; }); }
    return;
  }
  const t = Math.ceil(left / 1000);
  el.textContent = t >= 3600 ? `${Math.floor(t / 3600)} h ${Math.floor(t % 3600 / 60)} min`
    : `${Math.floor(t / 60)}:${String(t % 60).padStart(2, '0')}`;
}

async function refreshSession() {
  if (!state.sid) return;
  try {
    showSession(await json('GET', `/v1/sessions/${encodeURIComponent(state.sid)}`));
  } catch (e) {
    if (e instanceof HttpError && e.status === 404) {
      showSession({ state: 'GENERATION_SESSION_STATE_UNKNOWN' });
      $('s-state').textContent = 'gone';
      sessionMsg(plain(e), true);
    }
  }
}

$('open-btn').addEventListener('click', async () => {
  const body = { model: $('model-select').value };
  const lease = Number($('lease-input').value);
  if (lease > 0) body.lease_ms = Math.round(lease * 1000);
  $('open-btn').disabled = true;
  try {
    const s = await json('POST', '/v1/sessions', body);
    state.sid = s.ref.session_id;
    state.model = s.model;
    state.messages = [];
    $('log').replaceChildren();
    save();
    sessionMsg('Session open. Its KV pages stay pinned while the lease runs.');
    showSession(s);
    $('prompt').focus();
  } catch (e) {
    sessionMsg(plain(e), true);
  } finally {
    $('open-btn').disabled = false;
  }
});

$('renew-btn').addEventListener('click', async () => {
  try {
    showSession(await json('PATCH', `/v1/sessions/${encodeURIComponent(state.sid)}`, {}));
    sessionMsg('Lease renewed.');
  } catch (e) { sessionMsg(plain(e), true); refreshSession(); }
});

$('close-btn').addEventListener('click', async () => {
  try {
    const r = await json('DELETE', `/v1/sessions/${encodeURIComponent(state.sid)}`);
    showSession(r.session);
    sessionMsg('Session closed; its pinned pages were released.');
  } catch (e) { sessionMsg(plain(e), true); }
});

$('new-btn').addEventListener('click', () => {
  closePopover();
  state.sid = ''; state.session = null; state.messages = [];
  $('log').replaceChildren();
  save();
  sessionMsg('');
  showSession(null);
  $('open-btn').focus();
});

// ---------- chat ----------

function setComposer(on) {
  $('prompt').disabled = !on;
  $('send-btn').disabled = !on;
}

function userTurn(text) {
  const li = document.createElement('li');
  li.className = 'turn user';
  li.textContent = text;
  $('log').append(li);
  return li;
}

// assistantTurn builds the element of an assistant message; the thinking
// block is created when reasoning arrives.
function assistantTurn(msg) {
  const li = document.createElement('li');
  li.className = 'turn assistant';
  li.dataset.msg = msg.id;
  const content = document.createElement('div');
  content.className = 'content';
  const meta = document.createElement('span');
  meta.className = 'meta';
  li.append(content, meta);
  $('log').append(li);
  return { li, content, meta, think: null };
}

function thinkBlock(turn, msg) {
  const box = document.createElement('div');
  box.className = 'think';
  box.dataset.state = 'streaming';
  const d = document.createElement('details');
  const sum = document.createElement('summary');
  sum.textContent = 'Thinking';
  const text = document.createElement('div');
  text.className = 'think-text';
  d.append(sum, text);
  box.append(d);
  turn.li.insertBefore(box, turn.content);
  turn.think = { box, sum, text, msg };
  return turn.think;
}

// completeThink marks a block complete and only then gives it its
// Translate action: a streaming block never has one.
function completeThink(t) {
  if (!t || t.box.dataset.state === 'complete') return;
  t.box.dataset.state = 'complete';
  const words = t.msg.reasoning.trim().split(/\s+/).filter(Boolean).length;
  t.sum.textContent = `Thoughts (${words} ${words === 1 ? 'word' : 'words'})`;
  const b = document.createElement('button');
  b.type = 'button';
  b.className = 'translate secondary';
  b.textContent = 'Translate';
  b.setAttribute('aria-label', 'Translate this thinking block');
  b.addEventListener('click', () => translate(t.msg, b));
  t.box.append(b);
}

function renderMessage(msg) {
  if (msg.role === 'user') { userTurn(msg.content); return; }
  const turn = assistantTurn(msg);
  if (msg.reasoning) {
    const t = thinkBlock(turn, msg);
    t.text.textContent = msg.reasoning;
    completeThink(t);
  }
  turn.content.textContent = msg.content;
  if (msg.meta) turn.meta.textContent = msg.meta;
}

$('prompt').addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) { e.preventDefault(); $('composer').requestSubmit(); }
});
$('composer').addEventListener('submit', (e) => { e.preventDefault(); send(); });
$('stop-btn').addEventListener('click', () => state.chatAbort?.abort());

async function send() {
  const text = $('prompt').value.trim();
  if (!text || state.chatAbort || !state.sid) return;
  $('prompt').value = '';
  const user = { id: state.nextId++, role: 'user', content: text };
  state.messages.push(user);
  userTurn(text);
  const msg = { id: state.nextId++, role: 'assistant', content: '', reasoning: '' };
  const turn = assistantTurn(msg);
  const abort = new AbortController();
  state.chatAbort = abort;
  $('log').setAttribute('aria-busy', 'true'); // screen readers read the turn once complete
  setComposer(false);
  $('stop-btn').hidden = false;
  $('send-btn').hidden = true;
  const history = state.messages.map((m) => ({ role: m.role, content: m.content }));
  let ok = false;
  try {
    const resp = await request('POST', '/v1/chat/completions', {
      model: state.model, messages: history, stream: true, stream_options: { include_usage: true },
      session: { id: state.sid, mode: 'append' },
    }, abort.signal);
    if (!resp.ok) throw await errorOf(resp);
    for await (const ev of sse(resp)) {
      if (ev.data === '[DONE]') break;
      const chunk = JSON.parse(ev.data);
      if (chunk.error) throw new HttpError(0, chunk.error.code, chunk.error.message, false);
      const delta = chunk.choices?.[0]?.delta;
      if (delta?.reasoning_content) {
        const t = turn.think || thinkBlock(turn, msg);
        msg.reasoning += delta.reasoning_content;
        t.text.textContent = msg.reasoning;
      }
      if (delta?.content) {
        completeThink(turn.think); // content follows a closed block
        msg.content += delta.content;
        turn.content.textContent = msg.content;
      }
      if (chunk.usage) {
        const u = chunk.usage;
        const cached = u.prompt_tokens_details?.cached_tokens;
        msg.meta = `${u.prompt_tokens} prompt tokens${cached ? ` (${cached} from the session's pinned KV)` : ''} · ${u.completion_tokens} generated`;
        turn.meta.textContent = msg.meta;
      }
    }
    ok = true;
  } catch (e) {
    if (e.name === 'AbortError') {
      msg.meta = 'Stopped. The session keeps what it had before this turn.';
    } else {
      msg.meta = plain(e instanceof HttpError ? e : new HttpError(0, '', String(e)));
      turn.li.classList.add('error');
    }
    turn.meta.textContent = msg.meta;
  } finally {
    completeThink(turn.think);
    $('log').removeAttribute('aria-busy');
    state.chatAbort = null;
    $('stop-btn').hidden = true;
    $('send-btn').hidden = false;
  }
  if (ok) {
    state.messages.push(msg);
  } else {
    // A cancelled or failed turn retains nothing: forget the user message
    // too, so the conversation matches the session.
    state.messages.pop();
  }
  save();
  await refreshSession();
  refreshInfo();
  if (!$('prompt').disabled) $('prompt').focus();
}

// ---------- translation ----------

function translationPrompt(lang, text) {
  return `Translate the following text into ${lang}. Reply with the translation only.\n\n${text}`;
}

function translate(msg, button) {
  const lang = $('lang-select').value;
  const content = msg.reasoning;
  const key = JSON.stringify([lang, msg.id, content]);
  closePopover();
  const t = { key, lang, content, msgId: msg.id, button, abort: null, text: '' };
  state.pop = t;
  $('pop-h').textContent = `Translation into ${lang}`;
  $('popover').hidden = false;
  $('pop-close').focus();
  const hit = state.cache.get(key);
  if (hit) {
    popRender({ status: 'From this page\'s memory (no request).', text: hit.text, counts: hit, again: true });
    return;
  }
  run(t);
}

function popRender({ status = '', busy = false, text = '', counts = null, error = '', cancel = false, retry = false, again = false }) {
  const st = $('pop-status');
  st.textContent = status;
  st.classList.toggle('busy', busy);
  $('pop-text').textContent = text;
  const c = $('pop-counts');
  c.hidden = !counts;
  if (counts) c.textContent = `Input tokens: ${counts.input_tokens} · Output tokens: ${counts.output_tokens}`;
  $('pop-error').hidden = !error;
  $('pop-error').textContent = error;
  $('pop-cancel').hidden = !cancel;
  $('pop-retry').hidden = !retry;
  $('pop-again').hidden = !again;
}

async function run(t) {
  t.abort = new AbortController();
  t.text = '';
  const mine = () => state.pop === t;
  popRender({ status: 'Sending…', busy: true, cancel: true });
  let ended = false;
  try {
    const resp = await request('POST', `/session/${encodeURIComponent(state.sid)}/generate`,
      { prompt: translationPrompt(t.lang, t.content) }, t.abort.signal);
    if (!resp.ok) throw await errorOf(resp);
    for await (const ev of sse(resp)) {
      if (!mine()) break;
      const d = ev.data ? JSON.parse(ev.data) : {};
      switch (ev.event) {
        case 'started':
          popRender({ status: 'Started…', busy: true, cancel: true });
          break;
        case 'thinking':
          popRender({ status: 'The model is thinking…', busy: true, text: t.text, cancel: true });
          break;
        case 'delta':
          t.text += d.text;
          popRender({ status: 'Translating…', busy: true, text: t.text, cancel: true });
          break;
        case 'done': {
          ended = true;
          const counts = { input_tokens: d.input_tokens, output_tokens: d.output_tokens };
          const words = { stop: 'Done.', length: 'Stopped at the output limit.', cancelled: 'Cancelled by the server.' };
          if (d.finish_reason !== 'cancelled') state.cache.set(t.key, { text: t.text, ...counts });
          popRender({ status: words[d.finish_reason] || 'Done.', text: t.text, counts, again: true });
          break;
        }
        case 'error': {
          ended = true;
          const e = new HttpError(0, d.code, d.message, d.retryable);
          popRender({ status: '', text: t.text, error: plain(e), retry: e.retryable, again: !e.retryable && !sessionGone(e) });
          break;
        }
      }
    }
    if (!ended && mine()) popRender({ status: 'The stream ended early.', text: t.text, retry: true, again: true });
  } catch (e) {
    if (!mine()) return;
    if (e.name === 'AbortError') {
      popRender({ status: 'Cancelled. Nothing was kept.', text: t.text, again: true });
    } else {
      const err = e instanceof HttpError ? e : new HttpError(0, '', String(e), true);
      popRender({ error: plain(err), retry: err.retryable, again: !err.retryable && !sessionGone(err) });
      if (sessionGone(err)) refreshSession();
    }
  } finally {
    t.abort = null;
    refreshInfo();
  }
}

function closePopover() {
  const t = state.pop;
  if (!t) return;
  state.pop = null;
  t.abort?.abort(); // closing cancels a translation in flight
  $('popover').hidden = true;
  if (t.button?.isConnected) t.button.focus();
}

$('pop-close').addEventListener('click', closePopover);
$('pop-cancel').addEventListener('click', () => state.pop?.abort?.abort());
$('pop-retry').addEventListener('click', () => { if (state.pop && !state.pop.abort) run(state.pop); });
$('pop-again').addEventListener('click', () => {
  const t = state.pop;
  if (!t || t.abort) return;
  state.cache.delete(t.key);
  run(t);
});
document.addEventListener('keydown', (e) => {
  if (e.key === 'Escape' && !$('popover').hidden) closePopover();
});

// ---------- start ----------

let timers = [];
async function start() {
  timers.forEach(clearInterval);
  timers = [];
  if (!(await refreshInfo())) {
    if (!$('key-form').hidden) return; // waiting for the key
  }
  timers.push(setInterval(refreshInfo, 2000), setInterval(tick, 1000), setInterval(refreshSession, 10000));
  if (state.sid && state.session === null) await refreshSession();
}

function restore() {
  try {
    const saved = JSON.parse(sessionStorage.getItem(STORE) || 'null');
    if (saved && saved.sid) {
      state.sid = saved.sid; state.model = saved.model;
      state.messages = saved.messages || []; state.nextId = saved.nextId || 1;
      state.messages.forEach(renderMessage);
    }
  } catch { /* a bad entry: start empty */ }
  showSession(null);
}

restore();
start();

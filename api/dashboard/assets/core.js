// What every part of the dashboard shares: the API client (the token from
// sessionStorage, sent as Authorization: Bearer), who the token is, the DOM
// and formatting helpers, and the page's own confirmation dialog.

export const TOKEN_KEY = 'prescient.token';

export const $ = (sel) => document.querySelector(sel);

// ---- the API ----------------------------------------------------------------

export class APIError extends Error {
  constructor(status, code, message, path) {
    super(message);
    this.status = status; // 0 for a network error, -1 for the page's own
    this.code = code;
    this.path = path;
  }
  // describe says what went wrong in words, with the status and the server's message.
  describe() {
    if (this.status === 0) return `network error: cannot reach the API (${this.path}): ${this.message}`;
    if (this.status < 0) return `${this.path}: ${this.message}`;
    const what = { 400: 'bad request', 401: 'unauthorized', 403: 'forbidden', 404: 'not found', 409: 'conflict',
      413: 'too large', 429: 'too many requests', 500: 'server error', 502: 'bad gateway', 503: 'unavailable' }[this.status] || 'error';
    return `${this.status} ${what} (${this.path}): ${this.message}`;
  }
}

// describeError says what any error is, ours or not.
export function describeError(err) {
  return err && typeof err.describe === 'function' ? err.describe() : String(err && err.message ? err.message : err);
}

// api calls the JSON API and answers the decoded body, or throws an
// APIError. A 401 ends the session (hooks.sessionEnded) unless opts.login
// says the token is being tried.
export async function api(method, path, body, opts) {
  const headers = { Accept: 'application/json' };
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = 'Bearer ' + token;
  const init = { method, headers, cache: 'no-store' };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let resp;
  try {
    resp = await fetch(path, init);
  } catch (e) {
    throw new APIError(0, 'network', e.message || String(e), `${method} ${path}`);
  }
  const text = await resp.text();
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch (e) {
      if (resp.ok) throw new APIError(resp.status, 'bad_response', 'the answer is not JSON: ' + text.slice(0, 120), `${method} ${path}`);
    }
  }
  if (!resp.ok) {
    const err = data && data.error ? data.error : { code: 'http_' + resp.status, message: text.slice(0, 200) || resp.statusText };
    const e = new APIError(resp.status, err.code, err.message, `${method} ${path}`);
    if (e.status === 401 && !(opts && opts.login)) hooks.sessionEnded(e);
    throw e;
  }
  return data;
}

// list takes a listing's array whether the API wraps it in an object or not.
export function list(data, key) {
  if (Array.isArray(data)) return data;
  if (data && Array.isArray(data[key])) return data[key];
  return [];
}

// query builds a query string from the entries whose value is not empty.
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  const s = q.toString();
  return s ? '?' + s : '';
}

// hooks are set by the page: a 401 anywhere ends the session; a change
// (a cancel, a mode switch) asks for a refresh.
export const hooks = { sessionEnded: () => {}, refresh: () => {} };

// ---- who the token is (GET /v1/whoami) ----------------------------------------

export const session = { identity: null };

export function isAdmin() {
  return !!session.identity && session.identity.role === 'admin';
}

// ---- DOM and formatting ---------------------------------------------------------

export function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k.startsWith('data-') || k.startsWith('aria-')) e.setAttribute(k, String(v));
    else if (k in e) e[k] = v;
    else e.setAttribute(k, String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    e.appendChild(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
  }
  return e;
}

// fill replaces parent's children with children, flattened, leaving out
// null, undefined and false (replaceChildren would print them as text).
export function fill(parent, ...children) {
  parent.replaceChildren(...children.flat(Infinity).filter((c) => c !== undefined && c !== null && c !== false));
}

export function table(headers, rows, attrs) {
  return el('table', attrs,
    el('thead', {}, el('tr', {}, headers.map((h) => el('th', {}, h)))),
    el('tbody', {}, rows));
}

export function fmtDuration(s) {
  if (s === undefined || s === null || !Number.isFinite(s)) return '–';
  const a = Math.abs(s);
  if (a < 120) return `${s.toFixed(0)} s`;
  if (a < 7200) return `${(s / 60).toFixed(1)} min`;
  if (a < 172800) return `${(s / 3600).toFixed(1)} h`;
  return `${(s / 86400).toFixed(1)} d`;
}

// fmtDelta is a signed duration: "+12.0 min", "−3 s", "no change".
export function fmtDelta(s) {
  if (s === undefined || s === null || !Number.isFinite(s)) return '–';
  if (Math.abs(s) < 0.5) return 'no change';
  return (s > 0 ? '+' : '−') + fmtDuration(Math.abs(s));
}

export function fmtTime(t) {
  if (!t) return '–';
  const d = new Date(t);
  if (Number.isNaN(d.getTime())) return String(t);
  return d.toISOString().replace('T', ' ').slice(0, 19) + 'Z';
}

// fmtDate is a time to the minute, or '–' for none (Go's zero time included).
export function fmtDate(t) {
  const d = t ? new Date(t) : null;
  if (!d || Number.isNaN(d.getTime()) || d.getUTCFullYear() < 1971) return '–';
  return d.toISOString().replace('T', ' ').slice(0, 16) + 'Z';
}

export function fmtNum(v, digits) {
  return Number.isFinite(v) ? v.toFixed(digits === undefined ? 1 : digits) : '–';
}

export function fmtBytes(b) {
  if (!Number.isFinite(b)) return '–';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (b >= 1024 && i < units.length - 1) { b /= 1024; i++; }
  return `${b.toFixed(i === 0 ? 0 : 1)} ${units[i]}`;
}

export function fmtForecast(f) {
  if (!f) return '–';
  return `P50 ${fmtDuration(f.duration_p50_s)} · P90 ${fmtDuration(f.duration_p90_s)}` +
    (f.memory_p90_bytes ? ` · mem P90 ${fmtBytes(f.memory_p90_bytes)}` : '') +
    (f.memory_p90_refined_bytes ? ` (refined ${fmtBytes(f.memory_p90_refined_bytes)})` : '');
}

export function labelsOf(labels) {
  const keys = Object.keys(labels || {}).sort();
  if (keys.length === 0) return null;
  return el('div', { class: 'labels' }, keys.map((k) => el('span', { class: 'label' }, `${k}=${labels[k]}`)));
}

// parseLabels reads "k=v, k2=v2"; an error names the field and the bad part.
export function parseLabels(s, field) {
  const out = {};
  for (const part of s.split(',').map((p) => p.trim()).filter(Boolean)) {
    const i = part.indexOf('=');
    if (i <= 0) throw new Error(`${field || 'labels'}: "${part}" is not key=value`);
    out[part.slice(0, i).trim()] = part.slice(i + 1).trim();
  }
  return out;
}

export function showSectionError(key, err) {
  const p = document.querySelector(`.section-error[data-for="${key}"]`);
  if (!p) return;
  p.textContent = err ? describeError(err) : '';
  p.hidden = !err;
}

// ---- the confirmation dialog ------------------------------------------------------

let pending = null; // resolves the question the dialog asks now

// answer closes the dialog and resolves its question.
function answer(yes) {
  const resolve = pending;
  pending = null;
  const d = $('#confirm-dialog');
  if (d.open) d.close();
  if (resolve) resolve(yes);
}

// setupConfirm wires the dialog once: its buttons and Escape answer; a
// close by anything else (the session ending) answers no. A close event
// that arrives after the dialog opened again belongs to the question
// before and is ignored.
export function setupConfirm() {
  const d = $('#confirm-dialog');
  $('#confirm-ok').addEventListener('click', () => answer(true));
  $('#confirm-cancel').addEventListener('click', () => answer(false));
  d.addEventListener('cancel', (ev) => { ev.preventDefault(); answer(false); });
  d.addEventListener('close', () => { if (!d.open) answer(false); });
}

// confirmAction asks in the page's own modal dialog (#confirm-dialog) and
// resolves true only when the person confirms; Escape or "Keep" resolve
// false. window.confirm would block the page and cannot be styled or
// driven by the browser tests.
export function confirmAction({ title, message, confirmLabel, keepLabel, danger }) {
  if (pending) answer(false);
  $('#confirm-title').textContent = title;
  $('#confirm-message').textContent = message;
  const ok = $('#confirm-ok');
  ok.textContent = confirmLabel || 'Confirm';
  ok.classList.toggle('danger', !!danger);
  $('#confirm-cancel').textContent = keepLabel || 'Keep as it is';
  return new Promise((resolve) => {
    pending = resolve;
    $('#confirm-dialog').showModal();
    $('#confirm-cancel').focus(); // the safe choice is the default
  });
}

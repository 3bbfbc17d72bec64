"""The stylesheet and script inlined into every `vfgym view` report.

Kept apart from the HTML builder so that module stays about structure. Both are
inlined: the report is one file that opens anywhere, offline, with no external URL.
"""

from __future__ import annotations

CSS = """
:root { --fg: #1d232a; --muted: #5f6b76; --line: #d9dee3; --bg: #f6f7f9; --card: #fff;
  --ok: #1f7a3f; --bad: #a3262a; --warn: #8a5a00; --accent: #2958a8; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif;
  color: var(--fg); background: var(--bg); }
main { max-width: 1100px; margin: 0 auto; padding: 24px 20px 60px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 28px 0 10px; }
.meta { color: var(--muted); margin: 0; word-break: break-all; }
h1, summary, td, th, .kv, .note, .toolcall .name, .msg .role { overflow-wrap: anywhere; }
table { max-width: 100%; }
.cards { display: flex; flex-wrap: wrap; gap: 10px; margin-top: 16px; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 8px;
  padding: 10px 14px; min-width: 130px; }
.card .label { color: var(--muted); font-size: 12px; text-transform: uppercase; }
.card .value { font-size: 20px; font-weight: 600; }
.card.bad .value { color: var(--bad); }
table { border-collapse: collapse; background: var(--card); border: 1px solid var(--line); }
th, td { padding: 4px 12px; border-bottom: 1px solid var(--line); text-align: right; }
th:first-child, td:first-child { text-align: left; }
th { font-weight: 600; color: var(--muted); }
.tables { display: flex; flex-wrap: wrap; gap: 20px; align-items: flex-start; margin-top: 16px; }
.errors li { color: var(--bad); margin-bottom: 4px; }
svg.hist { background: var(--card); border: 1px solid var(--line); border-radius: 8px; }
svg.hist rect.bar { fill: var(--accent); }
svg.hist text { font-size: 11px; fill: var(--muted); }
.controls { display: flex; flex-wrap: wrap; gap: 8px; align-items: center; margin-bottom: 12px; }
.controls button { border: 1px solid var(--line); background: var(--card); border-radius: 6px;
  padding: 4px 10px; cursor: pointer; font: inherit; }
.controls button.active { background: var(--accent); color: #fff; border-color: var(--accent); }
.controls input { padding: 4px 8px; border: 1px solid var(--line); border-radius: 6px;
  font: inherit; min-width: 220px; }
#shown { color: var(--muted); }
details.rollout { background: var(--card); border: 1px solid var(--line);
  border-left: 4px solid var(--line); border-radius: 6px; margin-bottom: 8px; }
details.rollout.passed { border-left-color: var(--ok); }
details.rollout.failed { border-left-color: var(--warn); }
details.rollout.errored { border-left-color: var(--bad); background: #fff6f6; }
details.rollout > summary { cursor: pointer; padding: 8px 12px; }
details.rollout > summary .reward { font-weight: 600; }
.body { padding: 4px 14px 14px; }
.error { color: var(--bad); background: #fde8e8; border: 1px solid #f3b9b9; border-radius: 6px;
  padding: 8px 10px; margin: 6px 0; white-space: pre-wrap; word-break: break-word; }
.msg { border: 1px solid var(--line); border-radius: 6px; margin: 8px 0; overflow: hidden; }
.msg .role { font-size: 12px; font-weight: 600; padding: 3px 10px; background: #eef1f4;
  color: var(--muted); }
.msg.assistant .role { background: #e7eefb; color: var(--accent); }
.msg.tool .role { background: #f3ecdc; color: var(--warn); }
.msg.system .role { background: #ececec; }
pre { margin: 0; padding: 8px 10px; white-space: pre-wrap; word-break: break-word;
  font: 12.5px/1.45 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
.toolcall { border-top: 1px dashed var(--line); }
.toolcall .name { font-weight: 600; padding: 6px 10px 0; display: block; font-size: 12px; }
.kv { color: var(--muted); margin: 4px 0; }
.kv b { color: var(--fg); font-weight: 600; }
.note { color: var(--muted); font-style: italic; }
"""

JS = """
(function () {
  var items = Array.prototype.slice.call(document.querySelectorAll('details.rollout'));
  var buttons = Array.prototype.slice.call(document.querySelectorAll('[data-filter]'));
  var search = document.getElementById('search');
  var shown = document.getElementById('shown');
  var state = { filter: 'all', query: '' };
  function apply() {
    var n = 0;
    items.forEach(function (el) {
      var ok = (state.filter === 'all' || el.dataset.status === state.filter) &&
        (!state.query || el.textContent.toLowerCase().indexOf(state.query) >= 0);
      el.hidden = !ok;
      if (ok) { n += 1; }
    });
    buttons.forEach(function (b) {
      b.classList.toggle('active', b.dataset.filter === state.filter);
    });
    shown.textContent = n + ' of ' + items.length + ' rollouts shown';
  }
  buttons.forEach(function (b) {
    b.addEventListener('click', function () {
      state.filter = b.dataset.filter;
      history.replaceState(null, '', '#filter=' + state.filter);
      apply();
    });
  });
  search.addEventListener('input', function () {
    state.query = search.value.trim().toLowerCase();
    apply();
  });
  document.getElementById('expand').addEventListener('click', function () {
    items.forEach(function (el) { if (!el.hidden) { el.open = true; } });
  });
  document.getElementById('collapse').addEventListener('click', function () {
    items.forEach(function (el) { el.open = false; });
  });
  // A mangled link (a stray '%') must not stop the page: the fragment is then ignored.
  var hash = '';
  try { hash = decodeURIComponent(location.hash.replace(/^#/, '')); } catch (e) { hash = ''; }
  var m = /^filter=(all|passed|failed|errored)$/.exec(hash);
  if (m) { state.filter = m[1]; }
  var target = /^rollout-\\d+$/.test(hash) ? document.getElementById(hash) : null;
  if (target) { target.open = true; }
  apply();
  document.body.dataset.ready = 'yes';
})();
"""

"""`vfgym view`: one self-contained HTML report of an evaluation.

Everything is inline (CSS, script, the histogram as SVG), so the file can be
mailed, archived or opened offline. Every string taken from the results is
HTML-escaped: model output is untrusted text, and a report must never run what
a model wrote.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

from vfgym.cli._support import EXIT_USAGE, CommandError
from vfgym.results._report_assets import CSS, JS
from vfgym.results.jsonl import METADATA_FILE, RESULTS_FILE, redact_secrets
from vfgym.results.report_input import MAX_DEPTH, Tamer, is_marker, read_run
from vfgym.results.summary import (
    RunSummary,
    error_text,
    histogram,
    latest_records,
    metric_counts_differ,
    summarize_records,
)

#: Longer message contents are cut in the report (the JSONL keeps them whole).
MAX_CONTENT_CHARS = 20_000
#: Longer error messages (a server's whole HTML error page, say) are cut too.
MAX_ERROR_CHARS = 2_000
#: Longer names (tools, call ids, metrics, stop reasons, task, environment, model:
#: model-written or hand-edited like any text) are cut too.
MAX_NAME_CHARS = 200
#: Longer facts in the line under the title (arguments, base URL) are cut too.
MAX_FACT_CHARS = 600
#: Kinds of error listed at the top; the rest are counted.
MAX_ERROR_KINDS = 10
_SURROGATE = re.compile("[\ud800-\udfff]")


def _e(value: Any) -> str:
    return escape("" if value is None else str(value), quote=True)


def _num(value: Any, digits: int = 3) -> str:
    if is_marker(value):  # a number too large for a float: said, not shown as "-"
        return f'<span class="note">{_e(value)}</span>'
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return f"{value:.{digits}f}"
    return "-"


def _json_text(value: Any) -> str:
    """A field that is not text, shown as JSON (as the results file holds it)."""
    return json.dumps(value, ensure_ascii=False, default=str)


def _clip(text: str, limit: int = MAX_CONTENT_CHARS) -> str:
    if len(text) <= limit:
        return _e(text)
    cut = len(text) - limit
    return _e(text[:limit]) + f'<span class="note"> … {cut} more characters</span>'


def _name(value: Any) -> str:
    """A name (metric, stop reason, task, ...) as HTML, cut with a note past MAX_NAME_CHARS."""
    return _clip("" if value is None else str(value), MAX_NAME_CHARS)


def _plain_cut(value: Any, limit: int = MAX_NAME_CHARS) -> str:
    """`value` as text of at most `limit` characters (for the page title: no markup there)."""
    text = "" if value is None else str(value)
    return text if len(text) <= limit else text[:limit] + "…"


def rollout_status(record: Mapping[str, Any], threshold: float) -> str:
    """`errored`, `passed` (reward reached the threshold) or `failed`."""
    if record.get("error"):
        return "errored"
    reward = record.get("reward")
    return "passed" if isinstance(reward, int | float) and reward >= threshold else "failed"


# ----------------------------------------------------------------- summary


def _card(label: str, value: str, bad: bool = False) -> str:
    cls = "card bad" if bad else "card"
    return (
        f'<div class="{cls}"><div class="label">{_e(label)}</div>'
        f'<div class="value">{_e(value)}</div></div>'
    )


def _duration_text(summary: RunSummary) -> str:
    if summary.duration_s is None:
        return "-"
    if summary.resumed_rollouts:  # the last session's time, not the whole run's
        return f"{summary.duration_s:.2f} s (last session)"
    return f"{summary.duration_s:.2f} s"


def _summary_html(summary: RunSummary) -> str:
    r = summary.reward
    reward = f"{r.mean:.3f} ± {r.std:.3f}" if r is not None else "none"
    cards = [
        _card("mean reward", reward),
        _card("rollouts", str(summary.num_rollouts)),
        _card("errored", str(summary.num_errored), bad=summary.num_errored > 0),
        _card("truncated", str(summary.num_truncated)),
        _card("completion tokens", str(summary.completion_tokens)),
        _card("time", _duration_text(summary)),
    ]
    parts = [f'<div class="cards" id="cards">{"".join(cards)}</div>', '<div class="tables">']
    if summary.metrics:
        counted = metric_counts_differ(summary)  # n only when some metric has fewer values
        rows = "".join(
            f"<tr><td>{_name(name)}</td><td>{_num(s.mean)}</td><td>{_num(s.std)}</td>"
            f"<td>{_num(s.min)}</td><td>{_num(s.max)}</td>"
            f"{f'<td>{s.n}</td>' if counted else ''}</tr>"
            for name, s in summary.metrics.items()
        )
        parts.append(
            '<table id="metrics"><thead><tr><th>metric</th><th>mean</th><th>std</th>'
            f"<th>min</th><th>max</th>{'<th>n</th>' if counted else ''}</tr></thead>"
            f"<tbody>{rows}</tbody></table>"
        )
    if summary.pass_at_k:
        rows = "".join(
            f"<tr><td>pass@{k}</td><td>{_num(v)}</td></tr>" for k, v in summary.pass_at_k.items()
        )
        parts.append(
            f'<table id="pass-at-k"><thead><tr><th>reward &gt;= {summary.pass_threshold:g}</th>'
            f"<th>estimate</th></tr></thead><tbody>{rows}</tbody></table>"
        )
    if summary.stop_reasons:
        rows = "".join(
            f"<tr><td>{_name(k)}</td><td>{v}</td></tr>" for k, v in summary.stop_reasons.items()
        )
        parts.append(
            '<table id="stop-reasons"><thead><tr><th>stop reason</th><th>rollouts</th></tr>'
            f"</thead><tbody>{rows}</tbody></table>"
        )
    parts.append("</div>")
    if summary.errors:
        items = "".join(
            f"<li>{n} &times; {_clip(message, MAX_ERROR_CHARS)}</li>"
            for message, n in summary.errors[:MAX_ERROR_KINDS]
        )
        rest = summary.errors[MAX_ERROR_KINDS:]
        if rest:  # counted, so a short list is not read as all that went wrong
            more = sum(n for _, n in rest)
            items += (
                f'<li class="note">… and {len(rest)} more kinds of error '
                f"({more} rollout{'s' if more != 1 else ''})</li>"
            )
        parts.append(f'<h2>Errors</h2><ul class="errors" id="error-list">{items}</ul>')
    return "".join(parts)


def histogram_svg(rewards: list[Any], bins: int = 10) -> str:
    """The reward distribution as an inline SVG bar chart."""
    counts = histogram(rewards, bins)
    width, height, pad_l, pad_b, pad_t = 640, 220, 40, 34, 14
    plot_w, plot_h = width - pad_l - 12, height - pad_b - pad_t
    top = max((c for _, _, c in counts), default=0) or 1
    bar_w = plot_w / len(counts)
    shapes = []
    for i, (low, high, count) in enumerate(counts):
        h = plot_h * count / top
        x = pad_l + i * bar_w
        y = pad_t + plot_h - h
        shapes.append(
            f'<rect class="bar" x="{x + 1:.1f}" y="{y:.1f}" width="{bar_w - 2:.1f}" '
            f'height="{h:.1f}" data-count="{count}"><title>{low:.2f} to {high:.2f}: {count} '
            f"rollout{'s' if count != 1 else ''}</title></rect>"
        )
        if count:
            shapes.append(
                f'<text x="{x + bar_w / 2:.1f}" y="{y - 3:.1f}" text-anchor="middle">{count}</text>'
            )
    for i in range(0, len(counts) + 1, max(1, len(counts) // 5)):
        edge = counts[0][0] + i * (counts[0][1] - counts[0][0])
        shapes.append(
            f'<text x="{pad_l + i * bar_w:.1f}" y="{height - pad_b + 16}" '
            f'text-anchor="middle">{edge:.2f}</text>'
        )
    axis_y = pad_t + plot_h
    shapes.append(
        f'<line x1="{pad_l}" y1="{axis_y}" x2="{width - 12}" y2="{axis_y}" stroke="#999"/>'
        f'<text x="{pad_l - 6}" y="{pad_t + 4}" text-anchor="end">{top}</text>'
        f'<text x="{pad_l - 6}" y="{axis_y}" text-anchor="end">0</text>'
        f'<text x="{pad_l + plot_w / 2:.0f}" y="{height - 4}" text-anchor="middle">reward</text>'
    )
    return (
        f'<svg class="hist" id="histogram" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="reward histogram">{"".join(shapes)}</svg>'
    )


# ------------------------------------------------------------- conversations


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        texts = []
        for part in content:
            if isinstance(part, Mapping) and part.get("type") == "text":
                text = part.get("text")
                texts.append("" if text is None else str(text))
            else:
                texts.append(_json_text(part)[:500])
        return "\n".join(texts)
    return _json_text(content)


def _pretty_arguments(arguments: Any) -> str:
    """The model's tool arguments, indented when they are JSON the parser takes.

    Anything else is shown as the model sent it: malformed JSON is worth seeing, and so
    is JSON the parser refuses (nesting past its recursion limit, an integer past
    Python's digit limit), which must not stop the report.
    """
    if isinstance(arguments, str):
        try:
            return json.dumps(json.loads(arguments), indent=2, ensure_ascii=False)
        except (ValueError, RecursionError):  # JSONDecodeError is a ValueError
            return arguments
    return json.dumps(arguments, indent=2, ensure_ascii=False, default=str)


def _tool_call_html(call: Any, tool_names: dict[str, str]) -> str:
    """One tool call; a call of another shape than OpenAI's is shown as its JSON."""
    function = call.get("function") if isinstance(call, Mapping) else None
    if not isinstance(function, Mapping):
        return (
            '<div class="toolcall"><span class="name">→ ?</span>'
            f"<pre>{_clip(_json_text(call))}</pre></div>"
        )
    name = str(function.get("name") or "?")
    call_id = str(call.get("id") or "")
    if call_id:
        tool_names[call_id] = name
    shown_id = f" ({_clip(call_id, MAX_NAME_CHARS)})" if call_id else ""
    return (
        f'<div class="toolcall"><span class="name">→ {_clip(name, MAX_NAME_CHARS)}'
        f"{shown_id}</span>"
        f"<pre>{_clip(_pretty_arguments(function.get('arguments')))}</pre></div>"
    )


def _message_html(message: Any, tool_names: dict[str, str]) -> str:
    if not isinstance(message, Mapping):
        return f'<div class="msg"><pre>{_clip(str(message))}</pre></div>'
    role = str(message.get("role") or "message")
    label = _clip(role, MAX_NAME_CHARS)
    if role == "tool":
        call_id = str(message.get("tool_call_id") or "")
        name = tool_names.get(call_id)
        label = f"tool · {_clip(name, MAX_NAME_CHARS)}" if name else "tool"
        if call_id:
            label += f" ({_clip(call_id, MAX_NAME_CHARS)})"
    parts = [f'<div class="msg {_e(role[:MAX_NAME_CHARS])}"><div class="role">{label}</div>']
    text = _content_text(message.get("content"))
    calls = message.get("tool_calls")
    if text or not calls:
        parts.append(f"<pre>{_clip(text)}</pre>")
    if calls:
        parts.extend(
            _tool_call_html(call, tool_names)
            for call in (calls if isinstance(calls, list) else [calls])
        )
    parts.append("</div>")
    return "".join(parts)


def _conversation_html(messages: Any, tool_names: dict[str, str]) -> str:
    if messages is None:
        return ""
    if isinstance(messages, str):  # completion-style text
        return f'<div class="msg"><pre>{_clip(messages)}</pre></div>'
    if not isinstance(messages, list):  # one message object, or a stray number
        return _message_html(
            messages if isinstance(messages, Mapping) else _json_text(messages), tool_names
        )
    return "".join(_message_html(m, tool_names) for m in messages)


def rollout_html(record: Mapping[str, Any], threshold: float) -> str:
    """One rollout as a collapsible section: header line, error, conversation, metrics."""
    status = rollout_status(record, threshold)
    index = record.get("index")
    anchor = f"rollout-{index}" if isinstance(index, int) else ""
    bits = [
        f"#{_e(index)}",
        f"example {_e(record.get('example_id'))}",
        f'<span class="reward">reward {_num(record.get("reward"))}</span>',
        _name(record.get("stop_reason") or status),
    ]
    if record.get("turn") is not None:
        bits.append(f"{_e(record.get('turn'))} turns")
    called = record.get("tools_called")
    if called:
        names = ", ".join(map(str, called)) if isinstance(called, list) else str(called)
        bits.append("tools: " + _clip(names, MAX_ERROR_CHARS))
    if record.get("error"):
        bits.append("<b>errored</b>")
    body = []
    if record.get("error"):
        body.append(
            f'<div class="error">{_clip(error_text(record["error"]), MAX_ERROR_CHARS)}</div>'
        )
    if record.get("reward_errors"):
        body.append(
            '<div class="error">reward function errors: '
            f"{_e(json.dumps(record['reward_errors'], ensure_ascii=False)[:2000])}</div>"
        )
    answer = record.get("answer")
    meta = [f"<b>task</b> {_name(record.get('task'))}"]
    if answer not in (None, ""):
        meta.append(f"<b>answer</b> {_clip(str(answer))}")
    metrics = record.get("metrics")
    if isinstance(metrics, Mapping) and metrics:
        meta.append(" · ".join(f"<b>{_name(k)}</b> {_num(v)}" for k, v in metrics.items()))
    body.append(f'<p class="kv">{" · ".join(meta)}</p>')
    tool_names: dict[str, str] = {}
    body.append(_conversation_html(record.get("prompt"), tool_names))
    body.append(_conversation_html(record.get("completion"), tool_names))
    id_attr = f' id="{anchor}"' if anchor else ""
    return (
        f'<details class="rollout {status}" data-status="{status}"{id_attr}>'
        f'<summary>{" · ".join(bits)}</summary><div class="body">{"".join(body)}</div>'
        "</details>"
    )


# -------------------------------------------------------------------- page


def render_report(
    metadata: Mapping[str, Any],
    records: list[dict[str, Any]],
    *,
    source: str = "",
    max_rollouts: int = 1000,
    damaged_lines: Sequence[int] = (),
    tamed_values: int = 0,
    metadata_problem: str = "",
) -> str:
    """The whole report as one HTML string.

    `damaged_lines` are the numbers of the lines of results.jsonl that could not be
    read: the page says so, since every count on it then covers fewer rollouts.
    `tamed_values` counts values replaced by a marker (see `report_input`), and
    `metadata_problem` says why the run's settings are unknown; both are noted too.
    """
    tame = Tamer()  # (values `read_run` already tamed are left as they are)
    records = [tame(dict(record)) for record in records]
    metadata = redact_secrets(tame(dict(metadata)))  # runs written before keys were redacted
    tamed_values += tame.count
    summary = summarize_records(records, metadata)
    rows = latest_records(records)
    env_id = metadata.get("env_id") or "evaluation"
    model = metadata.get("model") or "?"
    facts = [f"model {model}"]
    for key in ("status", "started_at", "base_url"):
        if metadata.get(key):
            facts.append(f"{key.replace('_', ' ')} {metadata[key]}")
    if metadata.get("env_args"):
        facts.append(f"env args {_json_text(metadata['env_args'])}")
    if metadata.get("sampling_args"):
        facts.append(f"sampling {_json_text(metadata['sampling_args'])}")
    if source:
        facts.append(source)
    shown = rows[: max(0, max_rollouts)]
    clipped = (
        f'<p class="note">Showing the first {len(shown)} of {len(rows)} rollouts '
        "(--max-rollouts).</p>"
        if len(shown) < len(rows)
        else ""
    )
    threshold = summary.pass_threshold
    scored_rewards = [r.get("reward") for r in rows if not r.get("error")]
    rollouts = "".join(rollout_html(r, threshold) for r in shown)
    if not rows:
        rollouts = '<p class="note" id="no-rollouts">No rollout has finished yet.</p>'
    buttons = "".join(
        f'<button type="button" data-filter="{f}">{label}</button>'
        for f, label in (
            ("all", "all"),
            ("passed", "passed"),
            ("failed", "failed"),
            ("errored", "errored"),
        )
    )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>vfgym · {_e(_plain_cut(env_id))} · {_e(_plain_cut(model))}</title>"
        f"<style>{CSS}</style></head>"
        f'<body><main><header><h1 id="title">{_name(env_id)}</h1>'
        f'<p class="meta">{" · ".join(_clip(str(f), MAX_FACT_CHARS) for f in facts)}</p>'
        f"{_missing_metadata_html(metadata_problem)}{_damaged_html(damaged_lines)}"
        f"{_tamed_html(tamed_values)}</header>"
        f'<section id="summary">{_summary_html(summary)}</section>'
        f"<section><h2>Reward distribution</h2>{histogram_svg(scored_rewards)}</section>"
        f'<section id="rollouts"><h2>Rollouts</h2><div class="controls">{buttons}'
        '<input id="search" type="search" placeholder="search text in rollouts">'
        '<button type="button" id="expand">expand all</button>'
        '<button type="button" id="collapse">collapse all</button>'
        f'<span id="shown"></span></div>{clipped}{rollouts}</section>'
        f"</main><script>{JS}</script></body></html>\n"
    )


def _missing_metadata_html(problem: str) -> str:
    """The note that the run's settings are unknown, and why."""
    if not problem:
        return ""
    return (
        f'<p class="note" id="no-metadata">{_e(problem)}: the run\'s settings (environment, '
        "model, arguments, status) are unknown; the rollouts below are all this page "
        "knows of the run.</p>"
    )


def _tamed_html(count: int) -> str:
    """The note on values the page shows as a marker instead of as they are."""
    if not count:
        return ""
    plural = "s" if count != 1 else ""
    return (
        f'<p class="note" id="tamed">{count} value{plural} could not be shown as written '
        f"(numbers too large for a float, or nesting deeper than {MAX_DEPTH} levels) and "
        f"{'are' if plural else 'is'} marked where {'they' if plural else 'it'} stood; "
        f"{RESULTS_FILE} keeps them whole.</p>"
    )


def _damaged_html(numbers: Sequence[int]) -> str:
    """The note on lines of results.jsonl that were left out, naming the first few."""
    if not numbers:
        return ""
    named = [str(n) for n in numbers[:5]]
    which = named[0] if len(named) == 1 else ", ".join(named[:-1]) + " and " + named[-1]
    if len(numbers) > len(named):
        which = ", ".join(named) + f" and {len(numbers) - len(named)} more"
    plural = "s" if len(numbers) != 1 else ""
    return (
        f'<p class="note" id="damaged">{len(numbers)} damaged line{plural} of {RESULTS_FILE} '
        f"(line{plural} {which}) could not be read and {'are' if plural else 'is'} left out "
        "of everything below; `vfgym eval --resume` on this directory runs the rollouts "
        "that have no readable line again.</p>"
    )


def write_report(directory: Path, output: Path | None = None, max_rollouts: int = 1000) -> Path:
    """Read a results directory and write its report (default: DIRECTORY/report.html)."""
    if not directory.is_dir():
        raise CommandError(
            f"{directory} is not a directory; give the results directory `vfgym eval` printed "
            "(it holds results.jsonl and metadata.json)",
            EXIT_USAGE,
        )
    if not (directory / RESULTS_FILE).exists() and not (directory / METADATA_FILE).exists():
        raise CommandError(
            f"{directory} holds no {RESULTS_FILE} or {METADATA_FILE}; is it a directory written "
            "by `vfgym eval`?",
            EXIT_USAGE,
        )
    if max_rollouts < 0:
        raise CommandError(
            f"--max-rollouts must be 0 or more (the number of conversations shown), not "
            f"{max_rollouts}",
            EXIT_USAGE,
        )
    run = read_run(directory)
    path = output if output is not None else directory / "report.html"
    html = render_report(
        run.metadata,
        run.records,
        source=str(directory),
        max_rollouts=max_rollouts,
        damaged_lines=run.damaged_lines,
        tamed_values=run.tamed_values,
        metadata_problem=run.metadata_problem,
    )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(_utf8(html))
    except OSError as exc:
        raise CommandError(f"cannot write the report to {path}: {exc}") from None
    return path


def _utf8(html: str) -> bytes:
    """The page as UTF-8. A lone surrogate (model text that was not valid Unicode, kept
    as a JSON escape in the results) has no UTF-8 form: it is shown as U+FFFD."""
    try:
        return html.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", html).encode("utf-8")


__all__ = ["histogram_svg", "render_report", "rollout_html", "rollout_status", "write_report"]

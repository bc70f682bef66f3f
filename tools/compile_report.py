#!/usr/bin/env python3
"""tools/compile_report.py: one self-contained HTML page from a KILN_TRACE directory (as tlparse).

    KILN_TRACE=/tmp/trace python train.py
    python tools/compile_report.py /tmp/trace          # writes /tmp/trace/index.html
    python tools/compile_report.py /tmp/trace -o report.html

The page shows, per process and per frame (a function kiln compiled; a resume function after a
graph break is a frame of its own), each compile by its ID `[frame/recompile]`: what triggered it
(the failed guards of a recompile), its graph breaks with the user's source line and the hint, its
guards, the Dynamo graph, the AOT graphs, the kernels Inductor generated and its output code, and
the compile time by phase (dynamo, aot, inductor lowering, LLVM codegen). A summary on top counts
frames, compiles, breaks, recompiles, graphs and kernels. Nothing outside the file is loaded: no
script, font or style sheet, so it opens offline and can be attached to a bug report.

Reads the `kiln_trace_*.jsonl` files kiln/_logging/_structured.py writes (its banner lists the
events); standard library only, so it runs without kiln.
"""

import argparse
import collections
import glob
import html
import json
import os
import sys

PHASES = ("dynamo", "aot", "inductor lowering", "LLVM codegen")
PHASE_COLORS = {"dynamo": "#4e79a7", "aot": "#f28e2b", "inductor lowering": "#59a14f", "LLVM codegen": "#b07aa1"}
GRAPH_EVENTS = (("dynamo_graph", "Dynamo graph"), ("aot_joint_graph", "AOT joint graph"),
                ("aot_forward_graph", "AOT forward graph"), ("aot_backward_graph", "AOT backward graph"),
                ("aot_inference_graph", "AOT inference graph"))

CSS = """
body { font-family: -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.25em; border-bottom: 1px solid #ccc; margin-top: 1.5em; }
h3 { font-size: 1.05em; margin: 1em 0 .3em; }
table { border-collapse: collapse; margin: .4em 0; } td, th { border: 1px solid #ddd; padding: 3px 8px;
  text-align: left; vertical-align: top; font-size: .92em; } th { background: #f3f3f3; }
pre { background: #f7f7f7; border: 1px solid #e3e3e3; padding: .5em; overflow-x: auto; font-size: .85em; }
code { background: #f3f3f3; padding: 0 3px; }
details { margin: .3em 0 .3em 1em; } summary { cursor: pointer; }
.compile { border-left: 4px solid #4e79a7; padding-left: .6em; margin: .8em 0; }
.compile.recompiled { border-left-color: #e15759; } .compile.eager { border-left-color: #999; }
.break { background: #fff4e5; border: 1px solid #f0c36d; padding: .4em .6em; margin: .4em 0; }
.recompile { background: #fdecea; border: 1px solid #e8a29b; padding: .4em .6em; margin: .4em 0; }
.bar { display: flex; height: 14px; width: 420px; border: 1px solid #ccc; } .bar span { display: block; }
.legend span { display: inline-block; width: 10px; height: 10px; margin: 0 4px 0 12px; }
.muted { color: #777; }
"""


def load(directory):
    """{file name: [events]} for every trace file under `directory`."""
    files = sorted(glob.glob(os.path.join(directory, "*.jsonl")))
    runs = {}
    for path in files:
        events = []
        with open(path) as f:
            for number, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    events.append(json.loads(line))
                except json.JSONDecodeError:  # a process killed mid-write leaves half a line
                    events.append({"event": "unreadable", "line": number})
        runs[os.path.basename(path)] = events
    return runs


class Compile:
    """Everything the trace says about one compile ID."""

    def __init__(self, compile_id):
        self.id = compile_id
        self.start = self.end = None
        self.recompile = None
        self.breaks, self.graphs, self.outputs, self.errors = [], [], [], []
        self.guards = None
        self.phases = collections.defaultdict(float)
        self.steps = collections.defaultdict(float)

    @property
    def function(self):
        return (self.start or self.end or {}).get("function") or "?"

    @property
    def label(self):
        """The function's name; a resume function (the code after a graph break) says so."""
        resumed = (self.start or {}).get("resume")
        return self.function + (" (resumed after a graph break)" if resumed else "")

    @property
    def status(self):
        return (self.end or {}).get("status") or "unfinished"

    def kernels(self):
        return [k for o in self.outputs for k in o.get("kernels") or []]


def _sort_key(compile_id):
    try:
        frame, count = compile_id.split("/")
        return int(frame), int(count)
    except (AttributeError, ValueError):
        return (1 << 62, 0)


def collect(events):
    """{compile id or None: Compile} in order of compile ID."""
    compiles = {}
    for e in events:
        cid = e.get("compile_id")
        c = compiles.get(cid)
        if c is None:
            c = compiles[cid] = Compile(cid)
        kind = e.get("event")
        if kind == "compile_start":
            c.start = e
        elif kind == "compile_end":
            c.end = e
        elif kind == "recompile":
            c.recompile = e
        elif kind == "graph_break":
            c.breaks.append(e)
        elif kind == "internal_error":
            c.errors.append(e)
        elif kind == "guards":
            c.guards = e.get("payload")
        elif kind == "inductor_output_code":
            c.outputs.append(e)
        elif kind == "compile_phase":
            c.phases[e.get("phase")] += e.get("seconds") or 0.0
            c.steps[e.get("key")] += e.get("seconds") or 0.0
        elif any(kind == name for name, _ in GRAPH_EVENTS):
            c.graphs.append(e)
    return dict(sorted(compiles.items(), key=lambda kv: _sort_key(kv[0])))


# --- HTML -----------------------------------------------------------------------------------------
def esc(value):
    return html.escape(str(value), quote=True)


def anchor(prefix, compile_id):
    return f"{prefix}-{esc(compile_id).replace('/', '-')}"


def phase_bar(phases, scale):
    total = sum(phases.values())
    if not total:
        return ""
    parts = "".join(f'<span style="width:{max(1, round(420 * phases[p] / scale))}px;background:{PHASE_COLORS[p]}" '
                    f'title="{esc(p)}: {phases[p]:.4f} s"></span>' for p in PHASES if phases.get(p))
    return f'<div class="bar" title="{total:.4f} s">{parts}</div>'


def phase_table(phases):
    cells = "".join(f"<td>{phases.get(p, 0.0):.4f}</td>" for p in PHASES)
    return (f"<table><tr>{''.join(f'<th>{esc(p)} (s)</th>' for p in PHASES)}<th>total (s)</th></tr>"
            f"<tr>{cells}<td>{sum(phases.values()):.4f}</td></tr></table>")


def where(e):
    if e.get("file"):
        return f"{e['file']}:{e.get('line')}" + (f" in {e['function']}" if e.get("function") else "")
    return e.get("location") or "?"


def render_break(b):
    stack = b.get("user_stack") or []
    chain = ""
    if len(stack) > 1:
        chain = "<details><summary>user call chain</summary><pre>" + esc("\n".join(
            f'  File "{s.get("file")}", line {s.get("line")}, in {s.get("function")}\n    {s.get("code", "")}'
            for s in stack)) + "</pre></details>"
    whole = f'<div class="muted">{esc(b["whole_frame"])}</div>' if b.get("whole_frame") else ""
    hint = f"<div>hint: {esc(b['hint'])}</div>" if b.get("hint") else ""
    return (f'<div class="break"><b>Graph break:</b> {esc(b.get("reason"))}<br>'
            f'<code>{esc(where(b))}</code><pre>{esc(b.get("code") or "")}</pre>{hint}{whole}{chain}</div>')


def render_recompile(r):
    items = "".join(f"<li><code>{esc(reason)}</code></li>" for reason in r.get("reasons") or [])
    limit = " <b>(recompile limit hit: the frame runs eagerly from now on)</b>" if r.get("limit_hit") else ""
    return (f'<div class="recompile"><b>Recompile</b> of {esc(r.get("function"))}{limit}: '
            f'<code>{esc(r.get("reason") or "")}</code><details><summary>the failed guard of each cached entry '
            f'(newest first)</summary><ul>{items}</ul></details></div>')


def pre_block(title, text, open_=False):
    return (f"<details{' open' if open_ else ''}><summary>{esc(title)}</summary>"
            f"<pre>{esc(text or '')}</pre></details>")


def render_compile(c, scale):
    classes = "compile" + (" recompiled" if c.recompile else "") + (" eager" if c.status != "compiled" else "")
    start = c.start or {}
    title = (f"[{esc(c.id)}] {esc(c.label)} <span class='muted'>({esc(where(start))})</span> — "
             f"{esc(c.status)}")
    parts = [f'<div class="{classes}" id="{anchor("compile", c.id)}"><h3>{title}</h3>']
    if (c.end or {}).get("error"):
        parts.append(f"<div class='break'>error: {esc(c.end['error'])}</div>")
    if (c.end or {}).get("reason"):
        parts.append(f"<div class='break'>runs eagerly: {esc(c.end['reason'])}</div>")
    for e in c.errors:
        parts.append(f"<div class='break'>kiln's compiler failed at the graph's first call, so it runs eagerly: "
                     f"{esc(e.get('error'))}</div>")
    if c.recompile:
        parts.append(render_recompile(c.recompile))
    stack = start.get("user_stack") or []
    if stack:
        parts.append(pre_block("called from", "\n".join(
            f'File "{s.get("file")}", line {s.get("line")}, in {s.get("function")}\n    {s.get("code", "")}'
            for s in stack)))
    parts += [render_break(b) for b in c.breaks]
    if c.phases:
        parts.append(f"<div>compile time: {sum(c.phases.values()):.4f} s {phase_bar(c.phases, scale)}</div>")
        parts.append(phase_table(c.phases))
    if c.guards:
        parts.append(pre_block("Guards", c.guards))
    labels = dict(GRAPH_EVENTS)
    for g in c.graphs:
        parts.append(pre_block(g.get("title") or labels.get(g.get("event"), g.get("event")), g.get("payload")))
    for o in c.outputs:
        kernels = o.get("kernels") or []
        label = "backward" if o.get("is_backward") else "forward/inference"
        names = ", ".join(k.get("name", "?") for k in kernels[:6]) + (", ..." if len(kernels) > 6 else "") or "none"
        inner = "".join(pre_block(f"kernel {k.get('name')}", k.get("source")) for k in kernels)
        fallbacks = "".join(f"<li><code>{esc(f.get('op'))}</code>: {esc(f.get('why'))}</li>"
                            for f in o.get("fallbacks") or [])
        inner += f"<div>fallbacks (extern calls):<ul>{fallbacks}</ul></div>" if fallbacks else ""
        inner += pre_block("output code", o.get("payload"))
        parts.append(f"<details><summary>Inductor ({label}): {len(kernels)} kernels: {esc(names)}</summary>"
                     f"{inner}</details>")
    parts.append("</div>")
    return "\n".join(parts)


def render_run(name, events):
    compiles = collect(events)
    frames = collections.OrderedDict()
    for c in compiles.values():
        frame = c.id.split("/")[0] if c.id else None
        frames.setdefault(frame, []).append(c)
    all_phases = collections.defaultdict(float)
    for c in compiles.values():
        for p, s in c.phases.items():
            all_phases[p] += s
    scale = max([sum(c.phases.values()) for c in compiles.values()] + [1e-9])
    breaks = [(c, b) for c in compiles.values() for b in c.breaks]
    recompiles = [c for c in compiles.values() if c.recompile]
    started = [c for c in compiles.values() if c.start]
    counts = [("frames", len([f for f in frames if f is not None])), ("compiles", len(started)),
              ("graph breaks", len(breaks)), ("recompiles", len(recompiles)),
              ("graphs", sum(1 for c in compiles.values() for g in c.graphs if g.get("event") == "dynamo_graph")),
              ("kernels", sum(len(c.kernels()) for c in compiles.values()))]
    out = [f"<h2>{esc(name)}</h2>", "<table><tr>" + "".join(f"<th>{esc(k)}</th>" for k, _ in counts) + "</tr><tr>"
           + "".join(f"<td>{v}</td>" for _, v in counts) + "</tr></table>"]
    if all_phases:
        legend = "".join(f'<span style="background:{PHASE_COLORS[p]}"></span>{esc(p)}' for p in PHASES)
        out += ["<h3>Compile time by phase</h3>", phase_table(all_phases), phase_bar(all_phases, sum(all_phases.values())),
                f'<div class="legend muted">{legend}</div>']
    if breaks:
        out.append("<h3>Graph breaks</h3><ul>" + "".join(
            f'<li><a href="#{anchor("compile", c.id)}">[{esc(c.id)}]</a> {esc(b.get("reason"))} at '
            f'<code>{esc(where(b))}</code>: <code>{esc(b.get("code") or "")}</code></li>' for c, b in breaks) + "</ul>")
    if recompiles:
        out.append("<h3>Recompiles</h3><ul>" + "".join(
            f'<li><a href="#{anchor("compile", c.id)}">[{esc(c.id)}]</a> {esc(c.function)}: '
            f'<code>{esc(c.recompile.get("reason") or "?")}</code></li>' for c in recompiles) + "</ul>")
    out.append("<h3>Frames</h3><table><tr><th>frame</th><th>function</th><th>where</th><th>compiles</th>"
               "<th>breaks</th><th>kernels</th><th>compile time (s)</th></tr>")
    for frame, cs in frames.items():
        first = next((c.start for c in cs if c.start), {}) or {}
        label = frame if frame is not None else "—"
        out.append(f'<tr><td><a href="#{anchor("frame", label)}">{esc(label)}</a></td><td>{esc(cs[0].label)}</td>'
                   f"<td>{esc(where(first))}</td><td>{len([c for c in cs if c.start])}</td>"
                   f"<td>{sum(len(c.breaks) for c in cs)}</td><td>{sum(len(c.kernels()) for c in cs)}</td>"
                   f"<td>{sum(sum(c.phases.values()) for c in cs):.4f}</td></tr>")
    out.append("</table>")
    for frame, cs in frames.items():
        label = frame if frame is not None else "—"
        heading = (f"Frame {esc(label)}: {esc(cs[0].label)}" if frame is not None
                   else "Outside a compile (compiled lazily, with no compile ID)")
        out.append(f'<h2 id="{anchor("frame", label)}">{heading}</h2>')
        out += [render_compile(c, scale) for c in cs]
    return "\n".join(out)


def render(runs, directory):
    body = [f"<h1>kiln compile report</h1><p class='muted'>from {esc(os.path.abspath(directory))}: "
            f"{len(runs)} trace file(s)</p>"]
    if not runs:
        body.append("<p>No kiln_trace_*.jsonl files here: run the program with KILN_TRACE set to this directory.</p>")
    for name, events in runs.items():
        body.append(render_run(name, events))
    return ("<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>kiln compile report</title>"
            f"<style>{CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")


def main(argv=None):
    parser = argparse.ArgumentParser(description="Renders a KILN_TRACE directory as one self-contained HTML page.")
    parser.add_argument("directory", help="the directory KILN_TRACE named")
    parser.add_argument("-o", "--out", help="the HTML file to write (default: DIRECTORY/index.html)")
    args = parser.parse_args(argv)
    if not os.path.isdir(args.directory):
        parser.error(f"{args.directory} is not a directory")
    out = args.out or os.path.join(args.directory, "index.html")
    with open(out, "w") as f:
        f.write(render(load(args.directory), args.directory))
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

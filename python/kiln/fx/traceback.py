"""kiln.fx.traceback: where a graph node came from in the user's program (source provenance).

Dynamo records, on every node it creates, `meta["stack_trace"]`: the user's call chain at that
point as Python's traceback text (PyTorch's format, innermost frame last):

      File "/home/me/model.py", line 12, in forward
        x = self.fc(x)
      File ".../kiln/nn/modules/linear.py", line 48, in forward
        return F.linear(input, self.weight, self.bias)

AOTAutograd copies it to the aten nodes a node turns into (preserve_node_meta), and Inductor to
the kernels those make. Printed graphs and generated code show it as one comment, naming the
innermost frame that is the user's own (not kiln's), as the line a user would edit:

    # File "/home/me/model.py", line 12, in forward: x = self.fc(x)
"""

import linecache
import os
import re

_KILN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]*)", line (?P<line>\d+), in (?P<name>.*)$')


def format_stack(frames):
    """Traceback text for [(filename, line, function name)], outermost first."""
    parts = []
    for filename, line, name in frames:
        parts.append(f'  File "{filename}", line {line}, in {name}\n')
        text = linecache.getline(filename, line).strip()
        if text:
            parts.append(f"    {text}\n")
    return "".join(parts)


def parse_stack(stack_trace):
    """[(filename, line, function name)] of a stack_trace text, outermost first."""
    frames = []
    for text in (stack_trace or "").splitlines():
        m = _FRAME.match(text)
        if m:
            frames.append((m.group("file"), int(m.group("line")), m.group("name")))
    return frames


def is_kiln_file(filename):
    return os.path.abspath(filename).startswith(_KILN_DIR + os.sep)


def user_frame(stack_trace):
    """(filename, line, name) of the innermost frame outside kiln's package (the innermost frame
    when every one is kiln's), or None without a stack."""
    frames = parse_stack(stack_trace)
    if not frames:
        return None
    return next((f for f in reversed(frames) if not is_kiln_file(f[0])), frames[-1])


def provenance_comment(stack_trace):
    """`# File "model.py", line 12, in forward: x = self.fc(x)`, or None without a stack."""
    frame = user_frame(stack_trace)
    if frame is None:
        return None
    filename, line, name = frame
    text = linecache.getline(filename, line).strip()
    return f'# File "{filename}", line {line}, in {name}' + (f": {text}" if text else "")


def provenance_comments(stack_traces):
    """The distinct comments of several nodes' stack traces, in first-seen order (a fused kernel
    lists each source line it computes once)."""
    seen = []
    for trace in stack_traces:
        comment = provenance_comment(trace)
        if comment is not None and comment not in seen:
            seen.append(comment)
    return seen

// fx/interpreter.h: runs an aten graph node by node through the dispatcher (torch.fx.Interpreter
// for graphs make_fx recorded), with no Python in the loop.
//
// Note [Interpreting aten graphs]: AOTAutograd traces the joint graph twice: once through
// autograd (make_fx of the program and its backward), then that raw graph again through
// functionalization and the decompositions. The second trace replays the raw graph, which the
// Python fx.Interpreter did at ~30 us of Python per node. Here each node's boxed arguments are
// rebuilt from its args and kwargs as the make_fx tracer recorded them (fx/tracer.h): schema
// positions in order, left-out arguments at their defaults, nodes as the values they produced, a
// number in a Tensor parameter as the wrapped-number tensor Python's argument parser makes of it,
// lists of nodes as the list types of their parameters. Each value is dropped after its last
// reader, as torch.fx.Interpreter drops them.
//
// A graph qualifies (CanInterpret) when each node is a placeholder, the output, a call of an aten
// op or an `operator.getitem` of a multi-output op's result, and no argument is a Python object;
// other graphs stay with Python's Interpreter.
#pragma once

#include <string>
#include <vector>

#include "fx/graph.h"

namespace kiln::fx {

// Empty when `graph` can be interpreted; else why not (the first node that cannot be, named).
std::string WhyNotInterpretable(const Graph& graph);
inline bool CanInterpret(const Graph& graph) { return WhyNotInterpretable(graph).empty(); }

// Whether a Python target is `operator.getitem` (its printed name).
bool IsGetItem(const Target& target);

struct InterpretOptions {
  // When set: each node recorded into this graph while a node of the interpreted graph runs (a
  // make_fx trace of the replay) gets that node's meta["stack_trace"], unless it has one already
  // (the user's line, kept through AOT's retrace: Note [Provenance] in kiln/fx/traceback.py).
  Graph* annotate = nullptr;
};

// Runs `graph` on `inputs` (one per placeholder, in order) and returns the values of its output:
// the output's argument with each node replaced by its value. Multi-output values and nested
// containers come back as IValue lists only for tensors; the caller reads the structure from the
// output node (InterpretedOutput keeps it).
struct InterpretedOutput {
  Argument structure;          // the output node's argument
  std::vector<IValue> values;  // the value of each node in `structure`, in ForEachNode order
};
InterpretedOutput Interpret(const Graph& graph, std::vector<IValue> inputs, const InterpretOptions& options = {});

}  // namespace kiln::fx

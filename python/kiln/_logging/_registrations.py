"""kiln._logging._registrations: every name KILN_LOGS and set_logs accept, with what it shows.

A log names the Python loggers of a component; an artifact is one kind of message, written with
getArtifactLogger(__name__, name). A new artifact is registered here first (getArtifactLogger
refuses an unregistered one), with a one-line description for KILN_LOGS=help.
"""

from kiln._logging._internal import register_artifact, register_log

register_log("kiln", "kiln", "every kiln logger (`all` is the same)")
register_log("dynamo", "kiln._dynamo", "bytecode capture: what is compiled or skipped, and why")
register_log("aot", "kiln._functorch", "AOT autograd: tracing and partitioning times")
register_log("inductor", "kiln._inductor", "the Inductor backend: graphs compiled, kernels, times")

register_artifact("graph_breaks", "Prints whenever Dynamo decides that it needs to graph break (and why), "
                  "and frames that run eagerly as a whole. Useful for debugging why kiln.compile is slow")
register_artifact("graph_code", "Prints the Python code of each graph Dynamo captured (the FX GraphModule)")
register_artifact("guards", "Prints the guards of every compiled Dynamo frame (the guard tree)")
register_artifact("recompiles", "Prints the reason why a frame was recompiled: the guards that failed. Very useful")
register_artifact("bytecode", "Prints the Python code that replaces each captured frame (graph call, breaks, "
                  "resume functions)", off_by_default=True)
register_artifact("aot_graphs", "Prints the FX joint, forward and backward (or inference) graphs of AOT autograd, "
                  "after partitioning: what is given to Inductor")
register_artifact("output_code", "Prints the code Inductor generates (the wrapper and each kernel), its "
                  "fallbacks and autotuning choices", off_by_default=True)
register_artifact("perf_hints", "Prints hints about performance: the compile summary at exit (frames, graphs, "
                  "breaks, recompiles, time per phase: kiln._dynamo.utils.compile_times()) and thread oversubscription",
                  off_by_default=True)

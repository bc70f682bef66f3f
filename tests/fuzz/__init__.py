"""Differential fuzzer: random programs run in kiln (eager and every kiln.compile backend) and PyTorch.

gen.py writes programs as Python source, run.py executes one in a framework and records what came out,
compare.py judges kiln's record against PyTorch's, driver.py runs batches in subprocesses (crashes and
hangs are failures) and reduce.py shrinks a failing program. tools/fuzz.py is the command line.
"""

"""The bottom layer: the runtime contract systems program against, the trace and the
metrics computed from it, the run config, name registries, and the plumbing every
layer uses (result files, figures, progress). Imports nothing else of rolloutbench."""

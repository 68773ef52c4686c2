"""`rolloutbench validate gpu`: the simulated GPU step against measurements.

Three checks, each in a module of its own: the step models against the end-to-end
latencies measured in aiconfigurator-core's silicon sample (`silicon`), the roofline
against the measured-kernel model over batch, context and TP (`models`), and
PipelineRL's Appendix A re-derived with a measured GEMM utilisation (`appendix_a`).
"""

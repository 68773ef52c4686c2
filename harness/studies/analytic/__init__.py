"""Closed-form (analytical) throughput models from the papers, e.g. PipelineRL Appendix A."""

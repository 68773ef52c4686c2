"""Both step models against end-to-end serving latencies measured on real GPUs.

Why: the step models are built from kernels and datasheets; only a served model shows whether
their sum is the time a decode step takes. aiconfigurator-core ships such measurements
(`systems/silicon_sample.csv`): TPOT and TTFT of a framework serving a model at a batch and
ISL/OSL, dense and MoE, BF16 and FP8, with TP, EP and attention-DP layouts.

- `rows`: which rows are put to the simulator, and the engine settings each asks for;
- `prediction`: the simulator's TPOT (decode alone, and with the prefill share) and TTFT;
- `bins`: errors per bin (prefill load, batch, layout, backend, GPU, precision, dense/MoE);
- `report`, `figure`: the text and the figures.
"""

from harness.studies.validate.gpu.silicon.bins import per_bin
from harness.studies.validate.gpu.silicon.prediction import (
    MODELS,
    compare,
    predict,
    step_ms,
    tpot_ms,
    ttft_ms,
)
from harness.studies.validate.gpu.silicon.report import summary
from harness.studies.validate.gpu.silicon.rows import (
           BF16,
    GPUS,
    SAMPLE_REL,
    keep,
    model_ref,
    package_dir,
    portable_ref,
    precision,
)

__all__ = ["BF16", "GPUS", "MODELS", "SAMPLE_REL", "compare", "keep", "model_ref",
           "package_dir", "per_bin", "portable_ref", "precision", "predict", "step_ms",
           "summary", "tpot_ms", "ttft_ms"]

"""One configuration: checked before any work starts, then run on its runtime
(the simulator or the live one)."""

"""Graph optimization passes (whitepaper §5.1), run per Session.Run signature between pruning
and placement. `pipeline.py` orders them; each pass is a module with a function over the pruned
runtime Node list that keeps fed/fetched tensors, targets, stateful ops and control edges."""

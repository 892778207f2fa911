"""Training engine: optimizers and schedules, atomic checkpoints, the training run."""

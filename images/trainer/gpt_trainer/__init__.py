"""Reference trainer for the gpu-platform: spot-safe DDP / DeepSpeed with exact resume.

Entry points: ``python -m gpt_trainer.launch`` (torchrun wrapper, maps exit codes) and
``python -m gpt_trainer.train`` (the per-rank worker).
"""

__version__ = "0.1.0"

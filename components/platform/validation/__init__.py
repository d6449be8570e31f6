"""Post-deploy validation: the GPU smoke Jobs and the NCCL all-reduce test."""

"""GPU capacity: Karpenter (controller, interruption handling, NodePools), the cluster-autoscaler
for GPU managed node groups, the NVIDIA GPU Operator."""

"""The gpu-platform policy pack (pulumi-policy / CrossGuard)."""

"""Data: S3 buckets, the RWX file system (EFS or FSx for Lustre) with its CSI driver, per-team
volumes and FSx team directories."""

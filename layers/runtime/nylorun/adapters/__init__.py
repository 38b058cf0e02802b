"""Adapters: AWS implementations of the ports. boto3 lives here and nowhere else."""

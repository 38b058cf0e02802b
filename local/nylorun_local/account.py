"""The one AWS account and region the local stand-in plays."""

REGION = "us-east-1"
ACCOUNT = "123456789012"

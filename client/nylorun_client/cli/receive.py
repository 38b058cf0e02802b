"""`nylorun webhooks`: find the signing secrets the receiver verifies with, then start it."""

from __future__ import annotations

import argparse
import os
import sys

from nylorun_client.cli.running import EXIT_ERROR


def receive(args: argparse.Namespace) -> int:
    from nylorun_client import webhooks

    try:
        if args.agent_url:
            url, token = args.agent_url, args.token
            verifier = webhooks.Verifier(
                webhooks.fetch_signing_secrets(url, token), lambda: webhooks.fetch_signing_secrets(url, token)
            )
        elif args.secret_file:
            verifier = webhooks.Verifier(webhooks.read_secret_file(args.secret_file))
        elif os.environ.get("NYLORUN_PUSH_SECRET", "").split():
            verifier = webhooks.Verifier(os.environ["NYLORUN_PUSH_SECRET"].split())
        else:
            raise webhooks.SecretsUnavailable(
                "give the secrets with --from AGENT_URL (your own keys), --secret-file PATH or $NYLORUN_PUSH_SECRET"
            )
    except webhooks.SecretsUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    return webhooks.serve_webhooks(args.host, args.port, verifier, json_lines=args.json)

"""The local stack: moto stands in for AWS, pollers play Lambda's event source mappings, uvicorn serves the api
app; `nylorun serve` (serve.py) runs it. Not part of the Lambda layer: install it with the `local` extra."""

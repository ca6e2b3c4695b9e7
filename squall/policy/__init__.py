"""Pure crawl policy: no I/O, no Faust/aiohttp/aiokafka/argparse, no clock (tests/unit/test_layout.py)."""

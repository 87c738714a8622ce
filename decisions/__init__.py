"""Pure, synchronous decision code: given inputs (and a clock passed in), decide what happens.

Nothing here may import asyncio, openai, websockets or aiohttp, directly or through another
project module (tests/test_architecture.py checks it).
"""

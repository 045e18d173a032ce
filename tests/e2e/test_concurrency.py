"""200 simultaneous streaming requests on a tiny checkpoint: each completes, and each one's text
equals what the same request gives when sent alone (greedy decoding is batch-invariant)."""
import asyncio

import openai

N = 200


def prompt(i):
    return f"Request number {i}: " + "lorem ipsum " * (i % 7)


def test_200_simultaneous_streams_match_alone(server):
    async def run():
        client = openai.AsyncOpenAI(base_url=server.base + "/v1", api_key="x", max_retries=0, timeout=300)

        async def one(i, stream):
            kwargs = dict(model="tiny", prompt=prompt(i), max_tokens=6, temperature=0, extra_body={"ignore_eos": True})
            if not stream:
                return (await client.completions.create(**kwargs)).choices[0].text
            text, finish = "", None
            async for chunk in await client.completions.create(stream=True, **kwargs):
                if chunk.choices:
                    text += chunk.choices[0].text
                    finish = chunk.choices[0].finish_reason or finish
            assert finish == "length"
            return text

        together = await asyncio.gather(*(one(i, True) for i in range(N)))
        alone = [await one(i, False) for i in range(N)]
        await client.close()
        return together, alone

    together, alone = asyncio.run(run())
    assert together == alone
    server.wait_idle()

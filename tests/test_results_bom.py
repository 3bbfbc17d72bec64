"""A results.jsonl saved back by an editor as "UTF-8 with BOM" reads as it did."""

from __future__ import annotations

import codecs

from scripted_models import say_ok

from vfgym.envs import SingleTurnEnv
from vfgym.results.jsonl import RESULTS_FILE, read_results
from vfgym.results.report import write_report


async def test_a_byte_order_mark_is_not_part_of_the_first_record(model_server, tmp_path) -> None:
    server = await model_server(say_ok)
    env = SingleTurnEnv(dataset=[{"question": "a"}, {"question": "b"}])
    directory = tmp_path / "run"
    await env.evaluate(server.client(), "m", results_path=directory)
    _, before = read_results(directory)
    path = directory / RESULTS_FILE
    path.write_bytes(codecs.BOM_UTF8 + path.read_bytes())
    _, after = read_results(directory)
    assert len(before) == 2
    assert after == before
    page = write_report(directory).read_text(encoding="utf-8")
    assert 'id="damaged"' not in page

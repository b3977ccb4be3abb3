"""The worker through a database outage: it logs as DESIGN lesson 10 says, /healthz turns 503 and
back to 200, and every occurrence that came due meanwhile is accounted for, once."""

from __future__ import annotations

import json
import logging
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta

import pytest
from _serving import eventually, serving

import oncely
from _proxy import TcpProxy

OUTAGE_S = 4.0


def _health(address: str) -> tuple[int, dict[str, object]]:
    try:
        with urllib.request.urlopen(f"http://{address}/healthz", timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_a_database_outage_is_logged_reported_and_recovered_without_losing_occurrences(
    postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    proxy = TcpProxy("127.0.0.1", 5432)
    port = proxy.start()
    app = oncely.App(postgres_url.replace("@127.0.0.1:5432/", f"@127.0.0.1:{port}/"))
    ran: list[datetime] = []

    @app.job(oncely.every(seconds=1), overlap="allow")
    def beat(run: oncely.Run) -> None:
        ran.append(run.scheduled_for)

    direct = oncely.App(postgres_url)
    try:
        with (
            caplog.at_level(logging.INFO, logger="oncely"),
            serving(app, http="127.0.0.1:0", wake_cap=1.0) as worker,
        ):
            eventually(lambda: worker.http_address is not None, what="the HTTP server")
            address = worker.http_address
            assert address is not None
            eventually(lambda: _health(address)[0] == 200 and len(ran) >= 2, what="a beat")
            proxy.cut()
            cut_at = datetime.now(UTC)
            eventually(lambda: _health(address)[0] == 503, timeout=20, what="503")
            code, body = _health(address)
            print(f"during the outage: {code} {body}")
            time.sleep(OUTAGE_S)
            proxy.restore()
            eventually(lambda: _health(address)[0] == 200, timeout=40, what="200 again")
            restored_at = datetime.now(UTC)
            due = [
                cut_at.replace(microsecond=0) + timedelta(seconds=n)
                for n in range(1, int((restored_at - cut_at).total_seconds()))
            ]
            # misfire="skip" (the default) runs one missed occurrence and records the rest as
            # skipped, with the reason: each one that came due has its row either way.
            eventually(
                lambda: (
                    {o.scheduled_for for o in direct.history(key="beat", limit=1000)} >= set(due)
                ),
                timeout=20,
                what="a row for every occurrence due during the outage",
            )
    finally:
        proxy.close()
        app.close()
    occurrences = direct.history(key="beat", limit=1000)
    direct.close()
    assert body["status"] == "failing"
    records = [r for r in caplog.records if r.name == "oncely"]
    first = [r for r in records if r.levelno == logging.ERROR and "failed" in r.getMessage()]
    assert len(first) == 1, [r.getMessage() for r in records]
    assert first[0].exc_info is not None
    assert any("recovered after" in r.getMessage() for r in records)
    # The outage is reported by oncely alone: the pool's own warnings came several a second.
    noise = [r.getMessage() for r in caplog.records if r.name.startswith("psycopg")]
    assert noise == []
    assert len(ran) == len(set(ran)), "an occurrence ran twice"
    during = [o for o in occurrences if o.scheduled_for in due]
    assert len(during) == len(due)
    assert {o.status for o in during} <= {"succeeded", "skipped"}
    assert all(o.reason for o in during if o.status == "skipped")
    assert any(when > cut_at for when in ran), "the job did not fire again after recovery"
    print(
        f"outage of about {OUTAGE_S:.0f} s: {len(due)} occurrences came due during it: "
        f"{sum(1 for o in during if o.status == 'succeeded')} ran once after recovery, "
        f"{sum(1 for o in during if o.status == 'skipped')} skipped with a reason"
    )

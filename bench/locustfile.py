"""Locust users for bench/load.py: each is logged in as one of the benchmark organisation's
people (bench/attribution_org.py; its session made by bench/load.py) and browses what a team
lead looks at: the overview, a project of their team, the waste page, a model of their team,
and the trivial view in the same mix.

bench/load.py passes the sessions and their pages in LOAD_PEOPLE (JSON) and the think time in
LOAD_THINK ("a,b": seconds drawn uniformly between a and b; "0": a closed loop, no think time).
"""

import itertools
import json
import os
import random

from locust import HttpUser, between, constant, task

PEOPLE = json.loads(os.environ.get("LOAD_PEOPLE", "[]"))
_low, _, _high = os.environ.get("LOAD_THINK", "3,7").partition(",")
WAIT = constant(0) if float(_low) == 0 else between(float(_low), float(_high or _low))
_next_person = itertools.count()


class TeamLead(HttpUser):
    wait_time = WAIT

    def on_start(self):
        self.person = PEOPLE[next(_next_person) % len(PEOPLE)]
        host = self.client.base_url.split("://", 1)[1].split(":")[0]
        self.client.cookies.set("sessionid", self.person["session"], domain=host)

    def _get(self, url: str, name: str) -> None:
        with self.client.get(url, name=name, allow_redirects=False, catch_response=True) as answer:
            if answer.status_code != 200:
                answer.failure(f"{name} answered {answer.status_code}")

    @task(3)
    def overview(self):
        self._get("/", "overview")

    @task(3)
    def project(self):
        self._get(f"/projects/{random.choice(self.person['projects'])}/", "project page")

    @task(2)
    def waste(self):
        self._get("/waste/", "waste page")

    @task(2)
    def model(self):
        self._get(f"/models/{random.choice(self.person['models'])}/", "model page")

    @task(2)
    def trivial(self):
        self._get("/bench/trivial/", "trivial view")
